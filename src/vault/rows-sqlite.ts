/**
 * The vault's rows in the SQLite file (./rows.ts has the discipline). better-sqlite3 is synchronous and
 * each call one statement or one IMMEDIATE transaction, so a reservation's check and insert cannot be
 * split by another writer, in this process or another on the same file.
 */
import { nearest, type VaultMatch } from './recognition.js';
import { randomUUID } from 'node:crypto';
import type { Db } from '../store/db.js';
import {
  COLUMNS,
  likeOf,
  type ObjectRow,
  toObject,
  type ReserveResult,
  type VaultObjectRow,
  type VaultQuery,
  type VaultRows,
  type VaultState,
} from './rows.js';

export class SqliteVaultRows implements VaultRows {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async state(accountId: number): Promise<VaultState> {
    const r = this.#db
      .prepare<
        [{ a: number }],
        { enabled: number | null; limit_bytes: number | null; used: number | null; reserved: number; objects: number; wrapped_key: string | null }
      >(
        `SELECT v.enabled, v.limit_bytes, v.used_bytes AS used, v.wrapped_key,
                (SELECT coalesce(sum(bytes), 0) FROM vault_reservations WHERE account_id = :a) AS reserved,
                (SELECT count(*) FROM vault_objects WHERE account_id = :a) AS objects
           FROM (SELECT 1) LEFT JOIN vault_accounts v ON v.account_id = :a`,
      )
      .get({ a: accountId })!;
    return {
      enabled: r.enabled === 1,
      limitBytes: r.limit_bytes,
      usedBytes: r.used ?? 0,
      reservedBytes: Number(r.reserved),
      objects: Number(r.objects),
      wrappedKey: r.wrapped_key,
    };
  }

  async setEnabled(accountId: number, enabled: boolean): Promise<void> {
    this.#db
      .prepare('INSERT INTO vault_accounts (account_id, enabled) VALUES (?, ?) ON CONFLICT (account_id) DO UPDATE SET enabled = excluded.enabled')
      .run(accountId, enabled ? 1 : 0);
  }

  async setLimit(accountId: number, limitBytes: number | null): Promise<void> {
    this.#db
      .prepare('INSERT INTO vault_accounts (account_id, limit_bytes) VALUES (?, ?) ON CONFLICT (account_id) DO UPDATE SET limit_bytes = excluded.limit_bytes')
      .run(accountId, limitBytes);
  }

  async keepKey(accountId: number, wrapped: string): Promise<string> {
    return this.#db
      .prepare<[number, string], { wrapped_key: string }>(
        `INSERT INTO vault_accounts (account_id, wrapped_key) VALUES (?, ?)
         ON CONFLICT (account_id) DO UPDATE SET wrapped_key = coalesce(vault_accounts.wrapped_key, excluded.wrapped_key)
         RETURNING wrapped_key`,
      )
      .get(accountId, wrapped)!.wrapped_key;
  }

  async reserve(accountId: number, bytes: number, defaultLimit: number, expiresAt: Date): Promise<ReserveResult> {
    return this.#db
      .transaction((): ReserveResult => {
        const a = this.#db
          .prepare<[number], { enabled: number; limit_bytes: number | null; used_bytes: number }>(
            'SELECT enabled, limit_bytes, used_bytes FROM vault_accounts WHERE account_id = ?',
          )
          .get(accountId);
        if (a?.enabled !== 1) return { ok: false, reason: 'disabled' };
        const reserved = Number(
          this.#db.prepare<[number], { n: number }>('SELECT coalesce(sum(bytes), 0) AS n FROM vault_reservations WHERE account_id = ?').get(accountId)!.n,
        );
        const limit = a.limit_bytes ?? defaultLimit;
        if (a.used_bytes + reserved + bytes > limit) return { ok: false, reason: 'over', usedBytes: a.used_bytes, reservedBytes: reserved, limitBytes: limit };
        const id = randomUUID();
        this.#db
          .prepare('INSERT INTO vault_reservations (id, account_id, bytes, expires_at) VALUES (?, ?, ?, ?)')
          .run(id, accountId, bytes, expiresAt.getTime());
        return { ok: true, id };
      })
      .immediate();
  }

  async release(reservationId: string): Promise<void> {
    this.#db.prepare('DELETE FROM vault_reservations WHERE id = ?').run(reservationId);
  }

