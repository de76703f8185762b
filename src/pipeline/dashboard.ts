/**
 * The dashboard's mark: one uploaded image through the layer path (the same runMark as `optmark mark`),
 * with what verify reports about it before and after, as one JSON body built in the worker:
 * `{imageBase64, mimeType, filename, sha256, signals, layers, bytes, originalName, record, before, after,
 * credentials, warnings}`. The base64 is written straight into the body, as protect's is. Content
 * Credentials follow OPTMARK_C2PA as protect's do (`credentials` is the Optmark-Content-Credentials value).
 */
import { CREDENTIALS_HEADER } from '../c2pa/modes.js';
import { checkWithinUploadLimit } from '../marking/engine.js';
import { base64Into, base64Length } from './base64.js';
import type { CredentialsPolicy } from './credentials.js';
import type { LiveLayers } from './layers-live.js';
import { LAYER_PROVENANCE, runMark, type MarkOptions } from './mark.js';
import type { SignalLayers } from '../signals/layers.js';
import { safeBasename, parseUpload } from './upload.js';
import { verifyReport } from './verify.js';

// biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/g;

/** Longest original file name kept in a record (code points). */
const MAX_ORIGINAL_NAME = 255;

/** The batch's layers, the form's Content-Type, and the ids the record will carry. */
export interface DashboardMarkOptions extends Omit<MarkOptions, 'signals'> {
  /** The signal layers (their settings come from the worker's configuration: SignalSettings). */
  tdmrep: boolean;
  contentCredentials: boolean;
  contentType: string;
  batchId: string;
  recordId: string;
  /** Hand the original and the marked file back too, for the Private Vault (`?vault=keep`). */
  keep?: boolean;
}

/** The signal layers' settings, from the configuration (OPTMARK_TDM_POLICY, OPTMARK_C2PA_TRAINING_MINING). */
export type SignalSettings = Pick<SignalLayers, 'tdmPolicy' | 'training'>;

/** What the event-loop thread needs to record a dashboard mark (the answer carries the same). */
export interface MarkedImage {
  sha256: string;
  filename: string;
  mimeType: string;
  bytes: number;
  layers: string[];
  originalName: string;
  provenanceKeyId: string | null;
  markedAt: string;
  /** With `keep`: the upload's image as sent (a copy; marking keeps the format, so the marked file's type) and the marked file. */
  kept?: { original: Uint8Array; originalMime: string; marked: Uint8Array };
}

/** Runs a dashboard mark over the multipart body in `body` (a view of request memory); the answer's body and its record. */
export async function runDashboardMark(
  body: Uint8Array,
  task: DashboardMarkOptions,
  layers: LiveLayers,
  maxUploadBytes: number,
  policy: CredentialsPolicy,
  settings: SignalSettings,
): Promise<{ body: Uint8Array; mark: MarkedImage; headers: Record<string, string> }> {
  const upload = await parseUpload(body, task.contentType, maxUploadBytes);
  const input = upload.bytes;
  const { tdmrep, contentCredentials } = task;
  const signals: SignalLayers | undefined = tdmrep || contentCredentials ? { tdmrep, contentCredentials, ...settings } : undefined;
  // Marked first: a refusal (OPTMARK_C2PA=refuse, limits) costs no verify.
  const marked = await runMark(input, { provenance: task.provenance, fingerprint: task.fingerprint, signals }, layers, policy);
  // Never a file optmark would refuse as an upload (the fingerprint's re-encode and an update manifest grow it).
  checkWithinUploadLimit(marked.bytes.length, maxUploadBytes);
  const before = await verifyReport(input, layers);
  const after = await verifyReport(marked.bytes, layers);
  const credentials = marked.credentials ?? 'none';
  const originalName = originalNameOf(upload.filename);
  const mark: MarkedImage = {
    sha256: after.sha256,
    filename: `${safeBasename(upload.filename)}.${marked.extension}`,
    mimeType: marked.mimeType,
    bytes: marked.bytes.length,
    layers: marked.layers,
    originalName,
    provenanceKeyId: marked.layers.includes(LAYER_PROVENANCE) ? (await layers.signingKey()).keyId : null,
    markedAt: new Date().toISOString(),
    ...(task.keep ? { kept: { original: input.slice(), originalMime: marked.mimeType, marked: marked.bytes } } : {}),
  };
  const fields = {
    mimeType: mark.mimeType,
    filename: mark.filename,
    sha256: mark.sha256,
    signals: after.signals,
    layers: mark.layers,
    bytes: mark.bytes,
    originalName,
    record: { id: task.recordId, batchId: task.batchId, markedAt: mark.markedAt, provenanceKeyId: mark.provenanceKeyId },
    before,
    after,
    credentials,
    // What the input's reading found (a truncated file, ...), in verify's shape, then what happened to
    // its Content Credentials.
    warnings: [...before.warnings, ...(marked.warnings ?? [])],
  };
  return { body: base64Body(marked.bytes, fields), mark, headers: { [CREDENTIALS_HEADER]: credentials } };
}

/** `{"imageBase64":"<base64 of image>", ...fields}` as UTF-8 bytes in one standalone buffer. */
function base64Body(image: Uint8Array, fields: Record<string, unknown>): Buffer {
  const head = Buffer.from('{"imageBase64":"', 'latin1');
  const tail = Buffer.from(`",${JSON.stringify(fields).slice(1)}`, 'utf8');
  const b64 = base64Length(image.length);
  const out = Buffer.allocUnsafeSlow(head.length + b64 + tail.length);
  head.copy(out, 0);
  const written = base64Into([image], out, head.length);
  if (written !== b64) throw new Error(`base64 length ${written} != ${b64}`);
  tail.copy(out, head.length + b64);
  return out;
}

/** The name the client gave, cleaned of control characters and bounded; "image" when there was none. */
function originalNameOf(filename: string | undefined): string {
  const last = (filename ?? '').split(/[/\\]/).pop() ?? '';
  const name = last.replace(CONTROL_CHARACTERS, '').trim();
  return Array.from(name).slice(0, MAX_ORIGINAL_NAME).join('') || 'image';
}
