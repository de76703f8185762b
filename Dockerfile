# syntax=docker/dockerfile:1
# optmark as a container image. Build: `docker build -t optmark .`; run:
#   docker run -p 8080:8080 -v optmark-data:/var/lib/optmark optmark
# Debian bookworm on both stages: the uWebSockets.js binary needs glibc 2.36 and does not load on Alpine
# (musl). See docs/operating.md for backups, TLS in front and the first API key.
ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: native addons (better-sqlite3, optmark's C++), TypeScript, then production dependencies only
# (libjpeg62-turbo-dev: the fingerprint detector's scaled JPEG decode, native/src/jpeg.cc)
FROM ${NODE_IMAGE} AS build
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ libjpeg62-turbo-dev \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies and native code first, so a TypeScript change does not rebuild them. `npm ci` would also
# run the project's prepare script (the TypeScript build), which needs sources not copied yet; so the
# install skips scripts and `npm rebuild` then runs the dependencies' install scripts and the project's
# own (node native/build.mjs: optmark's C++ addons).
COPY package.json package-lock.json ./
COPY native/ ./native/
RUN npm ci --ignore-scripts && npm rebuild && ls native/build/Release/*.node && ls native/build/Release/optmark_jpeg.node
COPY . .
RUN npm run build \
  && npm prune --omit=dev \
  && npm cache clean --force

# ---- runtime: node, tini as PID 1, libjpeg for optmark_jpeg.node, the built service, an unprivileged user
FROM ${NODE_IMAGE} AS runtime
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini libjpeg62-turbo \
  && rm -rf /var/lib/apt/lists/* \
  && groupadd --system --gid 10001 optmark \
  && useradd --system --uid 10001 --gid optmark --home-dir /var/lib/optmark --no-create-home --shell /usr/sbin/nologin optmark \
  && install -d -o optmark -g optmark -m 0700 /var/lib/optmark
WORKDIR /app
COPY --from=build /src/package.json /src/package-lock.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/bin ./bin
COPY --from=build /src/docs ./docs
COPY --from=build /src/native/build/Release/*.node ./native/build/Release/
ENV NODE_ENV=production \
  OPTMARK_HOST=0.0.0.0 \
  OPTMARK_PORT=8080 \
  OPTMARK_DATA_DIR=/var/lib/optmark
# The store (SQLite), the provenance signing keys and the fingerprint secret live here: back it up.
VOLUME ["/var/lib/optmark"]
EXPOSE 8080
USER 10001:10001
# /healthz answers 200 while the process is alive (node's fetch: the slim image has no curl).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.OPTMARK_PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# tini reaps zombies and forwards SIGTERM to node, so `docker stop` drains in-flight requests.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/src/cli.js"]
CMD ["serve"]
