// Real git repositories for the scan tests: made with the system git from a table of paths (files,
// symbolic links, submodule entries), and served on loopback by `git daemon` (git://) and by
// `git http-backend` behind a small node HTTP server (smart HTTP), both allowing `--filter`.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, createServer as netServer } from 'node:net';
import { dirname, join } from 'node:path';

/** The environment of the tests' own git runs: no user or system config. */
export function repoEnv(home: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'Test',
    GIT_AUTHOR_EMAIL: 'test@example.org',
    GIT_COMMITTER_NAME: 'Test',
    GIT_COMMITTER_EMAIL: 'test@example.org',
  };
}

export type RepoFile = Uint8Array | string | { symlink: string } | { submodule: string };

/** `git init` in `dir` with `files` committed on `main`; the repository allows `--filter` when served. */
export function makeRepo(dir: string, files: Record<string, RepoFile>): void {
  const env = repoEnv(dir);
  const git = (...args: string[]): string => execFileSync('git', args, { cwd: dir, env, encoding: 'utf8', maxBuffer: 1 << 30 });
  mkdirSync(dir, { recursive: true });
  git('init', '--quiet', '--initial-branch=main');
  git('config', 'uploadpack.allowFilter', 'true');
  git('config', 'uploadpack.allowAnySHA1InWant', 'true');
  for (const [rel, content] of Object.entries(files)) {
    const path = join(dir, rel);
    mkdirSync(dirname(path), { recursive: true });
    if (typeof content === 'object' && 'symlink' in content) symlinkSync(content.symlink, path);
    else if (!(typeof content === 'object' && 'submodule' in content)) writeFileSync(path, content);
  }
  git('add', '--all');
  // Submodule entries go in after `add --all`, which would take them out again (nothing is at their path).
  for (const [rel, content] of Object.entries(files)) {
    if (typeof content === 'object' && 'submodule' in content) git('update-index', '--add', '--cacheinfo', `160000,${content.submodule},${rel}`);
  }
  git('commit', '--quiet', '-m', 'fixture');
}

/** A free TCP port on loopback (listen on 0, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = netServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const c = connect(port, '127.0.0.1');
      c.on('connect', () => {
        c.destroy();
        resolve(true);
      });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

export interface Served {
  /** The URL of the repository folder `name` below the served root. */
  url(name: string): string;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** `git daemon` serving every repository below `root` on loopback. */
export async function gitDaemon(root: string): Promise<Served> {
  const port = await freePort();
  // A relay in front of the daemon counts the connections made to it.
  const daemonPort = await freePort();
  const child: ChildProcess = spawn(
    'git',
    ['daemon', '--reuseaddr', `--base-path=${root}`, '--export-all', '--listen=127.0.0.1', `--port=${daemonPort}`, '--enable=upload-pack', root],
    // Its own process group: `git daemon` runs git-daemon as a child, which must go with it.
    { env: repoEnv(root), stdio: 'ignore', detached: true },
  );
  await waitForPort(daemonPort);
  let connections = 0;
  // Half-open both ways: a client that closes its sending side (bin/git-proxy.mjs does) still gets the pack.
  const relay = netServer({ allowHalfOpen: true }, (socket) => {
    connections++;
    const upstream = connect({ port: daemonPort, host: '127.0.0.1', allowHalfOpen: true });
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve));
  return {
    url: (name) => `git://127.0.0.1:${port}/${name}`,
    connections: () => connections,
    close: async () => {
      process.kill(-child.pid!, 'SIGKILL');
      await new Promise((r) => relay.close(r));
    },
  };
}

/** `git http-backend` (smart HTTP) behind a node HTTP server on loopback; `redirect` answers 302 for paths starting /moved/. */
export async function gitHttp(root: string, options: { redirectTo?: string } = {}): Promise<Served> {
  let connections = 0;
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname.startsWith('/moved/') && options.redirectTo) {
      res.writeHead(302, { Location: `${options.redirectTo}${url.pathname.slice('/moved'.length)}${url.search}` }).end();
      return;
    }
    const child = spawn('git', ['http-backend'], {
      env: {
        ...repoEnv(root),
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_ADDR: '127.0.0.1',
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    req.pipe(child.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    child.stdout.on('end', () => res.end());
  });
  server.on('connection', () => connections++);
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}`,
    connections: () => connections,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