  async commit(reservationId: string, accountId: number, row: VaultObjectRow): Promise<{ object: VaultObjectRow; created: boolean }> {
    return this.#db
      .transaction(() => {
        this.#db.prepare('DELETE FROM vault_reservations WHERE id = ?').run(reservationId);
        const kept = this.#db
          .prepare<[number, string], ObjectRow>(`SELECT ${COLUMNS} FROM vault_objects WHERE account_id = ? AND sha256 = ?`)
          .get(accountId, row.sha256);
        if (kept) return { object: toObject(kept), created: false };
        this.#db
          .prepare(`INSERT INTO vault_objects (${COLUMNS}, account_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
          .run(row.id, row.name, row.sha256, row.bytes, row.mimeType, row.createdAt, row.kind, row.record, row.storageKey, row.phash, accountId);
        this.#db.prepare('UPDATE vault_accounts SET used_bytes = used_bytes + ? WHERE account_id = ?').run(row.bytes, accountId);
        return { object: row, created: true };
      })
      .immediate();
  }

  async bySha(accountId: number, sha256: string): Promise<VaultObjectRow | undefined> {
    const r = this.#db.prepare<[number, string], ObjectRow>(`SELECT ${COLUMNS} FROM vault_objects WHERE account_id = ? AND sha256 = ?`).get(accountId, sha256);
    return r && toObject(r);
  }

  async get(accountId: number, id: string): Promise<VaultObjectRow | undefined> {
    const r = this.#db.prepare<[number, string], ObjectRow>(`SELECT ${COLUMNS} FROM vault_objects WHERE account_id = ? AND id = ?`).get(accountId, id);
    return r && toObject(r);
  }

  async list(accountId: number, q: VaultQuery): Promise<VaultObjectRow[]> {
    const where = ['account_id = :account'];
    const params: Record<string, unknown> = { account: accountId, limit: q.limit };
    if (q.name) {
      where.push("lower(name) LIKE :like ESCAPE '\\'");
      params.like = likeOf(q.name);
    }
    if (q.q) {
      where.push("(lower(name) LIKE :qlike ESCAPE '\\' OR sha256 = :q OR record_id = :q)");
      params.qlike = likeOf(q.q);
      params.q = q.q;
    }
    if (q.sha256) {
      where.push('sha256 = :sha');
      params.sha = q.sha256;
    }
    if (q.record) {
      where.push('record_id = :record');
      params.record = q.record;
    }
    if (q.after) {
      where.push('(created_at < :at OR (created_at = :at AND id < :id))');
      params.at = q.after.createdAt;
      params.id = q.after.id;
    }
    const sql = `SELECT ${COLUMNS} FROM vault_objects WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT :limit`;
    return this.#db.prepare<[Record<string, unknown>], ObjectRow>(sql).all(params).map(toObject);
  }

  async remove(accountId: number, id: string): Promise<VaultObjectRow | undefined> {
    return this.#db
      .transaction(() => {
        const r = this.#db
          .prepare<[number, string], ObjectRow>(`DELETE FROM vault_objects WHERE account_id = ? AND id = ? RETURNING ${COLUMNS}`)
          .get(accountId, id);
        if (!r) return undefined;
        this.#db.prepare('UPDATE vault_accounts SET used_bytes = used_bytes - ? WHERE account_id = ?').run(r.bytes, accountId);
        return toObject(r);
      })
      .immediate();
  }

  async removeByStorageKey(keys: string[]): Promise<number> {
    return this.#db
      .transaction(() => {
        let n = 0;
        for (const key of keys) {
          const r = this.#db
            .prepare<[string], { account_id: number; bytes: number }>('DELETE FROM vault_objects WHERE storage_key = ? RETURNING account_id, bytes')
            .get(key);
          if (!r) continue;
          this.#db.prepare('UPDATE vault_accounts SET used_bytes = used_bytes - ? WHERE account_id = ?').run(r.bytes, r.account_id);
          n++;
        }
        return n;
      })
      .immediate();
  }

  async wrappedKeys(): Promise<{ accountId: number; wrapped: string }[]> {
    return this.#db
      .prepare<[], { account_id: number; wrapped_key: string }>(
        'SELECT account_id, wrapped_key FROM vault_accounts WHERE wrapped_key IS NOT NULL ORDER BY account_id',
      )
      .all()
      .map((r) => ({ accountId: r.account_id, wrapped: r.wrapped_key }));
  }

  async rewrapKeys(rewrap: (wrapped: string, accountId: number) => string): Promise<number> {
    return this.#db
      .transaction(() => {
        const rows = this.#db
          .prepare<[], { account_id: number; wrapped_key: string }>('SELECT account_id, wrapped_key FROM vault_accounts WHERE wrapped_key IS NOT NULL')
          .all();
        const update = this.#db.prepare('UPDATE vault_accounts SET wrapped_key = ? WHERE account_id = ?');
        for (const r of rows) update.run(rewrap(r.wrapped_key, r.account_id), r.account_id);
        return rows.length;
      })
      .immediate();
  }

  async objectCount(): Promise<number> {
    return this.#db.prepare<[], { n: number }>('SELECT count(*) AS n FROM vault_objects').get()!.n;
  }

  async storageKeys(): Promise<Set<string>> {
    return new Set(
      this.#db
        .prepare<[], { storage_key: string }>('SELECT storage_key FROM vault_objects')
        .all()
        .map((r) => r.storage_key),
    );
  }

  async dropExpired(now: Date): Promise<number> {
    return this.#db.prepare('DELETE FROM vault_reservations WHERE expires_at <= ?').run(now.getTime()).changes;
  }

  /** The account's originals that have a perceptual hash. */
  #hashes(accountId: number): { id: string; name: string; phash: string; record: string | null }[] {
    return this.#db
      .prepare<[number], { id: string; name: string; phash: string; record_id: string | null }>(
        "SELECT id, name, phash, record_id FROM vault_objects WHERE account_id = ? AND kind = 'original' AND phash IS NOT NULL",
      )
      .all(accountId)
      .map((r) => ({ id: r.id, name: r.name, phash: r.phash, record: r.record_id }));
  }

  /** A scan of the account's hashes in JS: measured as fast as the distance in SQL (bench/recognition-store.bench.ts). */
  async vaultMatches(accountId: number, hash: string): Promise<VaultMatch[]> {
    return nearest(this.#hashes(accountId), hash);
  }
}
