/**
 * Bounded reads over untrusted bytes and assembly of output from pieces. Every read checks its bounds
 * and throws DamagedImageError; nothing here allocates more than the caller's pieces add up to.
 */
import { DamagedImageError } from '../errors.js';
import type { ByteRange } from './types.js';

/** A view of `bytes` that respects its byteOffset (Node's small Buffers share one pool). */
export function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function u16be(bytes: Uint8Array, at: number): number {
  if (at < 0 || at + 2 > bytes.length) throw new DamagedImageError(`unexpected end of data at byte ${at}`);
  return (bytes[at]! << 8) | bytes[at + 1]!;
}

export function u32be(bytes: Uint8Array, at: number): number {
  if (at < 0 || at + 4 > bytes.length) throw new DamagedImageError(`unexpected end of data at byte ${at}`);
  return ((bytes[at]! << 24) >>> 0) + ((bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!);
}

export function u32le(bytes: Uint8Array, at: number): number {
  if (at < 0 || at + 4 > bytes.length) throw new DamagedImageError(`unexpected end of data at byte ${at}`);
  return ((bytes[at + 3]! << 24) >>> 0) + ((bytes[at + 2]! << 16) | (bytes[at + 1]! << 8) | bytes[at]!);
}

export function writeU32be(target: Uint8Array, at: number, value: number): void {
  target[at] = (value >>> 24) & 0xff;
  target[at + 1] = (value >>> 16) & 0xff;
  target[at + 2] = (value >>> 8) & 0xff;
  target[at + 3] = value & 0xff;
}

export function writeU32le(target: Uint8Array, at: number, value: number): void {
  target[at] = value & 0xff;
  target[at + 1] = (value >>> 8) & 0xff;
  target[at + 2] = (value >>> 16) & 0xff;
  target[at + 3] = (value >>> 24) & 0xff;
}

/**
 * A copy of bytes[start, end) to edit. Never `bytes.slice()`: on a Node Buffer that is a view, and
 * editing it would write into the caller's input.
 */
export function copyRange(bytes: Uint8Array, start: number, end: number): Uint8Array {
  const out = new Uint8Array(end - start);
  out.set(bytes.subarray(start, end));
  return out;
}

/** True when `bytes` holds `prefix` at `at`. */
export function startsWith(bytes: Uint8Array, prefix: Uint8Array, at = 0): boolean {
  if (at < 0 || at + prefix.length > bytes.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false;
  return true;
}

export function ascii(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff;
  return out;
}

/**
 * Output pieces in which consecutive kept ranges of the input merge into one view: a PNG of 3,000 IDAT
 * chunks becomes three pieces, not 3,000, for every later pass (hashing, base64, assembly).
 */
export class Pieces {
  readonly #source: Uint8Array;
  readonly #list: Uint8Array[] = [];
  #start = -1;
  #end = -1;

  constructor(source: Uint8Array) {
    this.#source = source;
  }

  /** Keeps source bytes [start, end). */
  keep(start: number, end: number): void {
    if (start === this.#end) {
      this.#end = end;
      return;
    }
    this.#flush();
    this.#start = start;
    this.#end = end;
  }

  /** Adds bytes that are not a range of the source (new segments, patched copies). */
  add(...pieces: Uint8Array[]): void {
    this.#flush();
    for (const p of pieces) if (p.length > 0) this.#list.push(p);
  }

  done(): Uint8Array[] {
    this.#flush();
    return this.#list;
  }

  #flush(): void {
    if (this.#end > this.#start) this.#list.push(this.#source.subarray(this.#start, this.#end));
    this.#start = this.#end = -1;
  }
}

/**
 * Copies the pieces, in order, into one new Buffer of exactly their total length (one allocation, never
 * a slice of Node's shared pool, so it can be transferred to another thread).
 */
export function assemble(pieces: readonly Uint8Array[]): Buffer {
  let total = 0;
  for (const p of pieces) total += p.length;
  const out = Buffer.allocUnsafeSlow(total);
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Same bytes? (for idempotence fast paths) */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Appends [start, end) to ranges in file order, merged with the last one when they touch; empty ranges are left out. */
export function addRange(ranges: ByteRange[], start: number, end: number): void {
  if (start >= end) return;
  const last = ranges[ranges.length - 1];
  if (last && last.end === start) last.end = end;
  else ranges.push({ start, end });
}
