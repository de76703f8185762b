/**
 * Marking, as every front end runs it (the API's protect, the dashboard, `optmark mark`): the opt-out
 * field plus the optional layers, with the file's Content Credentials handled as OPTMARK_C2PA says.
 * Order matters: the fingerprint goes first because it re-encodes the pixels; then the XMP fields (the
 * opt-out field, TDMRep) and the provenance tag, so the signed digest covers the final pixels and
 * metadata; a new C2PA manifest last, its hard binding over everything else (src/signals/layers.ts).
 *
 * The input is the bytes, or their structure (src/formats) when the caller walked them already: a
 * file-backed source (batch marking) reads only the metadata and copies the image data file to file.
 * The opt-out field alone then needs nothing else; the layers and an update manifest need every byte.
 * The layers' code (fingerprint, provenance) and the C2PA signer are loaded only when a file needs them.
 */
import type { CredentialsOutcome } from '../c2pa/modes.js';
import { assemble, sameBytes } from '../formats/bytes.js';
import type { Warning } from '../formats/complete.js';
import { parseImage, type ParsedImage } from '../formats/index.js';
import { checkCompressedText } from '../formats/png.js';
import { protect, type ProtectOptions, type ProtectResult } from '../marking/engine.js';
import type { SigningKey } from '../provenance/index.js';
import { addContentCredentials, LAYER_CONTENT_CREDENTIALS, LAYER_TDMREP, type SignalLayers, tdmrepEdit } from '../signals/layers.js';
import { DEFAULT_TOKEN } from '../xmp/index.js';
import type { CredentialsPolicy } from './credentials.js';

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

/** The opt-out field alone (protect). */
export const NO_LAYERS: MarkOptions = Object.freeze({ provenance: false, fingerprint: false });

/** A marked file, as a worker answers it. */
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

/** A marked file with what protect's answer and a batch report say of it. */
export interface MarkedFile extends Marked {
  /** The produced file in order: views of the input (or its structure's bytes) and new bytes; `bytes` joins them. */
  pieces: Uint8Array[];
  /** False when the file comes back as it came (already marked exactly this way, no layer). */
  changed: boolean;
  signals: string[];
  /** Everything protect's answer warns of: the input's image data (a cut file), then its credentials. */
  answerWarnings: Warning[];
}

/**
 * Applies the opt-out field and the requested layers; throws typed errors (unsupported, damaged,
 * limits). With a credentials `policy` (OPTMARK_C2PA), a file carrying Content Credentials is refused
 * before any work (`refuse`), gets an update manifest over the marked file (`update`), or goes out with
 * a warning (`invalidate`), as src/pipeline/credentials.ts says; without one, as `invalidate` without
 * the warning. The Content Credentials layer gives a file without a store a new manifest signed with
 * the policy's identity. `ctx` is asked only for a layer; `limits` bounds the output (the server's
 * upload limit).
 */
export async function runMark(
  input: Uint8Array | ParsedImage,
  options: MarkOptions,
  ctx: MarkContext | undefined,
  policy?: CredentialsPolicy,
  limits: Pick<ProtectOptions, 'maxOutputBytes'> = {},
): Promise<MarkedFile> {
  const image = input instanceof Uint8Array ? parseImage(input) : input;
  const store = policy !== undefined && image.manifestStore !== undefined;
  if (!options.fingerprint && !options.provenance && !options.signals) {
    if (!store) return fromProtect(protect(image, limits), policy ? 'none' : undefined, []);
    // Loaded only now: the signer and its certificate library serve files with credentials alone.
    const { protectWithCredentials } = await import('./credentials.js');
    const r = await protectWithCredentials(image, limits, policy);
    const credentialsWarnings = r.outcome === 'none' || r.outcome === 'unchanged' ? [] : r.warnings.slice(-1);
    const fields = {
      mimeType: r.mimeType,
      extension: r.extension,
      layers: [],
      changed: r.outcome !== 'unchanged',
      signals: r.signals,
      answerWarnings: r.warnings,
    };
    return markedFile({ ...fields, credentials: r.outcome, warnings: credentialsWarnings }, r.pieces);
  }
  // The container must be editable before any pixel work: a file protect refuses is refused here too,
  // whatever the decoder would make of it.
  void image.xmp;
  const whole = image.bytes;
  if (options.signals?.contentCredentials && !policy) throw new Error('the Content Credentials layer needs a credentials policy (its signing identity)');
  // A file that would come back as it came (no pixel or signed layer, the fields already there) keeps its credentials.
  const edit = tdmrepEdit(options.signals);
  if (store && policy.mode === 'refuse' && (options.fingerprint || options.provenance || protect(image, { edit }).changed)) {
    throw (await import('./credentials.js')).credentialsRefused();
  }
  const marked = await markLayers(image, options, ctx!);
  if (!policy) return marked;
  if (!store && options.signals?.contentCredentials) {
    const bytes = await addContentCredentials({
      format: image.format.name,
      original: whole,
      marked: marked.bytes,
      token: DEFAULT_TOKEN,
      edit: options.fingerprint ? 'pixels' : 'metadata',
      provenance: options.provenance,
      layers: options.signals,
      identity: await policy.identity(),
    });
    return withFields(marked, { pieces: [bytes], layers: [...marked.layers, LAYER_CONTENT_CREDENTIALS], changed: true, credentials: 'none', warnings: [] });
  }
  if (!store) return withFields(marked, { credentials: 'none', warnings: [] });
  if (sameBytes(marked.bytes, whole)) return withFields(marked, { changed: false, credentials: 'unchanged', warnings: [] });
  const { keepCredentials } = await import('./credentials.js');
  const kept = await keepCredentials({
    format: image.format.name,
    original: whole,
    originalImage: image,
    marked: () => marked.bytes,
    token: DEFAULT_TOKEN,
    edit: options.fingerprint ? 'pixels' : 'metadata',
    policy,
    maxOutputBytes: limits.maxOutputBytes,
  });
  return withFields(marked, {
    pieces: kept.bytes ? [kept.bytes] : marked.pieces,
    credentials: kept.outcome,
    warnings: [kept.warning],
    answerWarnings: [...marked.answerWarnings, kept.warning],
  });
}

