/**
 * Verify-side detection: decode near the work resolution once, run the version-2 core (geometry of its
 * own) and, when it finds nothing, the version-1 core on the same pixels; each scheme decides at
 * FPR / 2, so testing both keeps the false-positive bound at FPR (union bound).
 */
import { performance } from 'node:perf_hooks';
import { parseImage, type ParsedImage } from '../formats/index.js';
import { jpeg, jpegFrameSize } from '../formats/jpeg.js';
import type { Warning } from '../formats/complete.js';
import { DECODE_TIMEOUT_SECONDS, decodeBase, examinable, isDecodeTimeout, probe } from './decode.js';
import { runCore, runCore2, type Engine, fingerprintEngine } from './native.js';
import { FPR_PER_SCHEME, WORK_SHORT_SIDE } from './params.js';
import { cellTest } from './stats.js';
import { keyTileFor } from './v1/key.js';
import { CORE_PARAMS } from './v1/params.js';
import type { CoreInput } from './v1/types.js';
import { decideV2 } from './v2/decide.js';
import { keyTileV2For } from './v2/key.js';
import { CORE2_PARAMS } from './v2/params.js';
import type { Core2Input } from './v2/types.js';

export { decideV2 };

export interface FingerprintResult {
  present: boolean;
  confidence: number;
  blocks: number;
  /** Why the detector did not look where it should have (blocks 0): FINGERPRINT_UNDECODABLE or FINGERPRINT_TIMEOUT. */
  warning?: Warning;
}

/** Warning codes of a picture the detector should have examined and could not (never a verdict). */
export const FINGERPRINT_UNDECODABLE = 'fingerprint_undecodable';
export const FINGERPRINT_TIMEOUT = 'fingerprint_timeout';

export interface FingerprintDetail extends FingerprintResult {
  /** Which scheme's test is reported: 2 (geometry-robust, new marks), 1 (first version), 0 not examined. */
  scheme: 0 | 1 | 2;
  /** Self-normalised correlation sum over the counted cells (about N(0,1) when unmarked). */
  z: number;
  /** Version 2: sync z of the chosen alignment and its lattice (base pixels per period); version 1: scale. */
  syncZ: number;
  lattice: number[];
  dihedral: number;
  scale: number;
  dx: number;
  dy: number;
  pValue: number;
  engine: Engine;
  decodeMs: number;
  detectMs: number;
}

function notExamined(engine: Engine, decodeMs: number, warning?: Warning): FingerprintDetail {
  return {
    ...(warning ? { warning } : {}),
    present: false,
    confidence: 0,
    blocks: 0,
    scheme: 0,
    z: 0,
    syncZ: 0,
    lattice: [],
    dihedral: 0,
    scale: 0,
    dx: 0,
    dy: 0,
    pValue: 1,
    engine,
    decodeMs,
    detectMs: 0,
  };
}

/**
 * 1 when the base is a JPEG at its own size: its 8 x 8 block grid then sits at 8 base pixels and the
 * lattice search notches it out of the spectrum. Other inputs keep every frequency (a notch there would
 * only hide template peaks, e.g. at the period of a PNG crop of a twice-larger picture: docs/fingerprint.md).
 */
export function jpegGridAtOwnSize(head: { width: number; height: number; format: string }): 0 | 1 {
  return head.format === 'jpeg' && Math.min(head.width, head.height) === WORK_SHORT_SIDE ? 1 : 0;
}

let plane = new Float32Array(0);

/**
 * The plane version 2's prefiltered picture is written to, kept per thread (each worker has its own module
 * state) and grown when needed: a fresh one per request cost its allocation, zeroing and page faults. Both
 * cores write or read it within one synchronous call.
 */
function prefilteredPlane(n: number): Float32Array {
  if (plane.length < n) plane = new Float32Array(n);
  return plane.subarray(0, n);
}

/**
 * The two cores' inputs for decoded base pixels (`head` is the input's probe): version 2 writes its prefiltered
 * picture to `prefiltered` and version 1 reads it there (both versions prefilter the luma the same way).
 */
export function coreInputs(
  base: { pixels: Uint8Array; width: number; height: number; channels: number },
  head: { width: number; height: number; format: string },
  secret: Uint8Array,
  prefiltered: Float32Array,
): { v2: Core2Input; v1: CoreInput } {
  const k2 = keyTileV2For(secret);
  const k1 = keyTileFor(secret);
  return {
    v2: {
      ...base,
      workShort: WORK_SHORT_SIDE,
      native: jpegGridAtOwnSize(head),
      a: k2.a,
      harmonics: k2.harmonics,
      b: k2.b,
      c: k2.c,
      params: CORE2_PARAMS,
      keepPrefiltered: prefiltered,
    },
    v1: { ...base, sync: k1.sync, count: k1.count, params: CORE_PARAMS, prefiltered },
  };
}

