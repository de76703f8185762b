/**
 * Cheap detection of a C2PA manifest store (Content Credentials) in our three containers, without
 * parsing it: JPEG APP11 segments carrying JUMBF (ISO 19566-5) whose description box has the C2PA
 * type, a PNG `caBX` chunk, a WebP `C2PA` chunk. It walks segment/chunk headers only (no payload is
 * read beyond a few bytes), so files without credentials pay a header walk and nothing else. The
 * validating reader (src/c2pa/reader.ts) runs only when this says a store is present.
 *
 * Limits (named, like every parser here): at most MAX_C2PA_WALK segments or chunks are walked; past
 * that LimitExceededError. A structure that breaks off (the container readers report it as damaged)
 * ends the walk: what was found before counts.
 */
import { LimitExceededError } from '../errors.js';

/** Segments (JPEG) or chunks (PNG, WebP) the detector walks at most. */
export const MAX_C2PA_WALK = 100_000;

const u16be = (b: Uint8Array, at: number): number => (b[at]! << 8) | b[at + 1]!;
const u32be = (b: Uint8Array, at: number): number => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const u32le = (b: Uint8Array, at: number): number => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;
const ascii = (b: Uint8Array, at: number, s: string): boolean => {
  if (at + s.length > b.length) return false;
  for (let i = 0; i < s.length; i++) if (b[at + i] !== s.charCodeAt(i)) return false;
  return true;
};

function tooMany(container: string): never {
  throw new LimitExceededError(`${container}: more segments or chunks than the processing limit (${MAX_C2PA_WALK}) while looking for Content Credentials`);
}

/**
 * JPEG: an APP11 segment with the JPEG XT common identifier `JP`, whose JUMBF superbox (`jumb`)
 * opens with a description box (`jumd`) of the C2PA type (UUID beginning with `c2pa`).
 * Payload layout: CI "JP"(2) En(2) Z(4) LBox(4) TBox "jumb"(4) LBox(4) "jumd"(4) type UUID(16).
 */
function jpegHasStore(b: Uint8Array): boolean {
  let pos = 2;
  for (let n = 0; pos + 4 <= b.length; n++) {
    if (n > MAX_C2PA_WALK) tooMany('JPEG');
    if (b[pos] !== 0xff) return false;
    while (pos < b.length && b[pos] === 0xff) pos++;
    const marker = b[pos];
    if (marker === undefined || marker === 0xda || marker === 0xd9) return false; // SOS, EOI: no more metadata
    pos++;
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) continue; // no length
    if (pos + 2 > b.length) return false;
    const len = u16be(b, pos);
    if (len < 2) return false;
    const p = pos + 2;
    if (marker === 0xeb && ascii(b, p, 'JP') && ascii(b, p + 12, 'jumb') && ascii(b, p + 20, 'jumd') && ascii(b, p + 24, 'c2pa')) return true;
    pos += len;
  }
  return false;
}

/** PNG: a `caBX` chunk anywhere in the chunk list. */
function pngHasStore(b: Uint8Array): boolean {
  let pos = 8;
  for (let n = 0; pos + 8 <= b.length; n++) {
    if (n > MAX_C2PA_WALK) tooMany('PNG');
    const len = u32be(b, pos);
    if (ascii(b, pos + 4, 'caBX')) return true;
    if (ascii(b, pos + 4, 'IEND')) return false;
    pos += 12 + len;
  }
  return false;
}

/** WebP: a `C2PA` chunk among the RIFF chunks. */
function webpHasStore(b: Uint8Array): boolean {
  let pos = 12;
  for (let n = 0; pos + 8 <= b.length; n++) {
    if (n > MAX_C2PA_WALK) tooMany('WebP');
    if (ascii(b, pos, 'C2PA')) return true;
    const len = u32le(b, pos + 4);
    pos += 8 + len + (len & 1);
  }
  return false;
}

export type C2paContainer = 'jpeg' | 'png' | 'webp';

/**
 * Whether one slice of contentOutsideXmp (a whole JPEG segment, PNG chunk or WebP chunk) belongs to a
 * C2PA manifest store: an APP11 JPEG XT segment carrying a JUMBF box (every segment of a store repeats
 * `JP`, En, Z and the superbox's LBox/`jumb`), a PNG `caBX` chunk, a WebP `C2PA` chunk.
 */
export function isManifestStoreSlice(format: C2paContainer, slice: Uint8Array): boolean {
  if (format === 'jpeg') return slice[0] === 0xff && slice[1] === 0xeb && ascii(slice, 4, 'JP') && ascii(slice, 16, 'jumb');
  if (format === 'png') return ascii(slice, 4, 'caBX');
  return ascii(slice, 0, 'C2PA');
}

/** True when the file carries a C2PA manifest store where its container puts one. */
export function hasManifestStore(format: C2paContainer, bytes: Uint8Array): boolean {
  if (format === 'jpeg') return jpegHasStore(bytes);
  if (format === 'png') return pngHasStore(bytes);
  return webpHasStore(bytes);
}
