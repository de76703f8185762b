/**
 * The one entry to scan sources: what a source string is (parseScanSource, which the API uses to answer
 * 400 before accepting a scan) and the source opened (openSource):
 *
 *   git://...  or a URL ending in `.git`, or type 'git'     ──> ./git.ts
 *   file://... or a path (local sources allowed)            ──> ./local.ts (folder, image), ./tar.ts, ./manifest.ts
 *   http(s):// with a type                                  ──> ./page.ts, ./manifest.ts, ./tar.ts
 *   http(s):// without one: one streamed GET, told by its Content-Type and first bytes:
 *              HTML ──> page; gzip or tar ──> tar; anything else ──> manifest
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { type OpenedSource, type ScanContext, ScanError } from '../types.js';
import { gitSource, gitUrl } from './git.js';
import { localKind, localSource } from './local.js';
import { manifestSource } from './manifest.js';
import { pageSource } from './page.js';
import { peek } from './peek.js';
import { tarSource } from './tar.js';

export type SourceType = 'git' | 'page' | 'manifest' | 'tar' | 'local';
export const SOURCE_TYPES: readonly SourceType[] = ['git', 'page', 'manifest', 'tar', 'local'];

export interface ParsedSource {
  /** 'http': a URL whose kind the first response tells. */
  kind: SourceType | 'http';
  /** The source as it will be opened (a URL's normalised form, or the path). */
  source: string;
}

/** Longest source string taken (a URL or a path). */
const MAX_SOURCE_LENGTH = 4096;
/** Bytes of an answer looked at to tell HTML from an archive from a list. */
const SNIFF_BYTES = 512;
const USTAR_OFFSET = 257;

/** What `source` is, or ScanError invalid_source (other schemes, credentials in a URL, garbage). */
export function parseScanSource(source: unknown, type?: unknown): ParsedSource {
  if (type !== undefined && !SOURCE_TYPES.includes(type as SourceType))
    throw new ScanError('invalid_source', `a source's type is one of ${SOURCE_TYPES.join(', ')}, not ${JSON.stringify(type)}`);
  const t = type as SourceType | undefined;
  if (typeof source !== 'string' || source.trim() === '') throw new ScanError('invalid_source', 'the source must be a non-empty string: a URL or a path');
  if (source.length > MAX_SOURCE_LENGTH) throw new ScanError('invalid_source', `the source is longer than ${MAX_SOURCE_LENGTH} characters`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\x00-\x1f\x7f]/.test(source)) throw new ScanError('invalid_source', 'the source contains control characters');
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(source)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    if (t !== undefined && t !== 'local' && t !== 'tar' && t !== 'manifest') throw new ScanError('invalid_source', `a path is not a ${t} source`);
    return { kind: 'local', source };
  }
  if (scheme === 'file') {
    if (t !== undefined && t !== 'local' && t !== 'tar' && t !== 'manifest') throw new ScanError('invalid_source', `a file:// URL is not a ${t} source`);
    return { kind: 'local', source };
  }
  if (scheme !== 'http' && scheme !== 'https' && scheme !== 'git')
    throw new ScanError('invalid_source', `${scheme}: sources are not scanned (https://, http://, git:// or a local path)`);
  // Refuses credentials and a missing host, for every scheme.
  const url = gitUrl(source);
  if (scheme === 'git') {
    if (t !== undefined && t !== 'git') throw new ScanError('invalid_source', `a git:// URL is not a ${t} source`);
    return { kind: 'git', source: url.href };
  }
  if (t === 'local') throw new ScanError('invalid_source', 'an http(s) URL is not a local source');
  if (t !== undefined) return { kind: t, source: url.href };
  if (/\.git\/?$/i.test(url.pathname)) return { kind: 'git', source: url.href };
  return { kind: 'http', source: url.href };
}

/** The source opened for a scan (ScanError: invalid_source, local_source_not_allowed, target_not_allowed, http_status...). */
export async function openSource(source: string, ctx: ScanContext, type?: SourceType): Promise<OpenedSource> {
  const parsed = parseScanSource(source, type);
  switch (parsed.kind) {
    case 'git':
      return gitSource(parsed.source, ctx);
    case 'local':
      return openLocal(parsed.source, ctx, type);
    case 'page':
      return pageSource(parsed.source, ctx);
    case 'manifest':
      return manifestSource(() => fetched(parsed.source, ctx), parsed.source, ctx);
    case 'tar':
      return tarSource(async () => (await fetched(parsed.source, ctx)).body, parsed.source, ctx);
    case 'http':
      return sniffed(parsed.source, ctx);
  }
}

async function openLocal(source: string, ctx: ScanContext, type: SourceType | undefined): Promise<OpenedSource> {
  const { path, kind } = await localKind(source, ctx);
  const as = type === 'tar' || type === 'manifest' ? type : kind;
  if (as === 'tar') return tarSource(async () => createReadStream(path), path, ctx);
  if (as === 'manifest') return manifestSource(async () => ({ body: createReadStream(path), name: path }), path, ctx);
  return localSource(path, as, ctx);
}

interface Fetched {
  body: Readable;
  contentType?: string;
  name: string;
}

/** One streamed GET through the scan's fetcher; a status other than 2xx fails `http_status`. */
async function fetched(url: string, ctx: ScanContext): Promise<Fetched> {
  const r = await ctx.fetcher.stream(url, { maxBytes: ctx.limits.maxBytes });
  if (r.status < 200 || r.status > 299) {
    r.body.destroy();
    throw new ScanError('http_status', `${url} answered ${r.status}`);
  }
  const contentType = r.headers['content-type'];
  return { body: r.body, name: new URL(r.url).pathname, ...(contentType !== undefined ? { contentType } : {}) };
}

/**
 * An http(s) URL without a type: its first answer tells. The answer's stream goes on to the tar or
 * manifest source the first time it opens (a later chunk fetches again); a page is fetched by ./page.ts.
 */
async function sniffed(url: string, ctx: ScanContext): Promise<OpenedSource> {
  const first = await fetched(url, ctx);
  const { head, stream } = await peek(first.body, SNIFF_BYTES);
  const type = (first.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  let spare: Fetched | undefined = { ...first, body: stream };
  const open = async (): Promise<Fetched> => {
    const s = spare;
    spare = undefined;
    return s ?? fetched(url, ctx);
  };
  if (type === 'text/html' || type === 'application/xhtml+xml' || looksLikeHtml(head)) {
    stream.destroy();
    spare = undefined;
    return pageSource(url, ctx);
  }
  const archive = (head[0] === 0x1f && head[1] === 0x8b) || head.subarray(USTAR_OFFSET, USTAR_OFFSET + 5).toString('latin1') === 'ustar';
  if (archive || type === 'application/x-tar') return tarSource(async () => (await open()).body, url, ctx);
  return manifestSource(open, url, ctx);
}

/** An HTML document's start (after a BOM and white space): a doctype, `<html`, `<head` or a comment. */
function looksLikeHtml(head: Buffer): boolean {
  const text = head
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart()
    .slice(0, 64)
    .toLowerCase();
  return text.startsWith('<!doctype html') || text.startsWith('<html') || text.startsWith('<head') || text.startsWith('<!--');
}
