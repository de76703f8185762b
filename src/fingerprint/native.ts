/**
 * The one loader of the native addon (native/build/Release/optmark_fingerprint.node). When it is
 * missing or fails to load, the TypeScript reference serves instead and one warning says how to fix it.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { CoreInput, CoreOutput } from './core-types.js';
import { detectCore as referenceCore } from './reference.js';
import { detectCore2 as referenceCore2, type Core2Input, type Core2Output } from './reference-v2.js';

export type Engine = 'native' | 'reference';

interface NativeAddon {
  detectCore(input: CoreInput): CoreOutput;
  /** Version 2 (absent from addons built before it). */
  detectCore2?(input: Core2Input): Core2Output;
  simd(): string;
}

/** Where to warn; defaults to console.warn, the composition root may inject its logger. */
let warn: (message: string) => void = (m) => console.warn(m);
let loaded: { addon: NativeAddon | undefined; error: string | undefined } | undefined;

export function setFingerprintWarn(fn: (message: string) => void): void {
  warn = fn;
}

const ADDON_PATHS = ['../../native/build/Release/optmark_fingerprint.node', '../../../native/build/Release/optmark_fingerprint.node'];

function load(): { addon: NativeAddon | undefined; error: string | undefined } {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  let error = 'not found';
  for (const rel of ADDON_PATHS) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    try {
      const addon = require(path) as NativeAddon;
      if (typeof addon.detectCore === 'function') {
        loaded = { addon, error: undefined };
        return loaded;
      }
      error = `${path} does not export detectCore`;
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code !== 'MODULE_NOT_FOUND') error = `${path}: ${e.message}`;
    }
  }
  loaded = { addon: undefined, error };
  {
    warn(
      `optmark: native fingerprint addon unavailable (${error}); using the TypeScript implementation (same results, several times slower).\n` +
        'Possible solutions:\n' +
        '- Build it: npx node-gyp rebuild -C native (needs python3, make and a C++ compiler)\n' +
        '- Reinstall so the install script builds it: npm install\n' +
        '- Check that native/build/Release/optmark_fingerprint.node matches this Node.js version (' + process.version + ')',
    );
  }
  return loaded;
}

/** Which engine detectFingerprint uses by default on this thread. */
export function fingerprintEngine(): Engine {
  return load().addon ? 'native' : 'reference';
}

/** Runs the detection core on the requested engine, falling back to the reference when native is unavailable. */
export function runCore(input: CoreInput, engine: Engine = fingerprintEngine()): { out: CoreOutput; engine: Engine } {
  if (engine === 'native') {
    const addon = load().addon;
    if (addon) return { out: addon.detectCore(input), engine: 'native' };
  }
  return { out: referenceCore(input), engine: 'reference' };
}

/** The native SIMD path in use ('avx2', 'portable'), or undefined without the addon. */
export function nativeSimd(): string | undefined {
  return load().addon?.simd();
}

/** Runs the version-2 core on the requested engine (the reference when the addon lacks it). */
export function runCore2(input: Core2Input, engine: Engine = fingerprintEngine()): { out: Core2Output; engine: Engine } {
  if (engine === 'native') {
    const addon = load().addon;
    if (addon?.detectCore2) return { out: addon.detectCore2(input), engine: 'native' };
  }
  return { out: referenceCore2(input), engine: 'reference' };
}
