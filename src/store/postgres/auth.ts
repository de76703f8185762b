/**
 * The PostgreSQL engine's authentication: key rows cached for at most `authCacheMs` (2 s by default),
 * bounded in size, so a key issued or revoked on any instance works or stops everywhere within that;
 * changes made through this instance clear the cache at once. Last-used times are written in batches.
 */
import { iso, toAccount, type AccountRow } from '../accounts.js';
import { AuthCache, LastUsed, authFailure, keyHashOf, planFailure, type AuthRow } from '../common.js';
import type { Operation } from '../quota.js';
import type { AuthResult } from '../types.js';
import type { Query } from './connection.js';

export class PgAuth {
  readonly #q: Query;
  readonly #defaults: Readonly<Record<Operation, number>>;
  readonly #cache: AuthCache;
  readonly #lastUsed = new LastUsed();
  /** Key lookups on their way, by key hash: concurrent requests with one key share one. */
  readonly #lookups = new Map<string, Promise<AuthRow | undefined>>();

  constructor(query: Query, defaults: Readonly<Record<Operation, number>>, cacheMs: number) {
    this.#q = query;
    this.#defaults = defaults;
    this.#cache = new AuthCache(cacheMs);
  }

  async authenticate(authorization: string | undefined, now: Date): Promise<AuthResult> {
    const key = keyHashOf(authorization);
    if ('failure' in key) return key.failure;
    const hash = key.hash;
    const cacheKey = hash.toString('base64');
    const t = Date.now();
    let row = this.#cache.get(cacheKey, t);
    if (!row) {
      // Requests that find the entry expired together wait for one lookup, not one each (eight in flight
      // made eight statements every time the entry expired, each prepared on a pooled connection of its own).
      let pending = this.#lookups.get(cacheKey);
      if (!pending) {
        const lookup = this.#lookUp(hash, cacheKey, t).finally(() => {
          if (this.#lookups.get(cacheKey) === lookup) this.#lookups.delete(cacheKey);
        });
        this.#lookups.set(cacheKey, (pending = lookup));
      }
      row = await pending;
      if (!row) return authFailure('invalid_api_key'); // unknown keys are not cached: a new key works at once
    }
    if (row.revoked) return authFailure('invalid_api_key', 'The API key has been revoked.');
    this.#lastUsed.note(row.keyId, row.lastUsedAt, now);
    const refused = planFailure(row.plan);
    if (refused) return refused;
    const account = toAccount(
      { id: row.accountId, name: row.name, plan: row.plan, protect_limit: row.protectLimit, verify_limit: row.verifyLimit, created_at: row.createdAt },
      this.#defaults,
    );
    return { ok: true, account, keyId: row.keyId };
  }

  /** After a change made through this instance: no cached key row, and no lookup begun before it is joined. */
  forget(): void {
    this.#cache.clear();
    this.#lookups.clear();
  }

  /** The key's row from the database (cached as of `t`, when the lookup began), or undefined. */
  async #lookUp(hash: Buffer, cacheKey: string, t: number): Promise<AuthRow | undefined> {
    const r = await this.#q<AccountRow & { key_id: number; last_used_at: Date | null; revoked_at: Date | null }>(
      `SELECT a.id, a.name, a.plan, a.protect_limit, a.verify_limit, a.created_at, k.id AS key_id, k.last_used_at, k.revoked_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = $1`,
      [hash],
      'optmark_auth',
    );
    const db = r.rows[0];
    if (!db) return undefined;
    const row: AuthRow = {
      keyId: db.key_id,
      accountId: db.id,
      name: db.name,
      plan: db.plan,
      protectLimit: db.protect_limit,
      verifyLimit: db.verify_limit,
      createdAt: iso(db.created_at),
      lastUsedAt: db.last_used_at?.toISOString() ?? null,
      revoked: db.revoked_at !== null,
    };
    this.#cache.set(cacheKey, row, t);
    return row;
  }

  /** Writes the pending last-used times (only ever forward in time). */
  async flushLastUsed(): Promise<void> {
    if (this.#lastUsed.size === 0) return;
    const rows = this.#lastUsed.take();
    await this.#q(
      `UPDATE api_keys k SET last_used_at = v.at FROM unnest($1::int[], $2::timestamptz[]) AS v(id, at)
        WHERE k.id = v.id AND (k.last_used_at IS NULL OR k.last_used_at < v.at)`,
      [rows.map((r) => r.id), rows.map((r) => r.at)],
    );
  }
}
