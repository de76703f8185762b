/**
 * Operator-facing store errors (unknown account, duplicate name, ambiguous key prefix, ...). They are
 * raised by the operator side of the store and printed by the commands; the request path never throws
 * them for a client's mistake (authentication and quota answers are result values, not exceptions).
 * Two codes do reach the request path: `store_unavailable` (the database cannot answer: 503) and
 * `reservation_lost` (this instance's hold was reclaimed: 503, the unit is not counted).
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
  'store_unavailable',
  'reservation_lost',
  'invalid_database_url',
  'target_not_empty',
  'invalid_text',
] as const;

export type StoreErrorCode = (typeof STORE_ERROR_CODES)[number];

/** An operator mistake or a store that this version cannot use; `code` is stable, the message says what to do. */
export class StoreError extends CodedError<StoreErrorCode> {
  constructor(code: StoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message);
    if (options && 'cause' in options) Object.defineProperty(this, 'cause', { value: options.cause, enumerable: false });
  }
}

/** The database cannot answer now (or lost this instance's hold): the request path answers 503 with Retry-After. */
export function isStoreUnavailable(err: unknown): boolean {
  return err instanceof StoreError && (err.code === 'store_unavailable' || err.code === 'reservation_lost');
}
