/**
 * The vault's encryption at rest (docs/vault.md, "Privacy and keys"):
 *
 *   master key (32 bytes, with the service's other secrets) ── wraps ──> one data key per account
 *   data key ── AES-256-GCM, segment by segment ──> the stored object
 *
 * A stored object is a 12-byte header (`OMV1` and an 8-byte random nonce prefix) and then the plaintext
 * in segments of SEGMENT_BYTES, each sealed on its own: nonce = prefix ‖ segment index (4 bytes), and
 * the associated data binds the object's storage key, the segment's index and whether it is the last.
 * So a Range read decrypts only the segments it needs, and a segment moved, swapped between objects,
 * dropped from the end or altered fails authentication. Object keys are random (./storage.ts): neither
 * the account nor the file name is in anything stored.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export const SEGMENT_BYTES = 64 * 1024;
const TAG_BYTES = 16;
const MAGIC = Buffer.from('OMV1');
export const HEADER_BYTES = MAGIC.length + 8;
export const KEY_BYTES = 32;

export class VaultCryptoError extends Error {
  readonly code = 'vault_object_corrupt';
}

function aad(objectKey: string, index: number, last: boolean): Buffer {
  const tail = Buffer.alloc(5);
  tail.writeUInt32BE(index, 0);
  tail[4] = last ? 1 : 0;
  return Buffer.concat([Buffer.from(objectKey, 'utf8'), tail]);
}

function nonce(prefix: Buffer, index: number): Buffer {
  const n = Buffer.alloc(12);
  prefix.copy(n, 0, 0, 8);
  n.writeUInt32BE(index, 8);
  return n;
}

/** The stored size of a plaintext of `n` bytes (an empty one is one empty sealed segment). */
export function sealedSize(n: number): number {
  return HEADER_BYTES + n + segmentCount(n) * TAG_BYTES;
}

/** The plaintext size of a stored object of `stored` bytes; throws when no plaintext has that size. */
export function plainSize(stored: number): number {
  const body = stored - HEADER_BYTES;
  if (body < TAG_BYTES) throw new VaultCryptoError('stored object shorter than one sealed segment');
  const full = SEGMENT_BYTES + TAG_BYTES;
  const segments = Math.ceil(body / full);
  const n = body - segments * TAG_BYTES;
  if (n < 0 || sealedSize(n) !== stored) throw new VaultCryptoError('stored object has no whole last segment');
  return n;
}

/**
 * Seals a stream of plaintext chunks under `key` for storage key `objectKey`, yielding the stored bytes
 * (header first); memory holds one segment.
 */
export async function* seal(key: Uint8Array, objectKey: string, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const prefix = randomBytes(8);
  let index = 0;
  // Sealed segments are handed on a few hundred KiB at a time (fewer, larger writes).
  let out: Buffer[] = [Buffer.concat([MAGIC, prefix])];
  let outBytes = HEADER_BYTES;
  const sealOne = (plain: Uint8Array, last: boolean): void => {
    const c = createCipheriv('aes-256-gcm', key, nonce(prefix, index));
    c.setAAD(aad(objectKey, index, last));
    out.push(c.update(plain), c.final(), c.getAuthTag());
    outBytes += plain.length + TAG_BYTES;
    index++;
  };
  let pending: Uint8Array = new Uint8Array(0);
  for await (const chunk of chunks) {
    // The input is a view, never copied whole; only a partial segment left over is joined to the next chunk.
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    let at = 0;
    // Keep at least one byte back: the last segment is sealed as last only when the input has ended.
    while (pending.length - at > SEGMENT_BYTES) {
      sealOne(pending.subarray(at, at + SEGMENT_BYTES), false);
      at += SEGMENT_BYTES;
      if (outBytes >= FLUSH_BYTES) {
        yield Buffer.concat(out, outBytes);
        out = [];
        outBytes = 0;
      }
    }
    pending = pending.subarray(at);
  }
  sealOne(pending, true);
  yield Buffer.concat(out, outBytes);
}

/** Sealed bytes gathered before they are handed to the storage. */
const FLUSH_BYTES = 1024 * 1024;

/** A read size that keeps segments whole: a read from a segment's start returns whole segments. */
export const SEGMENT_READ_BYTES = 16 * (SEGMENT_BYTES + TAG_BYTES);

