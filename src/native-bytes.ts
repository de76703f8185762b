/**
 * The one loader of the byte-helpers addon (native/src/bytes.cc): base64 straight into a buffer, the
 * multipart delimiter search, and handing idle pages back to the OS. All have portable fallbacks, so a
 * missing addon costs speed and idle memory, never correctness; the first caller learns which one runs.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export interface BytesAddon {
  /** Writes the base64 of `src` (with padding) into `dst`; returns the characters written. */
  base64Encode(src: Uint8Array, dst: Uint8Array): number;
  /** Releases the whole pages inside `view` (madvise DONTNEED); returns the bytes released. */
  release(view: Uint8Array): number;
  /** The first index >= `from` (not negative) where `needle` occurs in `haystack`, or -1 (as Buffer#indexOf). */
  indexOf(haystack: Uint8Array, needle: Uint8Array, from: number): number;
  /** Returns free malloc memory of every thread's arena to the OS (glibc malloc_trim). */
  trim(): boolean;
  /** The encoder in use: 'avx2' or 'scalar'. */
  simd(): string;
}

const CANDIDATES = ['../native/build/Release/optmark_bytes.node', '../../native/build/Release/optmark_bytes.node'];

let loaded: BytesAddon | null | undefined;

/** The addon, or null when it is not built for this Node.js (the callers fall back). */
export function bytesAddon(): BytesAddon | null {
  if (loaded !== undefined) return loaded;
  const require = createRequire(import.meta.url);
  loaded = null;
  for (const rel of CANDIDATES) {
    try {
      const addon = require(fileURLToPath(new URL(rel, import.meta.url))) as BytesAddon;
      if (typeof addon.base64Encode === 'function' && typeof addon.release === 'function' && typeof addon.indexOf === 'function') {
        loaded = addon;
        break;
      }
    } catch {
      // not at this location (source vs dist layouts); the next one, or the fallback
    }
  }
  return loaded;
}
