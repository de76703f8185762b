/**
 * Typed errors with stable codes. The code string is the contract: errors cross worker threads by
 * structured clone and lose their class there, so callers switch on `code`, never on `instanceof`.
 * HTTP status mapping happens once, at the edge (src/http/errors.ts).
 */

export const ERROR_CODES = [
  // input
  'unsupported_format',
  'damaged_image',
  'limit_exceeded',
  'output_too_large',
  'content_credentials_present',
  'content_credentials_malformed',
  'payload_too_large',
  'upload_too_slow',
  'malformed_multipart',
  'missing_image',
  'too_many_parts',
  'unexpected_part',
  'unsupported_media_type',
  'invalid_query',
  'invalid_text',
  // auth and quota
  'missing_api_key',
  'invalid_api_key',
  'plan_required',
  'quota_exceeded',
  // Idempotency-Key
  'invalid_idempotency_key',
  'idempotency_key_in_use',
  'idempotency_key_reused',
  // the dashboard's batches
  'invalid_request',
  'batch_too_large',
  'batch_full',
  // the Private Vault
  'vault_disabled',
  'vault_quota_exceeded',
  'range_not_satisfiable',
  // repository scans (docs/scans.md)
  'invalid_source',
  'local_source_not_allowed',
  'scan_limit_exceeded',
  // routing
  'not_found',
  'method_not_allowed',
  // capacity
  'overloaded',
  'processing_timeout',
  'fingerprint_unavailable',
  // anything else
  'internal_error',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

const DEFAULT_MESSAGES: Record<ErrorCode, string> = {
  unsupported_format: 'The file is not a JPEG, PNG or WebP image.',
  damaged_image: 'The image is too damaged to edit safely.',
  limit_exceeded: 'The image exceeds a processing limit.',
  output_too_large: 'The marked image would exceed a limit optmark sets on its own output.',
  content_credentials_present: 'The image carries Content Credentials (C2PA) that this server does not edit (OPTMARK_C2PA=refuse).',
  content_credentials_malformed: "The image's C2PA manifest store declares lengths its bytes do not hold; it was not read.",
  payload_too_large: 'The upload is larger than the size limit.',
  upload_too_slow: 'The upload arrived slower than the server accepts; the connection is closed.',
  malformed_multipart: 'The request body is not valid multipart/form-data.',
  missing_image: 'The request has no "image" file part.',
  too_many_parts: 'The request must carry exactly one "image" file part.',
  unexpected_part: 'The request may carry only the "image" file part.',
  invalid_query: 'A query parameter has a value this route does not accept.',
  invalid_text: 'A text value holds a NUL, is not valid UTF-8 (or holds a lone surrogate), or is too long.',
  unsupported_media_type: 'The "image" part must have an image/* content type.',
  missing_api_key: 'An API key is required: send "Authorization: Bearer <key>".',
  invalid_api_key: 'The API key is not valid.',
  plan_required: "This account's plan does not include API access.",
  quota_exceeded: 'The monthly limit for this operation is used up.',
  invalid_idempotency_key: 'The Idempotency-Key header is malformed.',
  idempotency_key_in_use: 'A request with this Idempotency-Key is still in progress; retry shortly.',
  idempotency_key_reused: 'This Idempotency-Key was used for a different request.',
  invalid_request: 'The request is not valid.',
  batch_too_large: 'A dashboard batch holds at most 25 images.',
  batch_full: 'This batch already holds all the images it was opened for.',
  vault_disabled: "This account's Private Vault is off; turn it on in the dashboard's Settings or with PUT /api/v1/vault.",
  vault_quota_exceeded: 'Storing this file would take the Private Vault past its limit; nothing was stored.',
  range_not_satisfiable: 'The Range asks for bytes the object does not have.',
  invalid_source: 'The scan source is not a URL or path optmark scans.',
  local_source_not_allowed: 'This server does not scan local folders, files or file:// URLs (OPTMARK_SCAN_ALLOW_LOCAL).',
  scan_limit_exceeded: 'This account started its scans for today (UTC); retry after resetsAt.',
  not_found: 'No such route.',
  method_not_allowed: 'This route does not accept that method.',
  overloaded: 'The server is busy; retry shortly.',
  processing_timeout: 'Processing the image took too long.',
  fingerprint_unavailable: 'The fingerprint detector cannot run now; retry shortly, or send ?fingerprint=skip for the rest of the report.',
  internal_error: 'Something went wrong on the server.',
};

/**
 * `optmark verify`'s advice where the API's message for `fingerprint_unavailable` says `?fingerprint=skip`
 * (a query the command line has no use for).
 */
export const SKIP_FINGERPRINT_HINT = '--skip-fingerprint verifies the rest without the detector';

/**
 * An operator-facing error outside the HTTP contract (store administration, signing keys): a stable
 * `code` of its own vocabulary and a message that says what to do.
 */
export class CodedError<C extends string> extends Error {
  readonly code: C;
  constructor(code: C, message: string) {
    super(message);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Base class for every error optmark raises on purpose. */
export class OptmarkError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? DEFAULT_MESSAGES[code], options);
    this.code = code;
    this.name = 'OptmarkError';
  }
}

/** The bytes are not one of the supported containers. */
export class UnsupportedFormatError extends OptmarkError {
  constructor(message?: string) {
    super('unsupported_format', message);
  }
}

/** A supported container whose structure cannot be edited safely. */
export class DamagedImageError extends OptmarkError {
  constructor(message?: string) {
    super('damaged_image', message);
  }
}

/** A named processing limit was exceeded (metadata too large, too many chunks, pixel budget, ...). */
export class LimitExceededError extends OptmarkError {
  constructor(message?: string) {
    super('limit_exceeded', message);
  }
}

/**
 * A text on its way to a store that neither engine can keep as it is: a NUL (PostgreSQL refuses it), bytes
 * that are not UTF-8 or a lone surrogate (each engine would store a replacement character instead), or
 * more characters than the field holds. Raised by src/store/text.ts, answered 400 `invalid_text`.
 */
export class InvalidTextError extends OptmarkError {
  /** The parameter or field, as the client named it. */
  readonly field: string;
  constructor(field: string, problem: string) {
    super('invalid_text', `"${field}" ${problem}.`);
    this.field = field;
  }
}

export function defaultMessage(code: ErrorCode): string {
  return DEFAULT_MESSAGES[code];
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

/** The plain shape an error takes across a thread boundary. */
export interface ErrorShape {
  code: ErrorCode;
  message: string;
}

/** Reduces anything thrown to a stable shape; unknown errors become internal_error with no internals. */
export function toErrorShape(err: unknown): ErrorShape {
  if (err instanceof OptmarkError) return { code: err.code, message: err.message };
  if (err && typeof err === 'object' && isErrorCode((err as { code?: unknown }).code)) {
    const e = err as { code: ErrorCode; message?: unknown };
    return { code: e.code, message: typeof e.message === 'string' ? e.message : DEFAULT_MESSAGES[e.code] };
  }
  return { code: 'internal_error', message: DEFAULT_MESSAGES.internal_error };
}
