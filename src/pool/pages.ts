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
 * Releases the pages of every free range of the arena, and the free memory malloc keeps in its
 * per-thread arenas; returns the arena bytes handed back.
 */
export function releaseFreePages(arena: Arena): number {
  const native = bytesAddon();
  if (!native) return 0;
  let released = 0;
  for (const r of arena.freeRanges()) {
    if (r.length >= MIN_RELEASE) released += native.release(new Uint8Array(arena.buffer, r.offset, r.length));
  }
  native.trim();
  return released;
}
