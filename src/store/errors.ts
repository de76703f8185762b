/**
 * Operator-facing store errors (unknown account, duplicate name, ambiguous key prefix, ...). They are
 * raised by the operator side of the store and printed by the commands; the request path never throws
 * them for a client's mistake (authentication and quota answers are result values, not exceptions).
 */
import { CodedError } from '../errors.js';

export const STORE_ERROR_CODES = [
  'unknown_account',
  'duplicate_account',
  'invalid_account_name',
  'invalid_plan',
  'invalid_limit',
  'invalid_month',
  'unknown_key',
  'ambiguous_key_prefix',
  'key_prefix_too_short',
  'schema_too_new',
] as const;

export type StoreErrorCode = (typeof STORE_ERROR_CODES)[number];

/** An operator mistake or a store that this version cannot use; `code` is stable, the message says what to do. */
export class StoreError extends CodedError<StoreErrorCode> {}
