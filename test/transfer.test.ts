import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MULTIPART_SLACK_BYTES, answerBytesFor, inflightBytesFor, loadConfig } from '../src/config.js';
import { ARENA_ALIGN, Arena, type Slot } from '../src/transfer/arena.js';
import { Transfer } from '../src/transfer/index.js';
import { TransferViews } from '../src/transfer/worker.js';

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

/** A chunk as uWS hands it over: an ArrayBuffer of its own. */
const chunk = (bytes: number[] | Buffer): ArrayBuffer => new Uint8Array(bytes).buffer;

describe('Transfer (request memory)', () => {
  it('the configuration minimum admits exactly one largest protect at a time, and one byte less is refused', () => {
    for (const max of [1024 * 1024, 26_214_400, 1_000_003]) {
      const body = max + MULTIPART_SLACK_BYTES;
      const min = inflightBytesFor(body, true);
      const env = { OPTMARK_MAX_UPLOAD_BYTES: String(max), OPTMARK_MAX_INFLIGHT_BYTES: String(min) };
      expect(loadConfig(env).maxInflightBytes).toBe(min);
      expect(() => loadConfig({ ...env, OPTMARK_MAX_INFLIGHT_BYTES: String(min - 1) })).toThrow(/OPTMARK_MAX_INFLIGHT_BYTES/);
      const transfer = new Transfer({ capacityBytes: min, warmBytes: 0 });
      const one = transfer.admit(body, true);
      expect(one).toBeDefined();
      expect(transfer.admit(1, false)).toBeUndefined();
      one!.release();
      expect(transfer.used).toBe(0);
    }
  });

  it('a lease takes the body up to its room, no further, and gives every byte back once', () => {
    const transfer = new Transfer({ capacityBytes: 1024 * ARENA_ALIGN, warmBytes: 0 });
    const lease = transfer.admit(10, true)!;
    expect(transfer.leases).toBe(1);
    expect(lease.write(chunk([1, 2, 3, 4]))).toBe(true);
    expect(lease.write(chunk([5, 6, 7, 8, 9, 10]))).toBe(true);
    expect(lease.write(chunk([11]))).toBe(false);
    expect(lease.received).toBe(10);
    const { input, output } = lease.seal();
    expect(input.length).toBe(10);
    expect(output!.length).toBeGreaterThanOrEqual(answerBytesFor(10));
    // The worker's side sees the body's bytes and writes its answer in place.
    const views = new TransferViews(transfer.share);
    expect([...views.view(input)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const room = views.view(output!);
    room.set([42, 43, 44]);
    const answer = views.answer(room.subarray(0, 3), room);
    expect(answer).toEqual({ inPlace: 3 });
    expect([...lease.answer(answer)]).toEqual([42, 43, 44]);
    lease.release();
    lease.release();
    expect(transfer.used).toBe(0);
    expect(transfer.leases).toBe(0);
  });

  it('an answer built elsewhere (it did not fit the room) comes back as its own bytes', () => {
    const transfer = new Transfer({ capacityBytes: 64 * ARENA_ALIGN, warmBytes: 0 });
    const lease = transfer.admit(4, false)!;
    lease.write(chunk([1, 2, 3, 4]));
    const { output } = lease.seal();
    expect(output).toBeUndefined();
    const views = new TransferViews(transfer.share);
    const own = Uint8Array.from([7, 7]);
    expect(views.answer(own, undefined)).toEqual({ bytes: own });
    expect([...lease.answer({ bytes: own })]).toEqual([7, 7]);
    lease.release();
    expect(transfer.used).toBe(0);
  });

  it('refuses when the budget is full, and admits again once a lease is released', () => {
    const transfer = new Transfer({ capacityBytes: 4 * ARENA_ALIGN, warmBytes: 0 });
    const a = transfer.admit(3 * ARENA_ALIGN, false)!;
    expect(transfer.admit(2 * ARENA_ALIGN, false)).toBeUndefined();
    a.release();
    expect(transfer.admit(2 * ARENA_ALIGN, false)).toBeDefined();
  });
});
