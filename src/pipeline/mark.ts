/**
 * The layer path (CLI `mark`, later the dashboard): the opt-out field plus the optional layers, raw
 * bytes back. Order matters: the fingerprint goes first because it re-encodes the pixels; the opt-out
 * field and the provenance tag go last, so the signed digest covers the final pixels and metadata.
 */
import { embedFingerprint } from '../fingerprint/index.js';
import { requireFormat } from '../formats/index.js';
import { protect } from '../marking/engine.js';
import { protectSigned, type SigningKey } from '../provenance/index.js';
import type { MarkResult, MarkTask } from './tasks.js';

/** Names of the optional layers, as MarkResult.layers lists them. */
export const LAYER_FINGERPRINT = 'fingerprint';
export const LAYER_PROVENANCE = 'provenance';

/** What the layer path needs from its worker: the pixel budget and lazily loaded secrets. */
export interface MarkContext {
  readonly maxPixels: number;
  signingKey(): Promise<SigningKey>;
  fingerprintSecret(): Promise<Uint8Array>;
}

/** Applies the opt-out field and the requested layers; throws typed errors (unsupported, damaged, limits). */
export async function runMark(task: MarkTask, ctx: MarkContext): Promise<MarkResult> {
  // The container must be editable before any pixel work: a file protect refuses is refused here too,
  // whatever the decoder would make of it.
  requireFormat(task.input).readXmp(task.input);
  let bytes = task.input;
  const layers: string[] = [];
  if (task.fingerprint) {
    bytes = await embedFingerprint(bytes, await ctx.fingerprintSecret(), { maxPixels: ctx.maxPixels });
    layers.push(LAYER_FINGERPRINT);
  }
  const result = task.provenance ? await protectSigned(bytes, await ctx.signingKey()) : protect(bytes);
  if (task.provenance) layers.push(LAYER_PROVENANCE);
  return { ok: true, kind: 'marked', bytes: result.bytes, mimeType: result.mimeType, extension: result.extension, layers };
}
