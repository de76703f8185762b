/**
 * Idle request memory goes back to the OS (native/src/bytes.cc: madvise on the arena's free pages, then
 * glibc's malloc_trim for the memory the worker threads' malloc arenas keep), once the server has been
 * quiet, nothing leased, for an unbroken stretch: after a burst, never in the gaps of a steady load
 * (releasing whenever the lease count touched zero stopped the event loop for 8-9 ms about every 20 s at
 * a steady 170 protects/s, then made requests fault their pages back in). Without the addon nothing is
 * handed back: the memory stays resident, bounded by the arena's size.
 */
import { bytesAddon } from '../native/index.js';
import type { Arena } from './arena.js';

/** Free ranges smaller than this are left alone: not worth a system call. */
const MIN_RELEASE = 64 * 1024;

/**
 * Releases the pages of every free range of the arena from offset `keepBytes` on, and the free memory
 * malloc keeps in its per-thread arenas; returns the arena bytes handed back. The first `keepBytes` stay
 * resident (the warm start): ranges are allocated first fit from the start, so that is where the next
 * burst lands, and a page handed back costs a fault (on a VM with free page reporting, a host fault too)
 * when it is touched again.
 */
export function releaseFreePages(arena: Arena, keepBytes = 0): number {
  const native = bytesAddon();
  if (!native) return 0;
  let released = 0;
  for (const r of arena.freeRanges()) {
    const from = Math.max(r.offset, keepBytes);
    const length = r.offset + r.length - from;
    if (length >= MIN_RELEASE) released += native.release(new Uint8Array(arena.buffer, from, length));
  }
  native.trim();
  return released;
}

/** Runs an action once nothing has been busy for `quietMs` without a break. */
export class QuietTimer {
  #timer: NodeJS.Timeout | undefined;
  #quietSince = 0;

  constructor(
    readonly quietMs: number,
    readonly busy: () => boolean,
    readonly action: () => void,
    readonly now: () => number = () => performance.now(),
  ) {}

  /** Call whenever the work in flight drops to none. */
  idle(): void {
    this.#quietSince = this.now();
    if (!this.#timer) this.#arm(this.quietMs);
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    this.#timer = setTimeout(() => this.#fire(), ms).unref();
  }

  #fire(): void {
    this.#timer = undefined;
    if (this.busy()) return; // the next idle() arms it again
    const quiet = this.now() - this.#quietSince;
    if (quiet >= this.quietMs) this.action();
    else this.#arm(this.quietMs - quiet);
  }
}
