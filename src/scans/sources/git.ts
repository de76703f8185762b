/**
 * A git repository by URL (`https://`, `http://`, `git://`): a shallow bare clone by the system git
 * (`--depth 1`, one branch, no tags, blobs over the per-image limit left on the server where it supports
 * `--filter=blob:limit`), into the scan's own folder, then read by object id (`git ls-tree`, `git cat-file
 * --batch`): nothing is checked out, so no hook, symlink or path of the repository ever touches the disk.
 *
 * The address rule holds for git as for the fetcher: the host is resolved and every address checked
 * before git starts, then git is pinned to the checked address (http(s): `http.curloptResolve`;
 * git://: bin/git-proxy.mjs as GIT_PROXY_COMMAND, which connects to that address alone). Redirects are
 * refused. See ./git-run.ts for the rest of what git is allowed.
 *
 * Order: the tree's entries sorted by path (bytes), every one numbered; images judged by content. Passed
 * over, and told to ctx.skipped: symlinks (120000, never followed), submodules (160000, never cloned),
 * blobs over the per-image limit, anything that is no image. A Git LFS pointer is an item whose load
 * fails `lfs_pointer`: the image itself lives in LFS storage, not in the repository.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { detectFormat } from '../../formats/index.js';
import { AddressPolicy } from '../net/address.js';
import { type Candidate, type OpenedSource, type ScanContext, ScanError } from '../types.js';
import { CatFile, cleanEnv, gitProxyScript, runGit, safeConfig } from './git-run.js';

const DEFAULT_PORTS: Record<string, number> = { 'https:': 443, 'http:': 80, 'git:': 9418 };
/** A Git LFS pointer file's first line (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md). */
const LFS_POINTER = Buffer.from('version https://git-lfs.github.com/spec/v1');
/** LFS pointers are small text files ("less than 1024 bytes", the spec). */
const LFS_POINTER_MAX_BYTES = 1024;
const MODE_SYMLINK = '120000';
const MODE_SUBMODULE = '160000';

interface Entry {
  mode: string;
  type: string;
  oid: string;
  path: Buffer;
}

interface Clone {
  gitDir: string;
  env: Record<string, string>;
  entries: Entry[];
  /** Sizes of the blobs the clone holds (those over the limit the server left out are absent). */
  sizes: Map<string, number>;
}

