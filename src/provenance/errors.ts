/**
 * Operator-facing signing-key errors (missing or unusable key file, rotation of an externally managed
 * key). They surface in the CLI and at worker start of the layer path; the verify path never throws
 * them (a key it cannot load makes a tag unverifiable, not a failed request).
 */
import { CodedError } from '../errors.js';

export const SIGNING_KEY_ERROR_CODES = ['signing_key_missing', 'signing_key_invalid', 'signing_key_external'] as const;

export type SigningKeyErrorCode = (typeof SIGNING_KEY_ERROR_CODES)[number];

/** A signing key that cannot be used as configured; `code` is stable, the message says what to do. */
export class SigningKeyError extends CodedError<SigningKeyErrorCode> {}
