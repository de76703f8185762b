/**
 * The bytes of a file's C2PA manifest store, as the reader reassembles them: the JUMBF superbox of a
 * JPEG's APP11 segments (JPEG XT: CI `JP`, box instance En, sequence Z, then the box; every segment after
 * the first repeats the box's LBox and TBox, which are dropped), a PNG `caBX` chunk's data, a WebP `C2PA`
 * chunk's data. src/c2pa/store-check.ts checks the lengths inside it before the reader sees the file.
 * Walks segment and chunk headers only; at most MAX_STORE_WALK of them.
 */
import { LimitExceededError } from '../errors.js';
import { ascii, startsWith, u16be, u32be, u32le } from './bytes.js';

/** Segments or chunks walked at most while looking for the store. */
export const MAX_STORE_WALK = 100_000;

const JP = ascii('JP');
const JUMB = ascii('jumb');
const JUMD = ascii('jumd');
const C2PA = ascii('c2pa');

function tooMany(container: string): never {
  throw new LimitExceededError(`${container}: more segments or chunks than the processing limit (${MAX_STORE_WALK}) while reading Content Credentials`);
}

interface Piece {
  z: number;
  data: Uint8Array;
}

/** The APP11 JPEG XT segments' payloads, by box instance (En), in file order. */
function jpegBoxes(b: Uint8Array): Map<number, Piece[]> {
  const out = new Map<number, Piece[]>();
  let pos = 2;
  for (let n = 0; pos + 4 <= b.length; n++) {
    if (n > MAX_STORE_WALK) tooMany('JPEG');
    if (b[pos] !== 0xff) break;
    while (pos < b.length && b[pos] === 0xff) pos++;
    const marker = b[pos];
    if (marker === undefined || marker === 0xda || marker === 0xd9) break;
    pos++;
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) continue;
    if (pos + 2 > b.length) break;
    const len = u16be(b, pos);
    if (len < 2 || pos + len > b.length) break;
    const payload = b.subarray(pos + 2, pos + len);
    if (marker === 0xeb && payload.length >= 16 && startsWith(payload, JP)) {
      const en = u16be(payload, 2);
      const pieces = out.get(en) ?? [];
      pieces.push({ z: u32be(payload, 4), data: payload.subarray(8) });
      out.set(en, pieces);
    }
    pos += len;
  }
  return out;
}

/** The JPEG's C2PA superbox: the box instance whose first box is a `jumb` with a C2PA description. */
function jpegStore(b: Uint8Array): Uint8Array | undefined {
  for (const pieces of jpegBoxes(b).values()) {
    pieces.sort((x, y) => x.z - y.z);
    const first = pieces[0]!.data;
    const header = u32be(first, 0) === 1 ? 16 : 8;
    if (!startsWith(first, JUMB, 4) || !startsWith(first, JUMD, header + 4) || !startsWith(first, C2PA, header + 8)) continue;
    const parts = [first, ...pieces.slice(1).map((p) => p.data.subarray(Math.min(header, p.data.length)))];
    const store = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      store.set(p, at);
      at += p.length;
    }
    return store;
  }
  return undefined;
}

function pngStore(b: Uint8Array): Uint8Array | undefined {
  const type = ascii('caBX');
  let pos = 8;
  for (let n = 0; pos + 8 <= b.length; n++) {
    if (n > MAX_STORE_WALK) tooMany('PNG');
    const len = u32be(b, pos);
    if (startsWith(b, type, pos + 4)) return b.subarray(pos + 8, Math.min(b.length, pos + 8 + len));
    pos += 12 + len;
  }
  return undefined;
}

function webpStore(b: Uint8Array): Uint8Array | undefined {
  const type = ascii('C2PA');
  let pos = 12;
  for (let n = 0; pos + 8 <= b.length; n++) {
    if (n > MAX_STORE_WALK) tooMany('WebP');
    const len = u32le(b, pos + 4);
    if (startsWith(b, type, pos)) return b.subarray(pos + 8, Math.min(b.length, pos + 8 + len));
    pos += 8 + len + (len & 1);
  }
  return undefined;
}

/** The manifest store's bytes (a view, or a copy for a JPEG's segments), or undefined when there is none. */
export function manifestStore(format: 'jpeg' | 'png' | 'webp', bytes: Uint8Array): Uint8Array | undefined {
  if (format === 'jpeg') return jpegStore(bytes);
  if (format === 'png') return pngStore(bytes);
  return webpStore(bytes);
}
