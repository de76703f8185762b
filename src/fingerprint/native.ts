/**
 * The fingerprint detector's core on the native addon (loaded by src/native/, which reports a failed
 * load once), or on the TypeScript reference when the addon is missing: the same answers, slower.
 */
import { addon } from '../native/index.js';
import { detectCore as referenceCore } from './v1/core.js';
import type { CoreInput, CoreOutput } from './v1/types.js';
import { detectCore2 as referenceCore2 } from './v2/core.js';
import type { Core2Input, Core2Output } from './v2/types.js';

export type Engine = 'native' | 'reference';

interface NativeAddon {
  detectCore(input: CoreInput): CoreOutput;
  /** Version 2 (absent from addons built before it). */
  detectCore2?(input: Core2Input): Core2Output;
  simd(): string;
}

const native = (): NativeAddon | undefined => addon<NativeAddon>('fingerprint');

/** Which engine detectFingerprint uses by default on this thread. */
export function fingerprintEngine(): Engine {
  return native() ? 'native' : 'reference';
}

/** Runs the detection core on the requested engine, falling back to the reference when native is unavailable. */
export function runCore(input: CoreInput, engine: Engine = fingerprintEngine()): { out: CoreOutput; engine: Engine } {
  const a = engine === 'native' ? native() : undefined;
  if (a) return { out: a.detectCore(input), engine: 'native' };
  return { out: referenceCore(input), engine: 'reference' };
}

/** The native SIMD path in use ('avx512f', 'avx2', 'portable'), or undefined without the addon. */
export function nativeSimd(): string | undefined {
  return native()?.simd();
}

/** Runs the version-2 core on the requested engine (the reference when the addon lacks it). */
export function runCore2(input: Core2Input, engine: Engine = fingerprintEngine()): { out: Core2Output; engine: Engine } {
  const a = engine === 'native' ? native() : undefined;
  if (a?.detectCore2) return { out: a.detectCore2(input), engine: 'native' };
  return { out: referenceCore2(input), engine: 'reference' };
}
