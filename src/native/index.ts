/**
 * The one loader of optmark's native addons (native/, built by `npm install`):
 *
 * - `bytes` (native/src/bytes.cc): base64 straight into a buffer, the multipart delimiter search, idle
 *   page release (madvise) and malloc_trim;
 * - `fingerprint` (native/src/addon.cc, prefilter.cc, v1-core.cc, v2-*.cc): the fingerprint detector's cores;
 * - `jpeg` (native/src/jpeg.cc): the fingerprint detector's scaled JPEG decode on the system's libjpeg,
 *   built only where libjpeg's headers and library are found.
 *
 * All are optional. Without them the portable code runs (the same answers, slower; idle request memory
 * is not handed back to the OS). A failed load is reported once per thread through the logger the
 * composition root (or the worker) sets, with what to do about it; `/readyz` shows the state.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export type AddonName = 'bytes' | 'fingerprint' | 'jpeg';

export interface AddonState {
  loaded: boolean;
  /** The SIMD path the addon chose for this CPU ('avx512f', 'avx2', 'scalar', 'portable'), when loaded. */
  simd?: string;
  /** Why it did not load. */
  error?: string;
}

/** What the loader logs through: the pino logger's warn, or anything shaped like it. */
export type NativeLog = (fields: Record<string, unknown>, message: string) => void;

const FILES: Record<AddonName, { file: string; exports: string[]; without: string }> = {
  bytes: {
    file: 'optmark_bytes.node',
    exports: ['base64Encode', 'release', 'indexOf', 'trim', 'simd'],
    without: "Node's base64 encoder and Buffer#indexOf serve instead, and idle request memory stays resident",
  },
  fingerprint: {
    file: 'optmark_fingerprint.node',
    exports: ['detectCore', 'simd'],
    without: 'the TypeScript fingerprint detector serves instead (same results, several times slower)',
  },
  jpeg: {
    file: 'optmark_jpeg.node',
    exports: ['decodeScaled', 'simd'],
    without:
      "the fingerprint detector decodes JPEGs with sharp alone (same answers, slower; it needs libjpeg's headers, e.g. Debian's libjpeg62-turbo-dev, when built)",
  },
};

// From src/native/ (tests run the sources) and from dist/src/native/ (the build), the repository root is
// two or three levels up.
const ROOTS = ['../../', '../../../'];

let log: NativeLog = (fields, message) => console.warn(`${message} ${JSON.stringify(fields)}`);
const loaded = new Map<AddonName, { addon: unknown; state: AddonState }>();

/** Where load failures are reported (the composition root passes its logger). */
export function setNativeLog(fn: NativeLog): void {
  log = fn;
}

function load(name: AddonName): { addon: unknown; state: AddonState } {
  const known = loaded.get(name);
  if (known) return known;
  const { file, exports, without } = FILES[name];
  const require = createRequire(import.meta.url);
  let error = `native/build/Release/${file} not found`;
  for (const root of ROOTS) {
    const path = fileURLToPath(new URL(`${root}native/build/Release/${file}`, import.meta.url));
    try {
      const addon = require(path) as Record<string, unknown>;
      const missing = exports.filter((e) => typeof addon[e] !== 'function');
      if (missing.length === 0) {
        const result = { addon, state: { loaded: true, simd: (addon.simd as () => string)() } };
        loaded.set(name, result);
        return result;
      }
      error = `${path} does not export ${missing.join(', ')} (built from older sources?)`;
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code !== 'MODULE_NOT_FOUND') error = `${path}: ${e.message}`;
    }
  }
  const result = { addon: undefined, state: { loaded: false, error } };
  loaded.set(name, result);
  log(
    { addon: name, error },
    `native addon ${file} unavailable: ${without}. To build it: npx node-gyp rebuild -C native ` +
      `(needs python3, make and a C++ compiler), or npm install; it must be built for this Node.js (${process.version}).`,
  );
  return result;
}

/** The addon's exports, or undefined when it is not available (the caller falls back). */
export function addon<T>(name: AddonName): T | undefined {
  return load(name).addon as T | undefined;
}

/** Both addons' state on this thread (loading them if not yet loaded), for /readyz and the start-up log. */
export function nativeState(): Record<'bytes' | 'fingerprint', AddonState> {
  return { bytes: load('bytes').state, fingerprint: load('fingerprint').state };
}

/** The byte helpers (native/src/bytes.cc). */
export interface BytesAddon {
  /** Writes the base64 of `src` (with padding) into `dst`; returns the characters written. */
  base64Encode(src: Uint8Array, dst: Uint8Array): number;
  /** Releases the whole pages inside `view` (madvise DONTNEED); returns the bytes released. */
  release(view: Uint8Array): number;
  /** The first index >= `from` (not negative) where `needle` occurs in `haystack`, or -1 (as Buffer#indexOf). */
  indexOf(haystack: Uint8Array, needle: Uint8Array, from: number): number;
  /** Returns free malloc memory of every thread's arena to the OS (glibc malloc_trim). */
  trim(): boolean;
  simd(): string;
}

/** The byte helpers, or undefined when the addon is not built for this Node.js. */
export function bytesAddon(): BytesAddon | undefined {
  return addon<BytesAddon>('bytes');
}

/** The scaled JPEG decode (native/src/jpeg.cc). */
export interface JpegAddon {
  /**
   * The JPEG decoded at 1/`denom` in the DCT domain, cropped to floor(side / denom) as libvips's shrink-on-load
   * gives it, written to the start of `into` (rows of width * channels bytes); or why it declined (ICC
   * profile, not YCbCr or greyscale, not 8-bit, a warning, more than `maxScans` scans, `into` too small, an
   * error), and then sharp decodes it.
   */
  decodeScaled(
    bytes: Uint8Array,
    denom: 2 | 4 | 8,
    maxScans: number,
    into: Uint8Array,
  ): { width: number; height: number; channels: 1 | 3; imageWidth: number; imageHeight: number } | string;
  /** The libjpeg API version it was built against ('libjpeg 62'). */
  simd(): string;
}

/** The scaled JPEG decode, or undefined when it was not built (no libjpeg) or not for this Node.js. */
export function jpegAddon(): JpegAddon | undefined {
  return addon<JpegAddon>('jpeg');
}