/** A git repository by URL as a scan source; the clone is made when candidates are first asked for. */
export function gitSource(url: string, ctx: ScanContext): OpenedSource {
  let cloning: Promise<Clone> | undefined;
  let dir: string | undefined;
  const reader: CatFile[] = [];
  return {
    kind: 'git',
    async *candidates(from: number): AsyncGenerator<Candidate> {
      const clone = await (cloning ??= (async () => {
        dir = await mkdtemp(join(ctx.folder, 'git-'));
        return cloneRepository(url, dir, ctx);
      })());
      const cat = new CatFile(clone.gitDir, clone.env);
      reader.push(cat);
      try {
        for (let index = from; index < clone.entries.length; index++) {
          if (ctx.signal.aborted) return;
          const e = clone.entries[index]!;
          const location = `${url}#${e.path.toString('utf8')}`;
          if (e.mode === MODE_SUBMODULE) {
            ctx.skipped(location, 'submodule', `a submodule (commit ${e.oid}): never cloned`);
            continue;
          }
          if (e.mode === MODE_SYMLINK) {
            ctx.skipped(location, 'link_not_followed', 'a symbolic link: never followed');
            continue;
          }
          if (e.type !== 'blob') continue;
          const size = clone.sizes.get(e.oid);
          if (size === undefined || size > ctx.limits.maxImageBytes) {
            ctx.skipped(location, 'too_large', `over the per-image limit of ${ctx.limits.maxImageBytes} bytes: not fetched`);
            continue;
          }
          const bytes = await cat.read(e.oid);
          if (bytes === null) {
            ctx.skipped(location, 'too_large', 'not in the clone (left on the server by the blob size filter)');
            continue;
          }
          if (bytes.length <= LFS_POINTER_MAX_BYTES && bytes.subarray(0, LFS_POINTER.length).equals(LFS_POINTER)) {
            const error = new ScanError('lfs_pointer', `a Git LFS pointer (${lfsDescription(bytes)}): the image is in LFS storage, not in the repository`);
            yield { index, location, load: () => Promise.reject(error) };
            continue;
          }
          if (!detectFormat(bytes.subarray(0, 32))) {
            ctx.skipped(location, 'not_an_image', 'not a JPEG, PNG or WebP image');
            continue;
          }
          yield { index, location, load: async () => ({ bytes, servedSignals: [] }) };
        }
      } finally {
        cat.close();
        reader.splice(reader.indexOf(cat), 1);
      }
    },
    async close(): Promise<void> {
      for (const r of reader.splice(0)) r.close();
      await cloning?.catch(() => undefined);
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The pointer's oid and size lines, for the message. */
function lfsDescription(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  const oid = /^oid (\S+)$/m.exec(text)?.[1];
  const size = /^size (\d+)$/m.exec(text)?.[1];
  return [oid, size !== undefined ? `${size} bytes` : undefined].filter(Boolean).join(', ') || 'no oid';
}

/** The URL's scheme ('https', 'http', 'git'), having refused anything else (credentials included). */
export function gitUrl(url: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ScanError('invalid_source', `not a URL: ${JSON.stringify(url)}`);
  }
  if (!(u.protocol in DEFAULT_PORTS)) throw new ScanError('invalid_source', `a git repository is scanned over https://, http:// or git://, not ${u.protocol}`);
  if (u.username || u.password) throw new ScanError('invalid_source', 'a URL with credentials in it is not scanned');
  if (!u.hostname) throw new ScanError('invalid_source', 'the URL names no host');
  return u;
}

async function cloneRepository(url: string, dir: string, ctx: ScanContext): Promise<Clone> {
  const u = gitUrl(url);
  const scheme = u.protocol.slice(0, -1);
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  const port = u.port ? Number(u.port) : DEFAULT_PORTS[u.protocol]!;
  // Checked before git starts: a refused address means git is never run.
  const { address, family } = await (ctx.policy ?? new AddressPolicy()).resolve(u.hostname);
  const gitDir = join(dir, 'repo.git');
  const pin: string[] = [];
  const extra: Record<string, string> = {};
  if (scheme === 'git') {
    Object.assign(extra, {
      GIT_PROXY_COMMAND: gitProxyScript(),
      OPTMARK_GIT_PROXY_ADDRESS: address,
      OPTMARK_GIT_PROXY_HOST: host,
      OPTMARK_GIT_PROXY_PORT: String(port),
      OPTMARK_GIT_PROXY_MAX_BYTES: String(ctx.limits.maxBytes),
    });
  } else if (!isIP(host)) {
    pin.push('-c', `http.curloptResolve=${host}:${port}:${family === 6 ? `[${address}]` : address}`);
  }
  const seconds = Math.max(1, Math.ceil(ctx.limits.bodyTimeoutMs / 1000));
  const env = cleanEnv(dir, scheme, extra);
  const args = [
    ...safeConfig(scheme),
    ...pin,
    // A transfer slower than a byte a second for the body's time limit is given up.
    '-c',
    'http.lowSpeedLimit=1',
    '-c',
    `http.lowSpeedTime=${seconds}`,
    'clone',
    '--bare',
    '--depth=1',
    '--single-branch',
    '--no-tags',
    '--no-recurse-submodules',
    '--template=',
    `--filter=blob:limit=${ctx.limits.maxImageBytes}`,
    '--quiet',
    '--',
    url,
    gitDir,
  ];
  const limits = { folder: dir, maxBytes: ctx.limits.maxBytes, timeoutMs: ctx.limits.maxWallMs, signal: ctx.signal };
  await runGit(args, env, limits);
  // After the clone no protocol at all: a missing (filtered) blob is never fetched lazily.
  const after = cleanEnv(dir, undefined);
  const read = [...safeConfig(undefined), `--git-dir=${gitDir}`];
  const entries = await listTree(read, after, limits);
  const sizes = new Map<string, number>();
  const check = await runGit(
    [...read, 'cat-file', '--batch-all-objects', '--batch-check=%(objectname) %(objecttype) %(objectsize)', '--unordered'],
    after,
    limits,
  );
  for (const line of check.toString('latin1').split('\n')) {
    const [oid, type, size] = line.split(' ');
    if (oid && type === 'blob') sizes.set(oid, Number(size));
  }
  return { gitDir, env: after, entries, sizes };
}

/** Every entry of HEAD's tree, sorted by path (bytes); an empty repository has none. */
async function listTree(read: string[], env: Record<string, string>, limits: Parameters<typeof runGit>[2]): Promise<Entry[]> {
  try {
    await runGit([...read, 'rev-parse', '--verify', '--quiet', 'HEAD^{commit}'], env, limits);
  } catch (err) {
    if (err instanceof ScanError && err.code === 'git_failed') return []; // no commit: an empty repository
    throw err;
  }
  const out = await runGit([...read, 'ls-tree', '-r', '-z', '--full-tree', 'HEAD'], env, limits);
  const entries: Entry[] = [];
  let start = 0;
  while (start < out.length) {
    const end = out.indexOf(0, start);
    const record = out.subarray(start, end < 0 ? out.length : end);
    start = end < 0 ? out.length : end + 1; // bail when the position did not advance: end < 0 ends the loop
    const tab = record.indexOf(0x09);
    if (tab < 0) continue;
    const [mode, type, oid] = record.subarray(0, tab).toString('latin1').split(' ');
    if (!mode || !type || !oid) continue;
    entries.push({ mode, type, oid, path: Buffer.from(record.subarray(tab + 1)) });
  }
  entries.sort((a, b) => Buffer.compare(a.path, b.path));
  return entries;
}
