/**
 * The bytes of a file's C2PA manifest store as the reader reassembles them, from the ranges the one walk
 * found (ParsedImage.manifestStore): the JUMBF superbox of a JPEG's APP11 segments (JPEG XT: CI `JP`, box
 * instance En, sequence Z, then the box; every segment after the first repeats the box's LBox and TBox,
 * which are dropped), the data of a PNG's `caBX` chunks or a WebP's `C2PA` chunks. The C2PA code checks
 * the lengths inside it before the reader sees the file (src/c2pa/store-check.ts). Reads only within the
 * ranges; a header cut short ends what is collected.
 */
import { u32be, u32le } from './bytes.js';
import type { ParsedImage } from './types.js';

/** The bytes of the store's pieces, joined. */
function joined(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** JPEG: each range is one APP11 segment (fill bytes, marker, length, payload). */
function jpegStore(b: Uint8Array, ranges: readonly { start: number; end: number }[]): Uint8Array {
  const pieces: { z: number; box: Uint8Array }[] = [];
  for (const r of ranges) {
    let p = r.start;
    while (p < r.end && b[p] === 0xff) p++;
    const payload = p + 3; // the marker, then the 2-byte length
    if (payload + 8 > r.end) continue;
    pieces.push({ z: u32be(b, payload + 4), box: b.subarray(payload + 8, r.end) });
  }
  pieces.sort((x, y) => x.z - y.z);
  const first = pieces[0]?.box;
  if (!first) return new Uint8Array(0);
  // The box header every continuation repeats: LBox and TBox, and XLBox when LBox is 1.
  const header = first.length >= 4 && u32be(first, 0) === 1 ? 16 : 8;
  return joined([first, ...pieces.slice(1).map((x) => x.box.subarray(Math.min(header, x.box.length)))]);
}

/** PNG and WebP: the data of each chunk in the ranges (a range may hold several adjacent chunks). */
function chunkStore(b: Uint8Array, ranges: readonly { start: number; end: number }[], png: boolean): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const r of ranges) {
    for (let p = r.start; p + 8 <= r.end; ) {
      const size = png ? u32be(b, p) : u32le(b, p + 4);
      const data = p + 8;
      parts.push(b.subarray(data, Math.min(r.end, data + size)));
      p = data + size + (png ? 4 : size & 1);
    }
  }
  return joined(parts);
}

/** The manifest store's bytes, or undefined when the file carries none. */
export function manifestStoreBytes(image: ParsedImage): Uint8Array | undefined {
  const store = image.manifestStore;
  if (!store) return undefined;
  const name = image.format.name;
  if (name === 'jpeg') return jpegStore(image.bytes, store.ranges);
  return chunkStore(image.bytes, store.ranges, name === 'png');
}