/** The stored byte range holding plaintext bytes [start, end] (inclusive), and the segments it covers. */
export function storedRange(plainBytes: number, start: number, end: number): { from: number; to: number; first: number; last: number } {
  const first = Math.floor(start / SEGMENT_BYTES);
  const last = Math.max(first, Math.floor(Math.max(end, 0) / SEGMENT_BYTES));
  const full = SEGMENT_BYTES + TAG_BYTES;
  const from = HEADER_BYTES + first * full;
  const to = Math.min(sealedSize(plainBytes), HEADER_BYTES + (last + 1) * full) - 1;
  return { from, to, first, last };
}

/**
 * Opens segments `first..` of an object: `header` is its first HEADER_BYTES, `sealed` the stored bytes
 * from segment `first` to `last` (as storedRange gives them), `segments` the object's segment count.
 * Yields the plaintext of each segment; throws VaultCryptoError on any mismatch, or when the stored bytes
 * end before segment `last`.
 */
export async function* open(
  key: Uint8Array,
  objectKey: string,
  header: Uint8Array,
  sealed: AsyncIterable<Uint8Array>,
  first: number,
  last: number,
  segments: number,
): AsyncGenerator<Buffer> {
  const h = Buffer.from(header);
  if (h.length !== HEADER_BYTES || !h.subarray(0, 4).equals(MAGIC)) throw new VaultCryptoError('not a vault object');
  const prefix = h.subarray(4, 12);
  const full = SEGMENT_BYTES + TAG_BYTES;
  let index = first;
  let pending: Buffer = Buffer.alloc(0);
  const openOne = (part: Buffer): Buffer => {
    if (index >= segments) throw new VaultCryptoError('more segments than the object has');
    const d = createDecipheriv('aes-256-gcm', key, nonce(prefix, index));
    d.setAAD(aad(objectKey, index, index === segments - 1));
    d.setAuthTag(part.subarray(part.length - TAG_BYTES));
    try {
      // GCM's final() only checks the tag (it returns no bytes): update's output is the segment.
      const out = d.update(part.subarray(0, part.length - TAG_BYTES));
      d.final();
      index++;
      return out;
    } catch {
      throw new VaultCryptoError(`segment ${index} does not authenticate`);
    }
  };
  for await (const chunk of sealed) {
    const c = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    pending = pending.length === 0 ? c : Buffer.concat([pending, c]);
    let at = 0;
    while (pending.length - at >= full && !(pending.length - at === full && index === segments - 1)) {
      yield openOne(pending.subarray(at, at + full));
      at += full;
    }
    pending = pending.subarray(at);
  }
  if (pending.length > 0) yield openOne(pending);
  if (index <= last) throw new VaultCryptoError(`the stored object ends before segment ${index}`);
}

/** The number of segments of a plaintext of `n` bytes. */
export function segmentCount(n: number): number {
  return Math.max(1, Math.ceil(n / SEGMENT_BYTES));
}

/** A fresh data key wrapped by `master`: nonce ‖ ciphertext ‖ tag, base64. */
export function newWrappedKey(master: Uint8Array): { key: Buffer; wrapped: string } {
  const key = randomBytes(KEY_BYTES);
  return { key, wrapped: wrapKey(master, key) };
}

export function wrapKey(master: Uint8Array, key: Uint8Array): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', master, iv);
  c.setAAD(Buffer.from('optmark vault data key'));
  return Buffer.concat([iv, c.update(key), c.final(), c.getAuthTag()]).toString('base64');
}

/** The data key inside `wrapped`; throws VaultCryptoError when `master` is not the key it was wrapped with. */
export function unwrapKey(master: Uint8Array, wrapped: string): Buffer {
  const b = Buffer.from(wrapped, 'base64');
  if (b.length !== 12 + KEY_BYTES + TAG_BYTES) throw new VaultCryptoError('wrapped data key has the wrong length');
  const d = createDecipheriv('aes-256-gcm', master, b.subarray(0, 12));
  d.setAAD(Buffer.from('optmark vault data key'));
  d.setAuthTag(b.subarray(12 + KEY_BYTES));
  try {
    return Buffer.concat([d.update(b.subarray(12, 12 + KEY_BYTES)), d.final()]);
  } catch {
    throw new VaultCryptoError('the vault master key does not open this account’s data key (a different or rotated master key?)');
  }
}
