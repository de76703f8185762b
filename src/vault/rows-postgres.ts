/**
 * The vault's rows in PostgreSQL, shared by every instance (./rows.ts has the discipline). A reservation
 * locks its account's vault row (SELECT ... FOR UPDATE) for its check and insert, so reservations of any
 * number of instances for one account queue on that row and never pass the limit together.
 */
import { isPdqHash, PDQ_MATCH_DISTANCE } from './phash.js';
import { MAX_VAULT_MATCHES, type VaultMatch } from './recognition.js';
import { randomUUID } from 'node:crypto';
import type { PgConnection } from '../store/postgres/connection.js';
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

type Row = ObjectRow;

export class PgVaultRows implements VaultRows {
  readonly #conn: PgConnection;

  constructor(conn: PgConnection) {
    this.#conn = conn;
  }

  async state(accountId: number): Promise<VaultState> {
    const r = (
      await this.#conn.q<{
        enabled: boolean | null;
        limit_bytes: string | null;
        used: string | null;
        wrapped_key: string | null;
        reserved: string;
        objects: string;
      }>(
        `SELECT v.enabled, v.limit_bytes, v.used_bytes AS used, v.wrapped_key,
                (SELECT coalesce(sum(bytes), 0) FROM vault_reservations WHERE account_id = $1) AS reserved,
                (SELECT count(*) FROM vault_objects WHERE account_id = $1) AS objects
           FROM (SELECT 1) one LEFT JOIN vault_accounts v ON v.account_id = $1`,
        [accountId],
      )
    ).rows[0]!;
    return {
      enabled: r.enabled === true,
      limitBytes: r.limit_bytes === null ? null : Number(r.limit_bytes),
      usedBytes: Number(r.used ?? 0),
      reservedBytes: Number(r.reserved),
      objects: Number(r.objects),
      wrappedKey: r.wrapped_key,
    };
  }

  async setEnabled(accountId: number, enabled: boolean): Promise<void> {
    await this.#conn.q('INSERT INTO vault_accounts (account_id, enabled) VALUES ($1, $2) ON CONFLICT (account_id) DO UPDATE SET enabled = excluded.enabled', [
      accountId,
      enabled,
    ]);
  }

  async setLimit(accountId: number, limitBytes: number | null): Promise<void> {
    await this.#conn.q(
      'INSERT INTO vault_accounts (account_id, limit_bytes) VALUES ($1, $2) ON CONFLICT (account_id) DO UPDATE SET limit_bytes = excluded.limit_bytes',
      [accountId, limitBytes],
    );
  }

  async keepKey(accountId: number, wrapped: string): Promise<string> {
    const r = await this.#conn.q<{ wrapped_key: string }>(
      `INSERT INTO vault_accounts (account_id, wrapped_key) VALUES ($1, $2)
       ON CONFLICT (account_id) DO UPDATE SET wrapped_key = coalesce(vault_accounts.wrapped_key, excluded.wrapped_key)
       RETURNING wrapped_key`,
      [accountId, wrapped],
    );
    return r.rows[0]!.wrapped_key;
  }

  async reserve(accountId: number, bytes: number, defaultLimit: number, expiresAt: Date): Promise<ReserveResult> {
    return this.#conn.tx(async (c): Promise<ReserveResult> => {
      const a = (
        await c.query<{ enabled: boolean; limit_bytes: string | null; used_bytes: string }>(
          'SELECT enabled, limit_bytes, used_bytes FROM vault_accounts WHERE account_id = $1 FOR UPDATE',
          [accountId],
        )
      ).rows[0];
      if (!a?.enabled) return { ok: false, reason: 'disabled' };
      const reserved = Number(
        (await c.query<{ n: string }>('SELECT coalesce(sum(bytes), 0) AS n FROM vault_reservations WHERE account_id = $1', [accountId])).rows[0]!.n,
      );
      const used = Number(a.used_bytes);
      const limit = a.limit_bytes === null ? defaultLimit : Number(a.limit_bytes);
      if (used + reserved + bytes > limit) return { ok: false, reason: 'over', usedBytes: used, reservedBytes: reserved, limitBytes: limit };
      const id = randomUUID();
      await c.query('INSERT INTO vault_reservations (id, account_id, bytes, expires_at) VALUES ($1, $2, $3, $4)', [id, accountId, bytes, expiresAt]);
      return { ok: true, id };
    });
  }

  async release(reservationId: string): Promise<void> {
    await this.#conn.q('DELETE FROM vault_reservations WHERE id = $1', [reservationId]);
  }

  async commit(reservationId: string, accountId: number, row: VaultObjectRow): Promise<{ object: VaultObjectRow; created: boolean }> {
    return this.#conn.tx(async (c) => {
      // The account's row first: commits of one account queue on it, so the duplicate check below sees
      // every object committed before.
      await c.query('SELECT 1 FROM vault_accounts WHERE account_id = $1 FOR UPDATE', [accountId]);
      await c.query('DELETE FROM vault_reservations WHERE id = $1', [reservationId]);
      const kept = (await c.query<Row>(`SELECT ${COLUMNS} FROM vault_objects WHERE account_id = $1 AND sha256 = $2`, [accountId, row.sha256])).rows[0];
      if (kept) return { object: toObject(kept), created: false };
      await c.query(`INSERT INTO vault_objects (${COLUMNS}, account_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, [
        row.id,
        row.name,
        row.sha256,
        row.bytes,
        row.mimeType,
        row.createdAt,
        row.kind,
        row.record,
        row.storageKey,
        row.phash,
        accountId,
      ]);
      await c.query('UPDATE vault_accounts SET used_bytes = used_bytes + $1 WHERE account_id = $2', [row.bytes, accountId]);
      return { object: row, created: true };
    });
  }

  async bySha(accountId: number, sha256: string): Promise<VaultObjectRow | undefined> {
    const r = (await this.#conn.q<Row>(`SELECT ${COLUMNS} FROM vault_objects WHERE account_id = $1 AND sha256 = $2`, [accountId, sha256])).rows[0];
    return r && toObject(r);
  }

  async get(accountId: number, id: string): Promise<VaultObjectRow | undefined> {
    const r = (await this.#conn.q<Row>(`SELECT ${COLUMNS} FROM vault_objects WHERE account_id = $1 AND id = $2`, [accountId, id])).rows[0];
    return r && toObject(r);
  }

  async list(accountId: number, q: VaultQuery): Promise<VaultObjectRow[]> {
    const values: unknown[] = [accountId];
    const where = ['account_id = $1'];
    const add = (clause: (n: string) => string, v: unknown): void => {
      values.push(v);
      where.push(clause(`$${values.length}`));
    };
    if (q.name) add((n) => `lower(name) LIKE ${n} ESCAPE '\\'`, likeOf(q.name));
    if (q.q) {
      values.push(likeOf(q.q), q.q);
      where.push(`(lower(name) LIKE $${values.length - 1} ESCAPE '\\' OR sha256 = $${values.length} OR record_id = $${values.length})`);
    }
    if (q.sha256) add((n) => `sha256 = ${n}`, q.sha256);
    if (q.record) add((n) => `record_id = ${n}`, q.record);
    if (q.after) {
      values.push(q.after.createdAt, q.after.id);
      where.push(`(created_at < $${values.length - 1} OR (created_at = $${values.length - 1} AND id < $${values.length}))`);
    }
    values.push(q.limit);
    const sql = `SELECT ${COLUMNS} FROM vault_objects WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $${values.length}`;
    return (await this.#conn.q<Row>(sql, values)).rows.map(toObject);
  }

  async remove(accountId: number, id: string): Promise<VaultObjectRow | undefined> {
    return this.#conn.tx(async (c) => {
      const r = (await c.query<Row>(`DELETE FROM vault_objects WHERE account_id = $1 AND id = $2 RETURNING ${COLUMNS}`, [accountId, id])).rows[0];
      if (!r) return undefined;
      await c.query('UPDATE vault_accounts SET used_bytes = used_bytes - $1 WHERE account_id = $2', [r.bytes, accountId]);
      return toObject(r);
    });
  }

  async removeByStorageKey(keys: string[]): Promise<number> {
    if (keys.length === 0) return 0;
    return this.#conn.tx(async (c) => {
      const gone = (
        await c.query<{ account_id: number; bytes: string }>('DELETE FROM vault_objects WHERE storage_key = ANY($1) RETURNING account_id, bytes', [keys])
      ).rows;
      for (const g of gone) await c.query('UPDATE vault_accounts SET used_bytes = used_bytes - $1 WHERE account_id = $2', [g.bytes, g.account_id]);
      return gone.length;
    });
  }

  async wrappedKeys(): Promise<{ accountId: number; wrapped: string }[]> {
    const r = await this.#conn.q<{ account_id: number; wrapped_key: string }>(
      'SELECT account_id, wrapped_key FROM vault_accounts WHERE wrapped_key IS NOT NULL ORDER BY account_id',
    );
    return r.rows.map((row) => ({ accountId: Number(row.account_id), wrapped: row.wrapped_key }));
  }

  async rewrapKeys(rewrap: (wrapped: string, accountId: number) => string, secret?: { name: string; value: Buffer }): Promise<number> {
    return this.#conn.tx(async (c) => {
      // Durable before the key file is replaced, whatever the store's commit setting (as shared secrets are).
      await c.query('SET LOCAL synchronous_commit = on');
      // Locked, so that a key kept meanwhile (an instance still running) waits for the new master key's rows.
      const rows = (
        await c.query<{ account_id: number; wrapped_key: string }>(
          'SELECT account_id, wrapped_key FROM vault_accounts WHERE wrapped_key IS NOT NULL FOR UPDATE',
        )
      ).rows;
      for (const r of rows) {
        await c.query('UPDATE vault_accounts SET wrapped_key = $1 WHERE account_id = $2', [rewrap(r.wrapped_key, Number(r.account_id)), r.account_id]);
      }
      if (secret) {
        await c.query(
          'INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, now()) ON CONFLICT (name) DO UPDATE SET value = excluded.value, created_at = now()',
          [secret.name, secret.value],
        );
      }
      return rows.length;
    });
  }

  async objectCount(): Promise<number> {
    return Number((await this.#conn.q<{ n: string }>('SELECT count(*) AS n FROM vault_objects')).rows[0]!.n);
  }

  async storageKeys(): Promise<Set<string>> {
    return new Set((await this.#conn.q<{ storage_key: string }>('SELECT storage_key FROM vault_objects')).rows.map((r) => r.storage_key));
  }

  async dropExpired(now: Date): Promise<number> {
    return (await this.#conn.q('DELETE FROM vault_reservations WHERE expires_at <= $1', [now])).rowCount ?? 0;
  }

  /**
   * The distance in SQL (bit_count of the XOR of bit(256) casts): 0.34-0.43x the time of fetching the
   * hashes and comparing them in JS at 10,000-100,000 objects (bench/recognition-store.bench.ts).
   */
  async vaultMatches(accountId: number, hash: string): Promise<VaultMatch[]> {
    if (!isPdqHash(hash)) throw new RangeError('vaultMatches: not a PDQ hash (64 hex digits)');
    const r = await this.#conn.q<VaultMatch>(
      `SELECT id, name, d AS distance, record_id AS record FROM (
         SELECT id, name, record_id, bit_count(('x' || phash)::bit(256) # ('x' || $2)::bit(256))::int AS d
         FROM vault_objects WHERE account_id = $1 AND kind = 'original' AND phash ~ '^[0-9a-f]{64}$') s
       WHERE d <= $3 ORDER BY d, id COLLATE "C" LIMIT $4`,
      [accountId, hash, PDQ_MATCH_DISTANCE, MAX_VAULT_MATCHES],
    );
    return r.rows;
  }
}
