/**
 * The SQLite engine's idempotency-key statements (src/store/idempotency.ts). Each runs inside the
 * engine's transaction that takes, commits or gives back the unit, so key and unit change together.
 */
import type { Db } from '../db.js';
import { IDEMPOTENCY_TTL_MS, type KeyRow } from '../idempotency.js';
import type { Operation } from '../quota.js';

export class SqliteIdempotency {
  readonly #find;
  readonly #take;
  readonly #committed;
  readonly #drop;
  readonly #dropHeldOf;
  readonly #prune;

  constructor(db: Db) {
    this.#find = db.prepare<[number, string, number], KeyRow>(
      'SELECT state, operation, sha256 FROM idempotency_keys WHERE account_id = ? AND idem_key = ? AND expires_at > ?',
    );
    // An expired row of the same key is replaced: the key names a new request.
    this.#take = db.prepare<[number, string, Operation, string, number]>(
      `INSERT OR REPLACE INTO idempotency_keys (account_id, idem_key, operation, owner, state, sha256, expires_at) VALUES (?, ?, ?, ?, 'held', NULL, ?)`,
    );
    this.#committed = db.prepare<[string, number, number, string, string]>(
      `UPDATE idempotency_keys SET state = 'committed', sha256 = ?, expires_at = ? WHERE account_id = ? AND idem_key = ? AND owner = ? AND state = 'held'`,
    );
    this.#drop = db.prepare<[number, string, string]>('DELETE FROM idempotency_keys WHERE account_id = ? AND idem_key = ? AND owner = ?');
    this.#dropHeldOf = db.prepare<[string]>(`DELETE FROM idempotency_keys WHERE owner = ? AND state = 'held'`);
    this.#prune = db.prepare<[number]>(`DELETE FROM idempotency_keys WHERE expires_at <= ? AND state = 'committed'`);
  }

  /** The unexpired row of this account's key, if any. */
  find(account: number, key: string, nowMs: number): KeyRow | undefined {
    return this.#find.get(account, key, nowMs);
  }

  take(account: number, key: string, op: Operation, owner: string, nowMs: number): void {
    this.#take.run(account, key, op, owner, nowMs + IDEMPOTENCY_TTL_MS);
  }

  /** The key of a unit just committed by `owner`, with the upload's digest; the key's 24 hours start now. */
  commit(account: number, key: string, owner: string, sha256: string, nowMs: number): void {
    this.#committed.run(sha256, nowMs + IDEMPOTENCY_TTL_MS, account, key, owner);
  }

  /** The key of a unit given back. */
  drop(account: number, key: string, owner: string): void {
    this.#drop.run(account, key, owner);
  }

  /** The keys a dead owner held (their units are given back in the same transaction). */
  dropHeldOf(owner: string): void {
    this.#dropHeldOf.run(owner);
  }

  prune(nowMs: number): number {
    return this.#prune.run(nowMs).changes;
  }
}
