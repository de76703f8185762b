import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesAddon } from '../src/native-bytes.js';
import { base64Into, base64Length, nativeEncoder, nodeEncoder, type Base64Encoder } from '../src/pipeline/base64.js';
import { Arena } from '../src/pool/arena.js';
import { releaseFreePages } from '../src/pool/pages.js';

const native = nativeEncoder();
const encoders: Array<[string, Base64Encoder | undefined]> = [
  ['node', nodeEncoder],
  ['native', native],
];

describe.each(encoders)('base64Into with the %s encoder', (name, encoder) => {
  it.skipIf(!encoder)(`equals Node's base64 of the joined pieces, whatever the split (${name})`, () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 80 }), { maxLength: 12 }), fc.nat({ max: 7 }), (pieces, at) => {
        const joined = Buffer.concat(pieces);
        const out = Buffer.alloc(at + base64Length(joined.length) + 3, 0x2e);
        const n = base64Into(pieces, out, at, encoder!);
        expect(n).toBe(base64Length(joined.length));
        expect(out.toString('latin1', at, at + n)).toBe(joined.toString('base64'));
        expect(out[at + n]).toBe(0x2e); // nothing written past the end
      }),
      { numRuns: 2000 },
    );
  });

  it.skipIf(!encoder)(`handles large unaligned views and shared memory (${name})`, () => {
    for (const size of [27, 28, 29, 31, 32, 33, 1000, 65_537, 1_600_001]) {
      const src = randomBytes(size + 5).subarray(5);
      const sab = Buffer.from(new SharedArrayBuffer(base64Length(size) + 8));
      const n = base64Into([src], sab, 3, encoder!);
      expect(sab.toString('latin1', 3, 3 + n)).toBe(src.toString('base64'));
    }
  });
});

describe('native byte helpers', () => {
  it.skipIf(!bytesAddon())('refuses a destination that is too small instead of overrunning it', () => {
    expect(() => bytesAddon()!.base64Encode(new Uint8Array(10), new Uint8Array(15))).toThrow(RangeError);
  });

  it.skipIf(!bytesAddon())('releasing free arena pages keeps live data and zeroes only what was free', () => {
    const arena = new Arena(64 * 4096);
    const live = arena.alloc(4096 * 3)!;
    arena.view(live).fill(7);
    const gone = arena.alloc(4096 * 40)!;
    arena.view(gone).fill(9);
    arena.free(gone);
    expect(releaseFreePages(arena)).toBeGreaterThan(0);
    expect(arena.view(live).every((b) => b === 7)).toBe(true);
    expect(new Uint8Array(arena.buffer, gone.offset + 4096, 4096 * 30).every((b) => b === 0)).toBe(true);
  });
});
