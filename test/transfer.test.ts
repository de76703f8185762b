import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MULTIPART_SLACK_BYTES, answerBytesFor, inflightBytesFor, loadConfig } from '../src/config.js';
import { ARENA_ALIGN, Arena, type Slot } from '../src/transfer/arena.js';
import { Transfer, TransferFullError, UPFRONT_BODY_BYTES } from '../src/transfer/index.js';
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
      const one = transfer.admit(body, true)!;
      expect(one).toBeDefined();
      // The whole body arrives (its room grows as it does) and its answer's room is taken at seal.
      for (let sent = 0; sent < body; sent += 256 * 1024) expect(one.write(new ArrayBuffer(Math.min(256 * 1024, body - sent)))).toMatch(/^(ok|grown)$/);
      expect(one.seal().output).toBeDefined();
      expect(transfer.admit(1, false)).toBeUndefined();
      one.release();
      expect(transfer.used).toBe(0);
    }
  });

  it('a lease takes the body up to its room, no further, and gives every byte back once', () => {
    const transfer = new Transfer({ capacityBytes: 1024 * ARENA_ALIGN, warmBytes: 0 });
    const lease = transfer.admit(10, true)!;
    expect(transfer.leases).toBe(1);
    expect(lease.write(chunk([1, 2, 3, 4]))).toBe('ok');
    expect(lease.write(chunk([5, 6, 7, 8, 9, 10]))).toBe('ok');
    expect(lease.write(chunk([11]))).toBe('too-large');
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

  it('a body declared past the upfront room holds only that room until its bytes arrive, then grows to them', () => {
    const declared = 25 * 1024 * 1024;
    const transfer = new Transfer({ capacityBytes: 64 * 1024 * 1024, warmBytes: 0 });
    const slow = Array.from({ length: 13 }, () => transfer.admit(declared, true)!);
    // 13 clients that declared 25 MiB and sent nothing hold 13 x 2 MiB, not 13 x 59 MB.
    expect(transfer.used).toBe(13 * UPFRONT_BODY_BYTES);
    for (const l of slow) expect(l.held).toBe(UPFRONT_BODY_BYTES);
    for (const l of slow.slice(1)) l.release();
    const lease = slow[0]!;
    const bytes = Buffer.alloc(3 * 1024 * 1024 + 5);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 0xff;
    const results = [];
    for (let at = 0; at < bytes.length; at += 100_000) results.push(lease.write(chunk(bytes.subarray(at, at + 100_000))));
    expect(results.filter((r) => r === 'grown').length).toBeGreaterThan(0);
    expect(results.every((r) => r === 'ok' || r === 'grown')).toBe(true);
    expect(lease.held).toBeGreaterThanOrEqual(bytes.length);
    const { input, output } = lease.seal();
    expect(output!.length).toBeGreaterThanOrEqual(answerBytesFor(bytes.length));
    expect(Buffer.from(new TransferViews(transfer.share).view(input)).equals(bytes)).toBe(true);
    lease.release();
    expect(transfer.used).toBe(0);
  });

  it('a growing body whose neighbour is taken moves, bytes intact; when nothing can hold it, the write is refused and nothing changes', () => {
    const transfer = new Transfer({ capacityBytes: 3 * UPFRONT_BODY_BYTES + 8 * ARENA_ALIGN, warmBytes: 0 });
    const lease = transfer.admit(4 * UPFRONT_BODY_BYTES, false)!;
    // Take everything else, then free the room below the lease only: it cannot grow in place.
    const others = [transfer.admit(UPFRONT_BODY_BYTES, false)!, transfer.admit(UPFRONT_BODY_BYTES, false)!];
    const first = Buffer.alloc(UPFRONT_BODY_BYTES, 3);
    expect(lease.write(chunk(first))).toBe('ok');
    expect(lease.write(chunk([9]))).toBe('full');
    expect(lease.received).toBe(UPFRONT_BODY_BYTES);
    expect(lease.held).toBe(UPFRONT_BODY_BYTES);
    for (const o of others) o.release();
    expect(lease.write(chunk([9]))).toBe('grown');
    const { input } = lease.seal();
    const seen = new TransferViews(transfer.share).view(input);
    expect(seen.length).toBe(UPFRONT_BODY_BYTES + 1);
    expect(seen.subarray(0, UPFRONT_BODY_BYTES).every((b) => b === 3)).toBe(true);
    expect(seen[UPFRONT_BODY_BYTES]).toBe(9);
    lease.release();
    expect(transfer.used).toBe(0);
  });

  it("a large protect whose answer's room the budget cannot hold at seal is refused 503 overloaded", () => {
    const transfer = new Transfer({ capacityBytes: 2 * UPFRONT_BODY_BYTES + ARENA_ALIGN, warmBytes: 0 });
    const lease = transfer.admit(UPFRONT_BODY_BYTES + 1, true)!;
    expect(lease.write(chunk(Buffer.alloc(UPFRONT_BODY_BYTES + 1)))).toBe('grown');
    expect(() => lease.seal()).toThrow(TransferFullError);
    expect(() => lease.seal()).toThrow(expect.objectContaining({ code: 'overloaded' }));
    lease.release();
    expect(transfer.used).toBe(0);
  });
});

describe('Arena growth', () => {
  it('a slot placed for growth leaves its growth room free above it, and grows into it in place', () => {
    const arena = new Arena(20 * ARENA_ALIGN);
    const g = arena.alloc(2 * ARENA_ALIGN, 8 * ARENA_ALIGN)!;
    expect(g).toEqual({ offset: 12 * ARENA_ALIGN, length: 2 * ARENA_ALIGN });
    // First fit takes the bottom of the range, not the growth room.
    expect(arena.alloc(ARENA_ALIGN)).toEqual({ offset: 0, length: ARENA_ALIGN });
    expect(arena.grow(g, 8 * ARENA_ALIGN)).toEqual({ offset: 12 * ARENA_ALIGN, length: 8 * ARENA_ALIGN });
    expect(arena.used).toBe(9 * ARENA_ALIGN);
    // Nothing free right after it now.
    expect(arena.grow({ offset: 12 * ARENA_ALIGN, length: 8 * ARENA_ALIGN }, 9 * ARENA_ALIGN)).toBeUndefined();
    expect(() => arena.grow(g, 9 * ARENA_ALIGN)).toThrow(/not in use/);
  });

  it('random allocs, growths and frees never overlap and always coalesce back to one free range', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(5), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 0, max: 12 })), { maxLength: 60 }), (ops) => {
        const arena = new Arena(64 * ARENA_ALIGN);
        const live: Slot[] = [];
        for (const [op, n, m] of ops) {
          if (op <= 1) {
            const s = arena.alloc(n * ARENA_ALIGN, m * ARENA_ALIGN);
            if (s) live.push(s);
          } else if (op <= 3 && live.length) {
            const i = m % live.length;
            const s = arena.grow(live[i]!, live[i]!.length + n * ARENA_ALIGN);
            if (s) live[i] = s;
          } else if (live.length) arena.free(live.splice(m % live.length, 1)[0]!);
          const sorted = [...live].sort((x, y) => x.offset - y.offset);
          for (let i = 1; i < sorted.length; i++) expect(sorted[i]!.offset).toBeGreaterThanOrEqual(sorted[i - 1]!.offset + sorted[i - 1]!.length);
          expect(arena.used).toBe(live.reduce((t, s) => t + s.length, 0));
        }
        for (const s of live) arena.free(s);
        expect(arena.freeRanges()).toEqual([{ offset: 0, length: 64 * ARENA_ALIGN }]);
      }),
    );
  });
});
