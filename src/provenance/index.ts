/** Provenance layer: an Ed25519-signed tag in the XMP saying "this server signed these bytes" (docs/provenance.md). */
export { SigningKeyError, type SigningKeyErrorCode } from './errors.js';
export {
  Keyring,
  SigningKeySource,
  keyIdOf,
  listSigningKeys,
  loadSigningKey,
  rotateSigningKey,
  type KeyListing,
  type KeyLocation,
  type PublicKeyInfo,
  type Rotation,
  type SigningKey,
} from './keys.js';
export { contentDigest } from './digest.js';
export { NS_PROVENANCE, PROVENANCE_PREFIX, readTag, signedMessage, type SignedTag, type TagFields } from './tag.js';
export { protectSigned, signingTime, type SignOptions } from './sign.js';
export { verifyProvenance, type ProvenanceReason, type ProvenanceReport, type PublicKeys } from './verify.js';
