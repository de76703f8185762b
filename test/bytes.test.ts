import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesAddon } from '../src/native/index.js';
import { base64Into, base64Length, nativeEncoder, nodeEncoder, type Base64Encoder } from '../src/pipeline/base64.js';
import { Arena } from '../src/transfer/arena.js';
import { releaseFreePages } from '../src/transfer/idle.js';

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
  // A four-letter alphabet makes near-misses and overlapping matches common; lengths reach past the
  // 32-position AVX2 step so candidates fall in the vector loop, across its edge, and in the scalar tail.
  const letters = fc.constantFrom(0x0d, 0x0a, 0x2d, 0x61);
  it.skipIf(!bytesAddon())('indexOf finds what Buffer#indexOf finds, from any start', () => {
    fc.assert(
      fc.property(fc.array(letters, { maxLength: 300 }), fc.array(letters, { maxLength: 40 }), fc.nat({ max: 320 }), (h, k, from) => {
        const hay = Buffer.from(h);
        const needle = Buffer.from(k);
        const expected = from > hay.length ? -1 : hay.indexOf(needle, from);
        expect(bytesAddon()!.indexOf(hay, needle, from)).toBe(expected);
      }),
      { numRuns: 5000 },
    );
  });

  it.skipIf(!bytesAddon())('indexOf finds a delimiter at every offset of a large unaligned view of shared memory', () => {
    const needle = Buffer.from('\r\n--optmark-boundary-0123456789');
    const data = randomBytes(70_000);
    const sab = Buffer.from(new SharedArrayBuffer(data.length + 3)).subarray(3);
    for (const at of [0, 1, 31, 32, 33, 4095, 65_000, data.length - needle.length]) {
      data.copy(sab);
      needle.copy(sab, at);
      expect(bytesAddon()!.indexOf(sab, needle, 0)).toBe(sab.indexOf(needle, 0));
      expect(bytesAddon()!.indexOf(sab, needle, at + 1)).toBe(sab.indexOf(needle, at + 1));
    }
    expect(bytesAddon()!.indexOf(sab, needle, -1)).toBe(-1);
  });

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

  it.skipIf(!bytesAddon())('keeps the warm start of the arena resident: free pages below it keep their bytes, those past it are handed back', () => {
    const arena = new Arena(64 * 4096);
    const gone = arena.alloc(4096 * 48)!; // offsets 0 .. 48 pages, across the warm boundary at 20 pages
    arena.view(gone).fill(9);
    arena.free(gone);
    const warm = 20 * 4096;
    // Everything from the boundary to the arena's end is one free range of 44 pages (43 whole ones if
    // the buffer does not start on a page).
    expect([43 * 4096, 44 * 4096]).toContain(releaseFreePages(arena, warm));
    expect(new Uint8Array(arena.buffer, 0, warm).every((b) => b === 9)).toBe(true);
    expect(new Uint8Array(arena.buffer, warm + 4096, 26 * 4096).every((b) => b === 0)).toBe(true);
    // A warm start covering the whole arena releases nothing.
    const all = arena.alloc(4096 * 64)!;
    arena.view(all).fill(5);
    arena.free(all);
    expect(releaseFreePages(arena, 64 * 4096)).toBe(0);
    expect(new Uint8Array(arena.buffer).every((b) => b === 5)).toBe(true);
  });
});
