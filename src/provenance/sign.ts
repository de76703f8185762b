/**
 * Writing the provenance tag: the opt-out field and the signed tag in one pass of the marking engine
 * (same merge and container rules as protect), then a check that the produced file verifies.
 */
import { OptmarkError } from '../errors.js';
import { parseImage, type ParsedImage } from '../formats/index.js';
import { protect, type ProtectResult } from '../marking/engine.js';
import { DEFAULT_TOKEN, tokenUri, type DataMiningToken } from '../xmp/index.js';
import { contentDigest } from './digest.js';
import type { SigningKey } from './keys.js';
import { signFields, writeTag } from './tag.js';
import { verifyProvenance } from './verify.js';

export interface SignOptions {
  /** The DataMining token to write and vouch for (default DMI-PROHIBITED-AIMLTRAINING). */
  token?: DataMiningToken;
  /** Signing time (default now). */
  now?: Date;
}

/** UTC, whole seconds: the form the tag carries. */
export function signingTime(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Protects `input` and adds a tag signed with `key`. The digest is taken from the input, whose content
 * outside the XMP protect keeps byte for byte; the produced file is verified before it is returned, and
 * should a container ever re-slice that content, the tag is re-signed once over the produced slices.
 */
export async function protectSigned(input: Uint8Array | ParsedImage, key: SigningKey, options: SignOptions = {}): Promise<ProtectResult> {
  // One walk of the input serves the digest and the rewrite.
  const image = input instanceof Uint8Array ? parseImage(input) : input;
  const { format } = image;
  const token = options.token ?? DEFAULT_TOKEN;
  const signedAt = signingTime(options.now ?? new Date());
  const keys = { find: async (id: string) => (id === key.keyId ? key.publicKey : undefined) };
  let digest = contentDigest(format, image);
  for (let attempt = 0; attempt < 2; attempt++) {
    const tag = signFields({ keyId: key.keyId, signedAt, dataMining: tokenUri(token), contentDigest: digest }, key.privateKey);
    const result = protect(image, { token, edit: (doc) => writeTag(doc, tag) });
    // A file that comes back as it came (tagged the same way, the same second) is checked from its walk.
    const check = await verifyProvenance(result.changed ? result.bytes : image, keys);
    if (check.valid) return result;
    if (check.reason !== 'digest_mismatch') {
      throw new OptmarkError('internal_error', `The provenance tag did not verify after writing (${check.reason}).`);
    }
    digest = contentDigest(format, result.bytes);
  }
  throw new OptmarkError('internal_error', 'The provenance tag did not verify after writing (digest_mismatch).');
}
