/**
 * The layer path (CLI `mark`, later the dashboard): the opt-out field plus the optional layers, raw
 * bytes back. Order matters: the fingerprint goes first because it re-encodes the pixels; the opt-out
 * field and the provenance tag go last, so the signed digest covers the final pixels and metadata.
 */
import { embedFingerprint } from '../fingerprint/index.js';
import { requireFormat } from '../formats/index.js';
import { checkCompressedText } from '../formats/png.js';
import { protect } from '../marking/engine.js';
import { protectSigned, type SigningKey } from '../provenance/index.js';

/** Names of the optional layers, as MarkResult.layers lists them. */
export const LAYER_FINGERPRINT = 'fingerprint';
export const LAYER_PROVENANCE = 'provenance';

/** What the layer path needs from its worker: the pixel budget and lazily loaded secrets. */
export interface MarkContext {
  readonly maxPixels: number;
  signingKey(): Promise<SigningKey>;
  fingerprintSecret(): Promise<Uint8Array>;
}

/** The optional layers to apply besides the opt-out field. */
export interface MarkOptions {
  provenance: boolean;
  fingerprint: boolean;
}

/** A marked file. */
export interface Marked {
  bytes: Uint8Array;
  mimeType: string;
  extension: string;
  /** The layers applied (LAYER_FINGERPRINT, LAYER_PROVENANCE). */
  layers: string[];
}

/** Applies the opt-out field and the requested layers; throws typed errors (unsupported, damaged, limits). */
export async function runMark(image: Uint8Array, options: MarkOptions, ctx: MarkContext): Promise<Marked> {
  // The container must be editable before any pixel work: a file protect refuses is refused here too,
  // whatever the decoder would make of it.
  requireFormat(image).readXmp(image);
  let bytes = image;
  const layers: string[] = [];
  if (options.fingerprint) {
    // The embed hands the whole file, metadata kept, to the decoder: its compressed text is bounded first.
    if (requireFormat(bytes).name === 'png') checkCompressedText(bytes);
    bytes = await embedFingerprint(bytes, await ctx.fingerprintSecret(), { maxPixels: ctx.maxPixels });
    layers.push(LAYER_FINGERPRINT);
  }
  const result = options.provenance ? await protectSigned(bytes, await ctx.signingKey()) : protect(bytes);
  if (options.provenance) layers.push(LAYER_PROVENANCE);
  return { bytes: result.bytes, mimeType: result.mimeType, extension: result.extension, layers };
}
