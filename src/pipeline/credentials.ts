/**
 * protect and the layer path with the file's Content Credentials in mind (issue #21, docs/c2pa.md): a
 * file without a manifest store is marked exactly as by the engine alone (same bytes, same warnings); a
 * file with one is updated with a signed manifest, refused, or marked with a warning, as OPTMARK_C2PA
 * says. The answer says which (`outcome`, sent as the Optmark-Content-Credentials header, and a warning).
 */
import type { C2paContainer } from '../c2pa/detect.js';
import { type IdentityLocation, loadC2paIdentity, type SignerIdentity } from '../c2pa/identity.js';
import type { C2paMode, CredentialsOutcome } from '../c2pa/modes.js';
import { addUpdateManifest, type EditKind, INVALIDATED_WARNING, notUpdatedWarning, REMOVED_WARNING, UpdateFailed } from '../c2pa/update.js';
import { OptmarkError } from '../errors.js';
import type { Warning } from '../formats/complete.js';
import type { ParsedImage } from '../formats/index.js';
import { checkOutputSize, protect, type ProtectOptions } from '../marking/engine.js';
import { DEFAULT_TOKEN, type DataMiningToken } from '../xmp/index.js';

/** How the worker treats Content Credentials: the mode and, for `update`, the signing identity (loaded on first use). */
export interface CredentialsPolicy {
  mode: C2paMode;
  identity(): Promise<SignerIdentity>;
}

/**
 * The policy a process applies (the image workers, a batch lane): OPTMARK_C2PA's mode (default update)
 * and the signing identity, read or created on the first file with credentials and kept (a failure is
 * tried again on the next file).
 */
export function credentialsPolicy(mode: C2paMode | undefined, location: IdentityLocation): CredentialsPolicy {
  let identity: Promise<SignerIdentity> | undefined;
  return {
    mode: mode ?? 'update',
    identity: () =>
      (identity ??= loadC2paIdentity(location).catch((err: unknown) => {
        identity = undefined;
        throw err;
      })),
  };
}

export interface Protected {
  pieces: Uint8Array[];
  mimeType: string;
  extension: string;
  signals: string[];
  warnings: Warning[];
  outcome: CredentialsOutcome;
}

/** The refusal of OPTMARK_C2PA=refuse: nothing is written. */
export function credentialsRefused(): OptmarkError {
  return new OptmarkError(
    'content_credentials_present',
    'The image carries Content Credentials (C2PA) and this server is set not to change such files (OPTMARK_C2PA=refuse); nothing was written.',
  );
}

export async function protectWithCredentials(image: Uint8Array | ParsedImage, options: ProtectOptions, policy: CredentialsPolicy): Promise<Protected> {
  const result = protect(image, options);
  const base = { mimeType: result.mimeType, extension: result.extension, signals: result.signals };
  // The store from protect's own walk of the input (src/formats/types.ts): no second walk.
  if (result.image.manifestStore === undefined) return { ...base, pieces: result.pieces, warnings: result.warnings, outcome: 'none' };
  // Already marked this way: the file comes back as it came, its credentials untouched.
  if (!result.changed) return { ...base, pieces: result.pieces, warnings: result.warnings, outcome: 'unchanged' };
  if (policy.mode === 'refuse') throw credentialsRefused();
  const kept = await keepCredentials({
    format: result.format,
    original: result.image.bytes,
    originalImage: result.image,
    marked: () => result.bytes,
    token: options.token ?? DEFAULT_TOKEN,
    edit: 'metadata',
    policy,
    maxOutputBytes: options.maxOutputBytes,
  });
  return { ...base, pieces: kept.bytes ? [kept.bytes] : result.pieces, warnings: [...result.warnings, kept.warning], outcome: kept.outcome };
}

export interface KeepInput {
  format: C2paContainer;
  /** The file as it came, with its manifest store. */
  original: Uint8Array;
  /** The structure of `original` when the caller holds it (no second walk of it). */
  originalImage?: ParsedImage | undefined;
  /** The marked file (read only when an update manifest is built). */
  marked: () => Uint8Array;
  token: DataMiningToken;
  /** What the marking changed: the metadata only, or the pixels too (the fingerprint layer). */
  edit: EditKind;
  policy: CredentialsPolicy;
  maxOutputBytes?: number | undefined;
}

/**
 * What becomes of the credentials of a file that was changed (mode `update` or `invalidate`; `refuse`
 * is the caller's to answer before any work): the bytes with an update manifest (`bytes`), or none when
 * the marked file goes out as it is, with the warning and outcome that say so.
 */
export async function keepCredentials(input: KeepInput): Promise<{ bytes?: Uint8Array; warning: Warning; outcome: CredentialsOutcome }> {
  if (input.policy.mode === 'refuse') throw credentialsRefused();
  if (input.policy.mode === 'invalidate') return { warning: input.edit === 'pixels' ? REMOVED_WARNING : INVALIDATED_WARNING, outcome: 'invalidated' };
  let updated: Awaited<ReturnType<typeof addUpdateManifest>>;
  try {
    updated = await addUpdateManifest({
      format: input.format,
      original: input.original,
      originalImage: input.originalImage,
      marked: input.marked(),
      token: input.token,
      edit: input.edit,
      identity: await input.policy.identity(),
    });
  } catch (err) {
    if (!(err instanceof UpdateFailed)) throw err;
    // Valid credentials that cannot be kept (or kept valid) are not broken: the file is refused, nothing written.
    if (err.parentValid) {
      throw new OptmarkError(
        'content_credentials_present',
        `The image carries valid Content Credentials and no update manifest that keeps them valid could be added (${err.reason}); nothing was written.`,
      );
    }
    // Nothing valid to keep (a store that cannot be read or no longer validates): marked, and said so.
    return { warning: notUpdatedWarning(err.reason, input.edit), outcome: 'invalidated' };
  }
  checkOutputSize(input.original.length, [updated.bytes], input.maxOutputBytes);
  return { bytes: updated.bytes, warning: updated.warning, outcome: updated.outcome };
}
