/**
 * Local sources (the CLI; the server only where the operator allows them, `ctx.allowLocal`): a folder,
 * walked recursively in sorted order (byte order of the names), or a single image, by path or `file://`
 * URL. localKind tells them from a local tar shard or manifest, which ./index.ts opens with ./tar.ts and
 * ./manifest.ts. The path given is taken as
 * it is (a symbolic link named by the operator leads where it points); inside a folder, links are never
 * followed, and a file is opened with O_NOFOLLOW so that one swapped for a link meanwhile is refused.
 */
import { constants } from 'node:fs';
import { open, opendir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { detectFormat } from '../../formats/index.js';
import { type Candidate, type Loaded, type OpenedSource, type ScanContext, ScanError } from '../types.js';

/** Enough of a file's first bytes to tell an image format, a gzip stream or a tar archive. */
const SNIFF_BYTES = 512;
/** A POSIX tar header's magic (`ustar`) at byte 257. */
const USTAR_OFFSET = 257;
const MANIFEST_EXTENSIONS = /\.(txt|csv|tsv|jsonl|ndjson|parquet)$/i;
const TAR_EXTENSIONS = /\.(tar|tar\.gz|tgz)$/i;

/** The path a local source names (a path or a `file://` URL). */
export function localPath(source: string): string {
  if (/^file:/i.test(source)) {
    try {
      return fileURLToPath(source);
    } catch (err) {
      throw new ScanError('invalid_source', `not a usable file:// URL: ${(err as Error).message}`);
    }
  }
  return source;
}

/** What a local path holds, as a scan source: a folder, an image, a tar shard or a dataset manifest. */
export type LocalKind = 'folder' | 'image' | 'tar' | 'manifest';

/**
 * What the local `source` (a path or `file://` URL) is, by its content (images, gzip, tar) and for a
 * manifest by its name (ScanError local_source_not_allowed, invalid_source).
 */
export async function localKind(source: string, ctx: ScanContext): Promise<{ path: string; kind: LocalKind }> {
  if (!ctx.allowLocal)
    throw new ScanError('local_source_not_allowed', 'local folders and files are not scanned here (the operator has not allowed local sources)');
  const path = localPath(source);
  let info;
  try {
    info = await stat(path);
  } catch (err) {
    throw new ScanError('invalid_source', `${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or folder' : (err as Error).message}`);
  }
  if (info.isDirectory()) return { path, kind: 'folder' };
  if (!info.isFile()) throw new ScanError('invalid_source', `${path}: not a file or a folder`);
  const head = await firstBytes(path, SNIFF_BYTES);
  if (detectFormat(head)) return { path, kind: 'image' };
  if (isArchive(head) || TAR_EXTENSIONS.test(path)) return { path, kind: 'tar' };
  if (MANIFEST_EXTENSIONS.test(path)) return { path, kind: 'manifest' };
  throw new ScanError('invalid_source', `${path}: not an image, a tar shard (.tar, .tar.gz) or a manifest (.txt, .csv, .tsv, .jsonl, .parquet)`);
}

/** A local folder (walked) or a single image file, as a scan source; `path` as localKind gave it. */
export function localSource(path: string, kind: 'folder' | 'image', ctx: ScanContext): OpenedSource {
  if (!ctx.allowLocal)
    throw new ScanError('local_source_not_allowed', 'local folders and files are not scanned here (the operator has not allowed local sources)');
  if (kind === 'folder') return fileList(ctx, () => walk(path, ctx));
  return fileList(ctx, async function* () {
    yield path;
  });
}

/** gzip's magic (1f 8b) or a tar header's `ustar`. */
function isArchive(head: Uint8Array): boolean {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return true;
  return head.length >= USTAR_OFFSET + 5 && Buffer.from(head.subarray(USTAR_OFFSET, USTAR_OFFSET + 5)).toString('latin1') === 'ustar';
}

/** Every regular file below `dir`, sorted, links reported and passed over (numbered all the same). */
async function* walk(dir: string, ctx: ScanContext): AsyncGenerator<string | { link: string }> {
  const names: { name: string; dir: boolean; link: boolean; file: boolean }[] = [];
  const handle = await opendir(dir);
  for await (const e of handle) names.push({ name: e.name, dir: e.isDirectory(), link: e.isSymbolicLink(), file: e.isFile() });
  names.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  for (const e of names) {
    if (ctx.signal.aborted) return;
    const path = join(dir, e.name);
    if (e.dir) yield* walk(path, ctx);
    else if (e.link) yield { link: path };
    else if (e.file) yield path;
  }
}

/** A source over local paths in a fixed order; each is judged by its first bytes. */
function fileList(ctx: ScanContext, paths: () => AsyncIterable<string | { link: string }>): OpenedSource {
  return {
    kind: 'local',
    async *candidates(from: number): AsyncGenerator<Candidate> {
      let index = -1;
      let bytes = 0;
      for await (const p of paths()) {
        index++;
        if (index < from) continue;
        if (typeof p !== 'string') {
          ctx.skipped(p.link, 'link_not_followed', 'a symbolic link: never followed');
          continue;
        }
        let head: Uint8Array;
        try {
          head = await firstBytes(p, 32);
        } catch (err) {
          ctx.skipped(p, 'unreadable', `${p}: ${(err as Error).message}`);
          continue;
        }
        if (!detectFormat(head)) {
          ctx.skipped(p, 'not_an_image', 'not a JPEG, PNG or WebP image');
          continue;
        }
        yield {
          index,
          location: p,
          load: async (): Promise<Loaded> => {
            const read = await readImage(p, ctx.limits.maxImageBytes);
            bytes += read.length;
            if (bytes > ctx.limits.maxBytes) throw new ScanError('budget_exceeded', `the scan read past its byte limit of ${ctx.limits.maxBytes}`);
            return { bytes: read, servedSignals: [] };
          },
        };
      }
    },
    async close(): Promise<void> {},
  };
}

async function firstBytes(path: string, n: number): Promise<Uint8Array> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const buf = Buffer.alloc(n);
    const { bytesRead } = await fh.read(buf, 0, n, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** The whole file, opened without following a link, refused past `max` bytes. */
async function readImage(path: string, max: number): Promise<Uint8Array> {
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ELOOP') throw new ScanError('link_not_followed', `${path} is now a symbolic link: never followed`);
    throw new ScanError('unreadable', `${path}: ${e.message}`);
  }
  try {
    const info = await fh.stat();
    if (!info.isFile()) throw new ScanError('unreadable', `${path}: not a file`);
    if (info.size > max) throw new ScanError('too_large', `${info.size} bytes, over the per-image limit of ${max}`);
    // The size found, and one byte more: a file that grew meanwhile is read no further than the limit.
    const buf = Buffer.allocUnsafe(Math.min(info.size + 1, max + 1));
    let filled = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, filled, buf.length - filled, filled);
      if (bytesRead === 0) break; // the end: bail when the position did not advance
      filled += bytesRead;
      if (filled === buf.length) break;
    }
    if (filled > max) throw new ScanError('too_large', `over the per-image limit of ${max} bytes`);
    return buf.subarray(0, filled);
  } finally {
    await fh.close();
  }
}
