/**
 * The dashboard's built files (`npm run build` puts them in dist/web: index.html, hashed assets under
 * assets/, each with the .gz and .br twins the build wrote), read once at start and served from memory
 * with the encoding the client accepts. The page is small (tens of KiB), so holding it costs less than
 * a file read per request.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the build puts the page, relative to this module in dist/src/dashboard/. */
export const WEB_DIR = fileURLToPath(new URL('../../web/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

export type Encoding = 'br' | 'gzip' | 'identity';

export interface Asset {
  type: string;
  etag: string;
  /** Hashed names (under assets/) never change content: cache them for a year. */
  immutable: boolean;
  bodies: Partial<Record<Encoding, Buffer>>;
}

/** The built page: URL path ("/", "/assets/index-3f9a.js") to asset. */
export class Assets {
  readonly #files = new Map<string, Asset>();

  /** Reads every file of `dir` (none when the page was not built: the routes then answer 503). */
  static load(dir: string = WEB_DIR): Assets {
    const assets = new Assets();
    if (!existsSync(dir)) return assets;
    for (const file of walk(dir)) {
      if (file.endsWith('.gz') || file.endsWith('.br')) continue;
      const rel = relative(dir, file).split(sep).join('/');
      const identity = readFileSync(file);
      const bodies: Asset['bodies'] = { identity };
      for (const [suffix, enc] of [
        ['.br', 'br'],
        ['.gz', 'gzip'],
      ] as const) {
        if (existsSync(file + suffix)) bodies[enc] = readFileSync(file + suffix);
      }
      const asset: Asset = {
        type: TYPES[extname(file)] ?? 'application/octet-stream',
        etag: `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`,
        immutable: rel.startsWith('assets/'),
        bodies,
      };
      assets.#files.set(`/${rel}`, asset);
      if (rel === 'index.html') assets.#files.set('/', asset);
    }
    return assets;
  }

  get built(): boolean {
    return this.#files.has('/');
  }

  get(path: string): Asset | undefined {
    return this.#files.get(path);
  }

  paths(): string[] {
    return [...this.#files.keys()];
  }
}

/** The best encoding of `asset` that the Accept-Encoding header allows (q=0 excludes one). */
export function chooseEncoding(asset: Asset, acceptEncoding: string): Encoding {
  const accepted = new Map<string, number>();
  for (const part of acceptEncoding.toLowerCase().split(',')) {
    const [name, ...params] = part.trim().split(';');
    if (!name) continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const weight = q ? Number(q.slice(2)) : 1;
    accepted.set(name, Number.isFinite(weight) ? weight : 0);
  }
  const ok = (enc: string): boolean => (accepted.get(enc) ?? accepted.get('*') ?? 0) > 0;
  if (asset.bodies.br && ok('br')) return 'br';
  if (asset.bodies.gzip && ok('gzip')) return 'gzip';
  return 'identity';
}

function* walk(dir: string): Generator<string> {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* walk(path);
    else yield path;
  }
}
