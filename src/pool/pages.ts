/**
 * Gives the arena's free pages back to the OS while the server is idle, so resident memory returns to
 * its idle level after a burst (native/src/bytes.cc, madvise). Without the addon it does nothing: the
 * memory stays resident but bounded by the arena's size.
 */
import { bytesAddon } from '../native-bytes.js';
import type { Arena } from './arena.js';

/** Free ranges smaller than this are left alone: not worth a system call. */
const MIN_RELEASE = 64 * 1024;

/** True when free pages can be handed back on this platform and build. */
export function canReleasePages(): boolean {
  return bytesAddon() !== null;
}

/**
 * Releases the pages of every free range of the arena from offset `keepBytes` on, and the free memory
 * malloc keeps in its per-thread arenas; returns the arena bytes handed back. The first `keepBytes` stay
 * resident: ranges are allocated first fit from the start, so that is where the next burst lands, and a
 * page handed back costs a fault (on a VM with free page reporting, a host fault too) when it is touched
 * again.
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