/**
 * Runs both schemes' cores on decoded base pixels (exported for benchmarks that decode once); `head` is the
 * input's probe. Undefined when version 2 found nothing and `deadline` (performance.now() time) has passed
 * before version 1's core would start: the detector did not finish looking.
 */
export function detectOnBase(
  base: { pixels: Uint8Array; width: number; height: number; channels: number },
  head: { width: number; height: number; format: string },
  secret: Uint8Array,
  engine: Engine,
  deadline = Infinity,
): Omit<FingerprintDetail, 'decodeMs' | 'detectMs'> | undefined {
  const inputs = coreInputs(base, head, secret, prefilteredPlane(base.width * base.height));
  const r2 = runCore2(inputs.v2, engine);
  const t2 = decideV2(r2.out);
  const v2 = {
    present: t2.present,
    confidence: t2.n > 0 ? t2.k / t2.n : 0,
    blocks: t2.n,
    scheme: 2 as const,
    z: t2.t,
    syncZ: r2.out.syncZ,
    lattice: Array.from(r2.out.lattice),
    dihedral: r2.out.dihedral,
    scale: 0,
    dx: r2.out.dx,
    dy: r2.out.dy,
    pValue: t2.pValue,
    engine: r2.engine,
  };
  if (v2.present) return v2;
  if (performance.now() > deadline) return undefined;
  const r1 = runCore(inputs.v1, engine);
  const t1 = cellTest(r1.out.cells);
  if (t1.pValue > FPR_PER_SCHEME) return v2;
  return {
    present: true,
    confidence: t1.n > 0 ? t1.k / t1.n : 0,
    blocks: t1.n,
    scheme: 1,
    z: t1.t,
    syncZ: r1.out.syncZ,
    lattice: [],
    dihedral: 0,
    scale: r1.out.scale,
    dx: r1.out.dx,
    dy: r1.out.dy,
    pValue: t1.pValue,
    engine: r1.engine,
  };
}

/**
 * Detects the mark in encoded image bytes (JPEG/PNG/WebP). Never throws for undecodable, over-budget or
 * slow input: it is then not examined (blocks 0), and where the detector should have looked and could not
 * (pixels that do not decode, the time limit passed) the result carries a warning that says why.
 * `timeoutMs` (default DECODE_TIMEOUT_SECONDS) bounds the decode, and the cores are not started past it.
 */
export async function detectFingerprint(
  input: Uint8Array | ParsedImage,
  secret: Uint8Array,
  opts: { maxPixels: number; engine?: Engine; timeoutMs?: number },
): Promise<FingerprintDetail> {
  const engine = opts.engine ?? fingerprintEngine();
  const t0 = performance.now();
  const timeoutMs = opts.timeoutMs ?? DECODE_TIMEOUT_SECONDS * 1000;
  const timedOut = (): FingerprintDetail =>
    notExamined(engine, performance.now() - t0, {
      code: FINGERPRINT_TIMEOUT,
      message: `The fingerprint detector ran past its time limit (${timeoutMs} ms) and was stopped; the fingerprint was not examined.`,
    });
  const undecodable = (): FingerprintDetail =>
    notExamined(engine, performance.now() - t0, {
      code: FINGERPRINT_UNDECODABLE,
      message: "The image's pixels could not be decoded; the fingerprint was not examined.",
    });
  // The decoder gets only what our own parser has bounded: no text chunks, comments or EXIF for
  // libvips to inflate and parse (src/formats decoderInput).
  let frame: { width: number; height: number } | undefined;
  let bytes: Uint8Array;
  try {
    const image = input instanceof Uint8Array ? parseImage(input) : input;
    bytes = image.decoderInput();
    // A JPEG's size is in its frame header, which our own parser walked to: no decoder header read for it.
    frame = image.format === jpeg ? jpegFrameSize(image) : undefined;
  } catch {
    return notExamined(engine, performance.now() - t0);
  }
  const head = frame ? { ...frame, format: 'jpeg', pages: 1 } : await probe(bytes);
  if (!head) return undecodable();
  if (head.width * head.height > opts.maxPixels || !examinable(head.width, head.height)) return notExamined(engine, performance.now() - t0);
  let base;
  try {
    // libvips counts its time limit in whole seconds (at least 1); the deadline below holds the rest.
    base = await decodeBase(bytes, head.width, head.height, Math.max(1, Math.ceil(timeoutMs / 1000)));
  } catch (err) {
    // A decode stopped at its time limit (a busy machine, or a file built to be slow) says nothing of the
    // file; pixels that cannot be decoded are the file's. Either way the detector did not look.
    return isDecodeTimeout(err) ? timedOut() : undecodable();
  }
  const t1 = performance.now();
  if (t1 - t0 > timeoutMs) return timedOut();
  const r = detectOnBase(base, head, secret, engine, t0 + timeoutMs);
  if (!r) return timedOut();
  const t2 = performance.now();
  return { ...r, decodeMs: t1 - t0, detectMs: t2 - t1 };
}