/**
 * A MarkedFile over `pieces`, whose `bytes` joins them on first use (most callers write the pieces and
 * never ask). Built here, never spread: a spread would read `bytes`, joining every file.
 */
function markedFile(fields: Omit<MarkedFile, 'pieces' | 'bytes'>, pieces: Uint8Array[]): MarkedFile {
  let joined: Uint8Array | undefined = pieces.length === 1 ? pieces[0] : undefined;
  return Object.defineProperty({ ...fields, pieces }, 'bytes', { get: () => (joined ??= assemble(pieces)), enumerable: true }) as MarkedFile;
}

/** `marked` with some fields changed (its pieces unless given), without joining its pieces. */
function withFields(marked: MarkedFile, { pieces, ...fields }: Partial<Omit<MarkedFile, 'bytes'>>): MarkedFile {
  const { mimeType, extension, layers, changed, signals, answerWarnings, credentials, warnings } = marked;
  const kept = { mimeType, extension, layers, changed, signals, answerWarnings, ...(credentials ? { credentials } : {}), ...(warnings ? { warnings } : {}) };
  return markedFile({ ...kept, ...fields }, pieces ?? marked.pieces);
}

function fromProtect(r: ProtectResult, credentials: CredentialsOutcome | undefined, layers: string[]): MarkedFile {
  const fields = { mimeType: r.mimeType, extension: r.extension, layers, changed: r.changed, signals: r.signals, answerWarnings: r.warnings };
  return markedFile(credentials ? { ...fields, credentials, warnings: [] } : fields, r.pieces);
}

async function markLayers(image: ParsedImage, options: MarkOptions, ctx: MarkContext): Promise<MarkedFile> {
  let bytes = image.bytes;
  const layers: string[] = [];
  if (options.fingerprint) {
    // The embed hands the whole file, metadata kept, to the decoder: its compressed text is bounded first.
    if (image.format.name === 'png') checkCompressedText(bytes);
    const { embedFingerprint } = await import('../fingerprint/index.js');
    bytes = await embedFingerprint(bytes, await ctx.fingerprintSecret(), { maxPixels: ctx.maxPixels });
    layers.push(LAYER_FINGERPRINT);
  }
  const edit = tdmrepEdit(options.signals);
  if (edit) layers.push(LAYER_TDMREP);
  let result: ProtectResult;
  if (options.provenance) {
    // protectSigned writes its tag in a pass of its own: the TDMRep fields go in first, and its merge
    // keeps them (one more XMP rewrite, only with both layers).
    if (edit) bytes = protect(bytes === image.bytes ? image : bytes, { edit }).bytes;
    const { protectSigned } = await import('../provenance/index.js');
    result = await protectSigned(bytes === image.bytes ? image : bytes, await ctx.signingKey());
    layers.push(LAYER_PROVENANCE);
  } else result = protect(bytes === image.bytes ? image : bytes, { edit });
  // A re-encoded file is new: no more the input it was (changed), whatever protect says of its pixels.
  return withFields(fromProtect(result, undefined, layers), { changed: options.fingerprint || result.changed });
}
