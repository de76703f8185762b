/** The one place error codes become HTTP statuses (DESIGN.md section 8). */
import type { ErrorCode } from '../errors.js';

export const STATUS_OF: Record<ErrorCode, number> = {
  malformed_multipart: 400,
  missing_image: 400,
  too_many_parts: 400,
  unexpected_part: 400,
  invalid_query: 400,
  invalid_text: 400,
  invalid_request: 400,
  batch_too_large: 400,
  batch_full: 409,
  vault_disabled: 409,
  vault_quota_exceeded: 413,
  range_not_satisfiable: 416,
  invalid_idempotency_key: 400,
  idempotency_key_in_use: 409,
  idempotency_key_reused: 422,
  content_credentials_present: 409,
  missing_api_key: 401,
  invalid_api_key: 401,
  plan_required: 403,
  not_found: 404,
  method_not_allowed: 405,
  upload_too_slow: 408,
  payload_too_large: 413,
  unsupported_format: 415,
  unsupported_media_type: 415,
  damaged_image: 422,
  content_credentials_malformed: 422,
  limit_exceeded: 422,
  output_too_large: 422,
  processing_timeout: 422,
  quota_exceeded: 429,
  scan_limit_exceeded: 429,
  invalid_source: 400,
  local_source_not_allowed: 400,
  internal_error: 500,
  overloaded: 503,
  fingerprint_unavailable: 503,
};

const REASONS: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** The status line uWS writes: "413 Content Too Large". */
export function statusLine(status: number): string {
  return `${status} ${REASONS[status] ?? ''}`.trim();
}

/** Seconds a client should wait before retrying an overloaded server. */
export const OVERLOAD_RETRY_AFTER_SECONDS = 1;
