import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ARENA_ALIGN, Arena, type Slot } from '../src/pool/arena.js';

describe('Arena', () => {
  it('hands out page-aligned, non-overlapping slots and refuses when full', () => {
    const arena = new Arena(10 * ARENA_ALIGN);
    const a = arena.alloc(1)!;
    const b = arena.alloc(ARENA_ALIGN + 1)!;
    expect(a).toEqual({ offset: 0, length: ARENA_ALIGN });
    expect(b).toEqual({ offset: ARENA_ALIGN, length: 2 * ARENA_ALIGN });
    expect(arena.used).toBe(3 * ARENA_ALIGN);
    expect(arena.alloc(8 * ARENA_ALIGN)).toBeUndefined();
    expect(arena.alloc(7 * ARENA_ALIGN)).toEqual({ offset: 3 * ARENA_ALIGN, length: 7 * ARENA_ALIGN });
  });

  it('coalesces freed neighbours so a large slot fits again', () => {
    const arena = new Arena(4 * ARENA_ALIGN);
    const s = [0, 1, 2, 3].map(() => arena.alloc(ARENA_ALIGN)!);
    arena.free(s[1]!);
    arena.free(s[3]!);
    arena.free(s[2]!);
    expect(arena.freeRanges()).toEqual([{ offset: ARENA_ALIGN, length: 3 * ARENA_ALIGN }]);
    arena.free(s[0]!);
    expect(arena.alloc(4 * ARENA_ALIGN)).toEqual({ offset: 0, length: 4 * ARENA_ALIGN });
  });

  it('shrink returns the tail', () => {
    const arena = new Arena(8 * ARENA_ALIGN);
    const big = arena.alloc(8 * ARENA_ALIGN)!;
    const small = arena.shrink(big, 100);
    expect(small).toEqual({ offset: 0, length: ARENA_ALIGN });
    expect(arena.used).toBe(ARENA_ALIGN);
    expect(arena.alloc(7 * ARENA_ALIGN)).toEqual({ offset: ARENA_ALIGN, length: 7 * ARENA_ALIGN });
  });

  it('refuses double frees and foreign slots', () => {
    const arena = new Arena(4 * ARENA_ALIGN);
    const a = arena.alloc(10)!;
    arena.free(a);
    expect(() => arena.free(a)).toThrow(/not in use/);
    expect(() => arena.free({ offset: 2 * ARENA_ALIGN, length: ARENA_ALIGN })).toThrow(/not in use/);
    expect(() => arena.alloc(0)).toThrow(RangeError);
  });

  it('views write through to the shared buffer', () => {
    const arena = new Arena(2 * ARENA_ALIGN);
    const a = arena.alloc(5)!;
    arena.view(a, 5).set([1, 2, 3, 4, 5]);
    expect([...new Uint8Array(arena.buffer, 0, 5)]).toEqual([1, 2, 3, 4, 5]);
    expect(() => arena.view(a, a.length + 1)).toThrow(RangeError);
  });

  it('never overlaps live slots and accounts every byte, whatever the order of operations', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 5 * ARENA_ALIGN }), fc.nat()), { maxLength: 200 }), (ops) => {
        const arena = new Arena(64 * ARENA_ALIGN);
        const live: Slot[] = [];
        for (const [allocate, size, pick] of ops) {
          if (allocate || live.length === 0) {
            const s = arena.alloc(size);
            if (s) live.push(s);
          } else {
            const [s] = live.splice(pick % live.length, 1);
            arena.free(s!);
          }
          const sorted = [...live].sort((x, y) => x.offset - y.offset);
          for (let i = 1; i < sorted.length; i++) expect(sorted[i - 1]!.offset + sorted[i - 1]!.length).toBeLessThanOrEqual(sorted[i]!.offset);
          const usedByLive = live.reduce((n, s) => n + s.length, 0);
          const free = arena.freeRanges().reduce((n, r) => n + r.length, 0);
          expect(arena.used).toBe(usedByLive);
          expect(usedByLive + free).toBe(arena.capacity);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('arena sizing', () => {
  it('the configuration minimum admits exactly one largest protect, sized as the API sizes it', async () => {
    const { arenaBytesForOneProtect } = await import('../src/config.js');
    const { protectBodyCapacity } = await import('../src/pipeline/body.js');
    const { MULTIPART_SLACK_BYTES } = await import('../src/config.js');
    const { ARENA_ALIGN } = await import('../src/pool/arena.js');
    const page = (n: number): number => Math.ceil(n / ARENA_ALIGN) * ARENA_ALIGN;
    for (const max of [1024 * 1024, 26_214_400, 1_000_003]) {
      const body = max + MULTIPART_SLACK_BYTES;
      expect(arenaBytesForOneProtect(max)).toBe(page(body) + page(protectBodyCapacity(body)));
    }
  });
});
