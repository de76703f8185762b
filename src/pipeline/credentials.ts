/**
 * protect with the file's Content Credentials in mind (issue #21, docs/c2pa.md): a file without a
 * manifest store is marked exactly as by the engine alone (same bytes, same warnings); a file with one
 * is updated with a signed manifest, refused, or marked with a warning, as OPTMARK_C2PA says. The
 * answer says which (`outcome`, sent as the Optmark-Content-Credentials header, and a warning).
 */
import { hasManifestStore } from '../c2pa/detect.js';
import type { SignerIdentity } from '../c2pa/identity.js';
import type { C2paMode, CredentialsOutcome } from '../c2pa/modes.js';
import { addUpdateManifest, INVALIDATED_WARNING, notUpdatedWarning, UpdateFailed } from '../c2pa/update.js';
import { OptmarkError } from '../errors.js';
import type { Warning } from '../formats/complete.js';
import { checkOutputSize, protect, type ProtectOptions } from '../marking/engine.js';
import { DEFAULT_TOKEN } from '../xmp/index.js';

/** How the worker treats Content Credentials: the mode and, for `update`, the signing identity (loaded on first use). */
export interface CredentialsPolicy {
  mode: C2paMode;
  identity(): Promise<SignerIdentity>;
}

export interface Protected {
  pieces: Uint8Array[];
  mimeType: string;
  extension: string;
  signals: string[];
  warnings: Warning[];
  outcome: CredentialsOutcome;
}

export async function protectWithCredentials(image: Uint8Array, options: ProtectOptions, policy: CredentialsPolicy): Promise<Protected> {
  const result = protect(image, options);
  const base = { mimeType: result.mimeType, extension: result.extension, signals: result.signals };
  if (!hasManifestStore(result.format, image)) return { ...base, pieces: result.pieces, warnings: result.warnings, outcome: 'none' };
  // Already marked this way: the file comes back as it came, its credentials untouched.
  if (!result.changed) return { ...base, pieces: result.pieces, warnings: result.warnings, outcome: 'unchanged' };
  if (policy.mode === 'refuse') {
    throw new OptmarkError(
      'content_credentials_present',
      'The image carries Content Credentials (C2PA) and this server is set not to change such files (OPTMARK_C2PA=refuse); nothing was written.',
    );
  }
  if (policy.mode === 'invalidate') return { ...base, pieces: result.pieces, warnings: [...result.warnings, INVALIDATED_WARNING], outcome: 'invalidated' };
  let updated: Awaited<ReturnType<typeof addUpdateManifest>>;
  try {
    updated = await addUpdateManifest({
      format: result.format,
      original: image,
      marked: result.bytes,
      token: options.token ?? DEFAULT_TOKEN,
      identity: await policy.identity(),
    });
  } catch (err) {
    if (!(err instanceof UpdateFailed)) throw err;
    // Valid credentials that cannot be kept are not broken: the file is refused, nothing written.
    if (err.parentValid) {
      throw new OptmarkError(
        'content_credentials_present',
        `The image carries valid Content Credentials and no update manifest could be added to them (${err.reason}); nothing was written.`,
      );
    }
    // Nothing valid to keep (a store that cannot be read or no longer validates): marked, and said so.
    return { ...base, pieces: result.pieces, warnings: [...result.warnings, notUpdatedWarning(err.reason)], outcome: 'invalidated' };
  }
  checkOutputSize(image.length, [updated.bytes], options.maxOutputBytes);
  return { ...base, pieces: [updated.bytes], warnings: [...result.warnings, updated.warning], outcome: 'updated' };
}
