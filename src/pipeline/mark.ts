/**
 * The layer path (CLI `mark`, later the dashboard): the opt-out field plus the optional layers, raw
 * bytes back. Order matters: the fingerprint goes first because it re-encodes the pixels; then the XMP
 * fields (the opt-out field, TDMRep) and the provenance tag, so the signed digest covers the final pixels
 * and metadata; a new C2PA manifest last, its hard binding over everything else (src/signals/layers.ts).
 */
import { hasManifestStore } from '../c2pa/detect.js';
import type { CredentialsOutcome } from '../c2pa/modes.js';
import { embedFingerprint } from '../fingerprint/index.js';
import type { Warning } from '../formats/complete.js';
import { requireFormat } from '../formats/index.js';
import { checkCompressedText } from '../formats/png.js';
import { sameBytes } from '../formats/bytes.js';
import { protect } from '../marking/engine.js';
import { protectSigned, type SigningKey } from '../provenance/index.js';
import { addContentCredentials, LAYER_CONTENT_CREDENTIALS, LAYER_TDMREP, type SignalLayers, tdmrepEdit } from '../signals/layers.js';
import { DEFAULT_TOKEN } from '../xmp/index.js';
import { type CredentialsPolicy, credentialsRefused, keepCredentials } from './credentials.js';

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
  /** TDMRep and Content Credentials (src/signals/layers.ts); the latter needs a credentials policy. */
  signals?: SignalLayers | undefined;
}

/** A marked file. */
export interface Marked {
  bytes: Uint8Array;
  mimeType: string;
  extension: string;
  /** The layers applied (LAYER_FINGERPRINT, LAYER_TDMREP, LAYER_PROVENANCE, LAYER_CONTENT_CREDENTIALS). */
  layers: string[];
  /** What happened to the input's Content Credentials (only when a policy was given). */
  credentials?: CredentialsOutcome;
  /** The credentials' warning, when the input had any (only when a policy was given). */
  warnings?: Warning[];
}

/**
 * Applies the opt-out field and the requested layers; throws typed errors (unsupported, damaged,
 * limits). With a credentials `policy` (OPTMARK_C2PA), a file carrying Content Credentials is refused
 * before any work (`refuse`), gets an update manifest over the marked file (`update`), or goes out with
 * a warning (`invalidate`), as protect does (src/pipeline/credentials.ts); without one, as `invalidate`
 * without the warning. The Content Credentials layer gives a file without a store a new manifest signed
 * with the policy's identity.
 */
export async function runMark(image: Uint8Array, options: MarkOptions, ctx: MarkContext, policy?: CredentialsPolicy): Promise<Marked> {
  // The container must be editable before any pixel work: a file protect refuses is refused here too,
  // whatever the decoder would make of it.
  const format = requireFormat(image);
  format.readXmp(image);
  if (options.signals?.contentCredentials && !policy) throw new Error('the Content Credentials layer needs a credentials policy (its signing identity)');
  const store = policy !== undefined && hasManifestStore(format.name, image);
  // A file that would come back as it came (no layer, the fields already there) keeps its credentials.
  const edit = tdmrepEdit(options.signals);
  if (store && policy.mode === 'refuse' && (options.fingerprint || options.provenance || protect(image, { edit }).changed)) throw credentialsRefused();
  const marked = await markLayers(image, options, ctx);
  if (!policy) return marked;
  if (!store && options.signals?.contentCredentials) {
    const bytes = await addContentCredentials({
      format: format.name,
      original: image,
      marked: marked.bytes,
      token: DEFAULT_TOKEN,
      edit: options.fingerprint ? 'pixels' : 'metadata',
      provenance: options.provenance,
      layers: options.signals,
      identity: await policy.identity(),
    });
    return { ...marked, bytes, layers: [...marked.layers, LAYER_CONTENT_CREDENTIALS], credentials: 'none', warnings: [] };
  }
  if (!store) return { ...marked, credentials: 'none', warnings: [] };
  if (sameBytes(marked.bytes, image)) return { ...marked, credentials: 'unchanged', warnings: [] };
  const kept = await keepCredentials({
    format: format.name,
    original: image,
    marked: () => marked.bytes,
    token: DEFAULT_TOKEN,
    edit: options.fingerprint ? 'pixels' : 'metadata',
    policy,
  });
  return { ...marked, bytes: kept.bytes ?? marked.bytes, credentials: kept.outcome, warnings: [kept.warning] };
}

async function markLayers(image: Uint8Array, options: MarkOptions, ctx: MarkContext): Promise<Marked> {
  let bytes = image;
  const layers: string[] = [];
  if (options.fingerprint) {
    // The embed hands the whole file, metadata kept, to the decoder: its compressed text is bounded first.
    if (requireFormat(bytes).name === 'png') checkCompressedText(bytes);
    bytes = await embedFingerprint(bytes, await ctx.fingerprintSecret(), { maxPixels: ctx.maxPixels });
    layers.push(LAYER_FINGERPRINT);
  }
  const edit = tdmrepEdit(options.signals);
  if (edit) layers.push(LAYER_TDMREP);
  let result;
  if (options.provenance) {
    // protectSigned writes its tag in a pass of its own: the TDMRep fields go in first, and its merge
    // keeps them (one more XMP rewrite, only with both layers).
    if (edit) bytes = protect(bytes, { edit }).bytes;
    result = await protectSigned(bytes, await ctx.signingKey());
    layers.push(LAYER_PROVENANCE);
  } else result = protect(bytes, { edit });
  return { bytes: result.bytes, mimeType: result.mimeType, extension: result.extension, layers };
}
