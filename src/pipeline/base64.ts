/**
 * Base64 of a byte sequence given as pieces, written straight into a target buffer: the pieces are
 * never joined. Piece boundaries that fall inside a 3-byte group are bridged through a small carry.
 * The native encoder writes into the target directly; Node's own encoder (the fallback) has to make a
 * string first, which for a 25 MiB image is a 33 MiB temporary on the worker's V8 heap.
 */
import { bytesAddon } from '../native/index.js';

/** Length of the base64 text of `n` bytes (with padding). */
export function base64Length(n: number): number {
  return Math.ceil(n / 3) * 4;
}

/** Writes the base64 of `src` into `out` at `at`; returns the characters written. */
export type Base64Encoder = (src: Buffer, out: Buffer, at: number) => number;

/** Node's encoder: makes a string, then copies it. */
export const nodeEncoder: Base64Encoder = (src, out, at) => out.write(src.toString('base64'), at, 'latin1');

/** The addon's encoder, straight into `out`; undefined when the addon is not built. */
export function nativeEncoder(): Base64Encoder | undefined {
  const native = bytesAddon();
  return native ? (src, out, at) => native.base64Encode(src, out.subarray(at, at + base64Length(src.length))) : undefined;
}

const defaultEncoder: Base64Encoder = nativeEncoder() ?? nodeEncoder;

function asBuffer(view: Uint8Array): Buffer {
  return Buffer.isBuffer(view) ? view : Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

/** Writes the base64 of the concatenated pieces into `out` at `at`; returns the number of characters written. */
export function base64Into(pieces: readonly Uint8Array[], out: Buffer, at: number, encode: Base64Encoder = defaultEncoder): number {
  const carry = Buffer.alloc(3);
  let carried = 0;
  let pos = at;
  for (const piece of pieces) {
    let p = asBuffer(piece);
    if (carried > 0) {
      const take = Math.min(3 - carried, p.length);
      p.copy(carry, carried, 0, take);
      carried += take;
      p = p.subarray(take);
      if (carried < 3) continue;
      pos += out.write(carry.toString('base64'), pos, 'latin1');
      carried = 0;
    }
    const whole = p.length - (p.length % 3);
    if (whole > 0) pos += encode(p.subarray(0, whole), out, pos);
    carried = p.length - whole;
    p.copy(carry, 0, whole);
  }
  if (carried > 0) pos += out.write(carry.subarray(0, carried).toString('base64'), pos, 'latin1');
  return pos - at;
}
