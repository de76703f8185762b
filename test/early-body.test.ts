// Body bytes kept while a request is admitted (src/http/intake.ts): every chunk comes back in order and
// byte for byte, also across slabs, past a slab's size and after other requests used the same slabs.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EarlyBody } from '../src/http/intake.js';

/** A chunk as uWS lends it: an ArrayBuffer that is overwritten once the callback returns. */
function lend(bytes: Buffer, into: (chunk: ArrayBuffer) => void): void {
  const loan = new ArrayBuffer(bytes.length);
  new Uint8Array(loan).set(bytes);
  into(loan);
  new Uint8Array(loan).fill(0xee);
}

function collect(early: EarlyBody): { bytes: Buffer; lasts: boolean[] } {
  const parts: Buffer[] = [];
  const lasts: boolean[] = [];
  early.replay((chunk, isLast) => {
    parts.push(Buffer.from(chunk));
    lasts.push(isLast);
  });
  return { bytes: Buffer.concat(parts), lasts };
}

describe('EarlyBody', () => {
  it('gives back every chunk in order, byte for byte: small, empty, slab-sized and larger than a slab', () => {
    const sizes = [10, 0, 300_000, 300_000, 524_288, 1_500_000, 7, 0];
    const chunks = sizes.map((n) => randomBytes(n));
    const early = new EarlyBody();
    chunks.forEach((c, i) => lend(c, (loan) => early.add(loan, i === chunks.length - 1)));
    expect(early.bytes).toBe(sizes.reduce((a, b) => a + b, 0));
    const { bytes, lasts } = collect(early);
    expect(bytes.equals(Buffer.concat(chunks))).toBe(true);
    expect(lasts).toEqual(sizes.map((_, i) => i === sizes.length - 1));
  });

  it('slabs given back serve the next requests without touching a body still held', () => {
    const held = new EarlyBody();
    const first = randomBytes(200_000);
    lend(first, (loan) => held.add(loan, false));
    for (let round = 0; round < 20; round++) {
      const other = new EarlyBody();
      const body = randomBytes(100_000 + round * 20_000);
      lend(body, (loan) => other.add(loan, true));
      expect(collect(other).bytes.equals(body)).toBe(true);
      const dropped = new EarlyBody(); // a request that left before it was admitted
      lend(randomBytes(400_000), (loan) => dropped.add(loan, true));
      dropped.release();
    }
    const last = randomBytes(50_000);
    lend(last, (loan) => held.add(loan, true));
    expect(collect(held).bytes.equals(Buffer.concat([first, last]))).toBe(true);
  });
});
