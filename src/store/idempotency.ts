/**
 * Idempotency keys (draft-ietf-httpapi-idempotency-key-header): a client names a counted request with a
 * key of its choosing, scoped to its account. The store writes the key with the request's unit: taken
 * with the reservation (held by this instance), marked committed with the upload's SHA-256 in the very
 * statement or transaction that commits the unit, deleted with a refund or with the holds of a dead
 * instance. So a key is committed exactly when its unit is, whatever dies when, and a retry that finds
 * it committed is answered again without a unit (src/http/api.ts).
 */
import type { Operation } from './quota.js';

/** How long a committed key is kept: a retry within this finds it; after it, the key names a new request. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** How often the background work deletes expired keys (never a write per request). */
export const IDEMPOTENCY_PRUNE_MS = 60_000;

/** The key a caller passes to `reserve`; it fills `sha256` (hex) with the upload's digest before `commit`. */
export interface IdempotentRequest {
  readonly key: string;
  sha256?: string;
}

/** What a key already names, when `reserve` took no unit for it. */
export type PriorRequest =
  /** Its unit is committed: answer again, free (unless the upload or operation differs). */
  | { status: 'committed'; operation: Operation; sha256: string }
  /** Its unit is held by a request in progress (or a dead instance's, until reconciled). */
  | { status: 'in_progress' };

/** The row as both engines read it. */
export interface KeyRow {
  state: 'held' | 'committed';
  operation: Operation;
  sha256: string | null;
}

/** A key row found by `reserve`, as what it tells the caller. */
export function priorOf(row: KeyRow | undefined): PriorRequest {
  if (row?.state === 'committed' && row.sha256 !== null) return { status: 'committed', operation: row.operation, sha256: row.sha256 };
  return { status: 'in_progress' };
}

/** The digest a keyed commit records; a programming error when the caller did not give it. */
export function uploadDigest(request: IdempotentRequest): string {
  if (!request.sha256 || !/^[0-9a-f]{64}$/.test(request.sha256)) throw new Error('a keyed reservation is committed with its upload SHA-256 (hex)');
  return request.sha256;
}
