/** Verify-side detection: decode near the work resolution, run the core once, decide with a bounded FPR. */
import { performance } from 'node:perf_hooks';
import { requireFormat } from '../formats/index.js';
import { decodeBase, examinable, probe } from './decode.js';
import { runCore, type Engine, fingerprintEngine } from './native.js';
import { keyTileFor } from './pattern.js';
import { CORE_PARAMS, FPR } from './params.js';
import { cellTest } from './stats.js';

export interface FingerprintResult {
  present: boolean;
  confidence: number;
  blocks: number;
}

export interface FingerprintDetail extends FingerprintResult {
  /** Self-normalised correlation sum over the counted cells (about N(0,1) when unmarked). */
  z: number;
  scale: number;
  dx: number;
  dy: number;
  pValue: number;
  engine: Engine;
  decodeMs: number;
  detectMs: number;
}

function notExamined(engine: Engine, decodeMs: number): FingerprintDetail {
  return { present: false, confidence: 0, blocks: 0, z: 0, scale: 0, dx: 0, dy: 0, pValue: 1, engine, decodeMs, detectMs: 0 };
}

/** Detects the mark in encoded image bytes (JPEG/PNG/WebP). Never throws for undecodable or over-budget input. */
export async function detectFingerprint(
  bytes: Uint8Array,
  secret: Uint8Array,
  opts: { maxPixels: number; engine?: Engine },
): Promise<FingerprintDetail> {
  const engine = opts.engine ?? fingerprintEngine();
  const t0 = performance.now();
  // The decoder gets only what our own parser has bounded: no text chunks, comments or EXIF for
  // libvips to inflate and parse (src/formats decoderInput).
  let clean: Uint8Array;
  try {
    clean = requireFormat(bytes).decoderInput(bytes);
  } catch {
    return notExamined(engine, performance.now() - t0);
  }
  bytes = clean;
  const head = await probe(bytes);
  if (!head || head.width * head.height > opts.maxPixels || !examinable(head.width, head.height)) {
    return notExamined(engine, performance.now() - t0);
  }
  let base;
  try {
    base = await decodeBase(bytes, head.width, head.height);
  } catch {
    return notExamined(engine, performance.now() - t0);
  }
  const t1 = performance.now();
  const key = keyTileFor(secret);
  const { out, engine: used } = runCore(
    { pixels: base.pixels, width: base.width, height: base.height, channels: base.channels, sync: key.sync, count: key.count, params: CORE_PARAMS },
    engine,
  );
  const test = cellTest(out.cells);
  const t2 = performance.now();
  return {
    present: test.pValue <= FPR,
    confidence: test.n > 0 ? test.k / test.n : 0,
    blocks: test.n,
    z: test.t,
    scale: out.scale,
    dx: out.dx,
    dy: out.dy,
    pValue: test.pValue,
    engine: used,
    decodeMs: t1 - t0,
    detectMs: t2 - t1,
  };
}
