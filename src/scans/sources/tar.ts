/**
 * A `.tar` shard (the WebDataset layout: `sample.jpg`, `sample.json`, ... per sample), optionally
 * gzip-compressed (told by its magic bytes, never by its name), read as one stream with tar-stream.
 * Nothing is written to disk: a member named `../../etc/x` or `/etc/x` is only a name in a location
 * (`shard#member`). Symbolic and hard links are passed over. Bounds: `limits.maxBytes` on the
 * decompressed bytes (a gzip bomb stops there, `budget_exceeded`), `limits.maxImageBytes` per member
 * (a larger one is drained, never held, and reported `too_large`). A cut or garbage archive fails
 * `archive_invalid`.
 *
 * Order: the members as they come, every one but a folder numbered (`Candidate.index`), so a chunk can
 * start at any index by reading past the ones before.
 */
import type { Readable } from 'node:stream';
import { Readable as ReadableStream } from 'node:stream';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { detectFormat } from '../../formats/index.js';
import { peek } from './peek.js';
import { type Candidate, type OpenedSource, type ScanContext, ScanError } from '../types.js';

/** gzip's magic number (RFC 1952 §2.3.1: ID1 ID2). */
const GZIP_ID1 = 0x1f;
const GZIP_ID2 = 0x8b;
/** Enough of a member's first bytes to tell an image format. */
const SNIFF_BYTES = 32;

/** A tar shard from a stream `open` gives (a fetched URL's body, a local file). */
export function tarSource(open: () => Promise<Readable>, location: string, ctx: ScanContext): OpenedSource {
  let current: Readable | undefined;
  return {
    kind: 'tar',
    candidates(from: number): AsyncIterable<Candidate> {
      return members(open, location, ctx, from, (s) => (current = s));
    },
    async close(): Promise<void> {
      current?.destroy();
    },
  };
}

async function* members(
  open: () => Promise<Readable>,
  location: string,
  ctx: ScanContext,
  from: number,
  opened: (s: Readable) => void,
): AsyncGenerator<Candidate> {
  const input = await open();
  opened(input);
  const onAbort = (): void => void input.destroy(new ScanError('timeout', 'the scan was stopped'));
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    let index = -1;
    try {
      const extract = tar.extract();
      const decompressed = await unpacked(input, ctx.limits.maxBytes);
      // Errors of the input, the gunzip or the budget reach the extractor and end its iteration.
      decompressed.on('error', (err) => extract.destroy(err));
      decompressed.pipe(extract);
      for await (const entry of extract) {
        const { header } = entry;
        if (header.type === 'directory') {
          entry.resume();
          continue;
        }
        index++;
        const member = `${location}#${header.name}`;
        if (index < from) {
          await drain(entry);
          continue;
        }
        if (header.type !== 'file' && header.type !== 'contiguous-file') {
          await drain(entry);
          if (header.type === 'symlink' || header.type === 'link')
            ctx.skipped(member, 'link_not_followed', `a ${header.type === 'link' ? 'hard' : 'symbolic'} link to ${header.linkname ?? '?'}: never followed`);
          else ctx.skipped(member, 'not_an_image', `a ${header.type ?? 'special'} entry, not a file`);
          continue;
        }
        const read = await readMember(entry as AsyncIterable<Buffer>, header.size ?? 0, ctx.limits.maxImageBytes);
        if (!detectFormat(read.head)) {
          ctx.skipped(member, 'not_an_image', 'not a JPEG, PNG or WebP image');
          continue;
        }
        const i = index;
        if (read.bytes === undefined) {
          const error = new ScanError('too_large', `${read.size} bytes, over the per-image limit of ${ctx.limits.maxImageBytes}`);
          yield { index: i, location: member, load: () => Promise.reject(error) };
          continue;
        }
        const bytes = read.bytes;
        yield { index: i, location: member, load: async () => ({ bytes, servedSignals: [] }) };
      }
    } catch (err) {
      throw asScanError(err);
    }
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
    input.destroy();
  }
}

/** The archive's bytes: gunzipped when they start with gzip's magic, failing `budget_exceeded` past `maxBytes`. */
async function unpacked(input: Readable, maxBytes: number): Promise<Readable> {
  const { head, stream: raw } = await peek(input, 2);
  const gzipped = head.length >= 2 && head[0] === GZIP_ID1 && head[1] === GZIP_ID2;
  let source: Readable = raw;
  if (gzipped) {
    const gunzip = createGunzip();
    raw.on('error', (err) => gunzip.destroy(err));
    source = raw.pipe(gunzip);
  }
  // The decompressed bytes counted as they pass: a bomb stops at the budget, not at the end of memory.
  let total = 0;
  const bounded = ReadableStream.from(
    (async function* (): AsyncGenerator<Buffer> {
      for await (const chunk of source as AsyncIterable<Buffer>) {
        total += chunk.length;
        if (total > maxBytes) throw new ScanError('budget_exceeded', `the archive unpacks past the scan's byte limit of ${maxBytes}`);
        yield chunk;
      }
    })(),
    { objectMode: false },
  );
  return bounded;
}

/** A member's bytes (undefined past `max`: drained, its first bytes kept to tell what it was). */
async function readMember(
  entry: AsyncIterable<Buffer>,
  declared: number,
  max: number,
): Promise<{ head: Uint8Array; bytes: Uint8Array | undefined; size: number }> {
  const keep = declared <= max;
  const chunks: Buffer[] = [];
  let head: Buffer | undefined;
  let size = 0;
  for await (const chunk of entry) {
    size += chunk.length;
    if (keep) chunks.push(chunk);
    else if (head === undefined || head.length < SNIFF_BYTES)
      head = head === undefined ? chunk.subarray(0, SNIFF_BYTES) : Buffer.concat([head, chunk]).subarray(0, SNIFF_BYTES);
  }
  if (!keep) return { head: head ?? Buffer.alloc(0), bytes: undefined, size };
  const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  return { head: bytes.subarray(0, SNIFF_BYTES), bytes, size };
}

async function drain(entry: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of entry) {
    // read and dropped
  }
}

function asScanError(err: unknown): ScanError {
  if (err instanceof ScanError) return err;
  // tar-stream's and zlib's own errors (a bad header checksum, an unexpected end, a bad gzip stream).
  return new ScanError('archive_invalid', `not a readable tar archive: ${err instanceof Error ? err.message : String(err)}`);
}
