/**
 * One SharedArrayBuffer that every upload and every response body lives in while a request is in
 * flight. The event-loop thread allocates and frees ranges; workers read and write the ranges they are
 * given, by offset. It replaces two ArrayBuffer allocations and two transfers per request: each of those
 * counted as fresh external memory in the receiving V8 heap, and pushed every heap into a full mark-
 * compact every few dozen requests. It is also the server's memory bound: when it is full, the answer
 * is 503, not more memory.
 */

import { PAGE_BYTES } from '../config.js';

/** Ranges start on page boundaries, so that idle pages can be handed back to the OS. */
export const ARENA_ALIGN = PAGE_BYTES;

export interface Slot {
  readonly offset: number;
  /** Capacity in bytes (a multiple of ARENA_ALIGN). */
  readonly length: number;
}

interface Range {
  offset: number;
  length: number;
}

function alignUp(n: number): number {
  return Math.ceil(n / ARENA_ALIGN) * ARENA_ALIGN;
}

export class Arena {
  readonly buffer: SharedArrayBuffer;
  /** Free ranges, sorted by offset, never adjacent (always coalesced). */
  readonly #free: Range[];
  /** Live slots by offset, to refuse double frees and frees of unknown ranges. */
  readonly #live = new Map<number, number>();
  #used = 0;
  #peak = 0;

  constructor(bytes: number) {
    const size = alignUp(Math.max(bytes, ARENA_ALIGN));
    this.buffer = new SharedArrayBuffer(size);
    this.#free = [{ offset: 0, length: size }];
  }

  get capacity(): number {
    return this.buffer.byteLength;
  }

  get used(): number {
    return this.#used;
  }

  get peak(): number {
    return this.#peak;
  }

  get liveSlots(): number {
    return this.#live.size;
  }

  /**
   * First fit; undefined when no free range is large enough. With `growTo` (a slot that may grow in place
   * up to that many bytes, ./index.ts), the slot goes where it can: into the first free range that holds
   * `growTo`, at the offset that leaves the rest of `growTo` free right after it (the range's top end; first
   * fit hands out its bottom first), else first fit.
   */
  alloc(bytes: number, growTo = 0): Slot | undefined {
    if (!(bytes > 0) || !Number.isSafeInteger(bytes)) throw new RangeError(`arena: cannot allocate ${bytes} bytes`);
    const need = alignUp(bytes);
    const want = alignUp(growTo);
    if (want > need) {
      for (let i = 0; i < this.#free.length; i++) {
        const r = this.#free[i]!;
        if (r.length < want) continue;
        const slot = { offset: r.offset + r.length - want, length: need };
        const below = slot.offset - r.offset;
        const above = { offset: slot.offset + need, length: want - need };
        if (below > 0) {
          r.length = below;
          this.#free.splice(i + 1, 0, above);
        } else this.#free[i] = above;
        return this.#take(slot);
      }
    }
    for (let i = 0; i < this.#free.length; i++) {
      const r = this.#free[i]!;
      if (r.length < need) continue;
      const slot = { offset: r.offset, length: need };
      if (r.length === need) this.#free.splice(i, 1);
      else {
        r.offset += need;
        r.length -= need;
      }
      return this.#take(slot);
    }
    return undefined;
  }

  /**
   * Grows a live slot in place to at least `bytes`, from the free range right after it; the larger slot,
   * or undefined (the slot unchanged) when that range is missing or too small.
   */
  grow(slot: Slot, bytes: number): Slot | undefined {
    const length = this.#live.get(slot.offset);
    if (length === undefined || length !== slot.length) throw new Error('arena: grow of a range not in use');
    const need = alignUp(bytes);
    if (need <= length) return slot;
    const end = slot.offset + length;
    const i = this.#free.findIndex((r) => r.offset === end);
    const r = this.#free[i];
    if (!r || r.length < need - length) return undefined;
    if (r.length === need - length) this.#free.splice(i, 1);
    else {
      r.offset += need - length;
      r.length -= need - length;
    }
    this.#live.set(slot.offset, need);
    this.#used += need - length;
    this.#peak = Math.max(this.#peak, this.#used);
    return { offset: slot.offset, length: need };
  }

  #take(slot: Slot): Slot {
    this.#live.set(slot.offset, slot.length);
    this.#used += slot.length;
    this.#peak = Math.max(this.#peak, this.#used);
    return slot;
  }

  /** Returns a slot's range; freeing twice, or a range the arena did not give out, throws. */
  free(slot: Slot): void {
    const length = this.#live.get(slot.offset);
    if (length === undefined || length !== slot.length) throw new Error(`arena: free of a range not in use (${slot.offset}+${slot.length})`);
    this.#live.delete(slot.offset);
    this.#used -= length;
    this.#insert({ offset: slot.offset, length });
  }

  /** Keeps the first `bytes` of a slot and frees the rest; returns the smaller slot. */
  shrink(slot: Slot, bytes: number): Slot {
    const length = this.#live.get(slot.offset);
    if (length === undefined || length !== slot.length) throw new Error('arena: shrink of a range not in use');
    const keep = alignUp(Math.max(bytes, 1));
    if (keep >= length) return slot;
    this.#live.set(slot.offset, keep);
    this.#used -= length - keep;
    this.#insert({ offset: slot.offset + keep, length: length - keep });
    return { offset: slot.offset, length: keep };
  }

  /** A byte view of the first `length` bytes of a slot. */
  view(slot: Slot, length = slot.length): Uint8Array {
    if (length > slot.length) throw new RangeError('arena: view past the end of its slot');
    return new Uint8Array(this.buffer, slot.offset, length);
  }

  /** The free ranges (for page release while idle). */
  freeRanges(): ReadonlyArray<Readonly<Range>> {
    return this.#free;
  }

  #insert(range: Range): void {
    // Binary search for the insertion point, then merge with the neighbours.
    let lo = 0;
    let hi = this.#free.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.#free[mid]!.offset < range.offset) lo = mid + 1;
      else hi = mid;
    }
    const prev = this.#free[lo - 1];
    const next = this.#free[lo];
    if (prev && prev.offset + prev.length === range.offset) {
      prev.length += range.length;
      if (next && prev.offset + prev.length === next.offset) {
        prev.length += next.length;
        this.#free.splice(lo, 1);
      }
      return;
    }
    if (next && range.offset + range.length === next.offset) {
      next.offset = range.offset;
      next.length += range.length;
      return;
    }
    this.#free.splice(lo, 0, range);
  }
}
