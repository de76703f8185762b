/**
 * The dashboard's batches and records in PostgreSQL (schema version 2, ./schema.ts), shared by every
 * instance. Times are ISO-8601 UTC text, as in the SQLite engine, so both sort and page the same way and
 * a record's `markedAt` comes back exactly as it was written. The slot counter is one UPDATE: under Read
 * Committed a row another instance just changed is re-checked against `used < size`, so no number of
 * instances can put a 26th image in a batch.
 */
import { randomUUID } from 'node:crypto';
import type { Query } from './connection.js';
import { BATCH_COLUMNS, BATCH_LIFETIME_MS, RECORD_COLUMNS, checkBatchSize, searchTerms, toBatch, recordValues, toRecord } from '../records.js';
import type { BatchRow, RecordRow, Batch, BatchSpec, DashboardRecords, MarkRecord, RecordQuery, SlotResult } from '../records.js';

export class PgDashboardRecords implements DashboardRecords {
  readonly #q: Query;
  /** `fold(x)`: SQL that lowers text x as foldCase does (../records.ts). */
  readonly #fold: (x: string) => string;

  /** `collation`: the one searchFold found. */
  constructor(query: Query, collation: string) {
    this.#q = query;
    this.#fold = (x) => `lower(${x} COLLATE "${collation}")`;
  }

  /**
   * The collation whose lower() lowers every letter as JavaScript does: ICU's root locale where the server
   * has ICU (every packaged PostgreSQL does), else the database's default (under "C" that is ASCII only).
   */
  static async searchFold(query: Query): Promise<string> {
    const r = await query<{ ok: boolean }>(`SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu') AS ok`);
    return r.rows[0]?.ok ? 'und-x-icu' : 'default';
  }

  async keyPrefix(keyId: number): Promise<string> {
    const r = await this.#q<{ prefix: string }>('SELECT prefix FROM api_keys WHERE id = $1', [keyId], 'dash_key_prefix');
    return r.rows[0]?.prefix ?? '';
  }

  async openBatch(accountId: number, keyPrefix: string, spec: BatchSpec, now: Date = new Date()): Promise<Batch> {
    checkBatchSize(spec.size);
    const id = randomUUID();
    const createdAt = now.toISOString();
    const { tdmrep = false, contentCredentials = false } = spec;
    await this.#q(
      'INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, tdmrep, content_credentials, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      [id, accountId, keyPrefix, spec.size, spec.provenance, spec.fingerprint, tdmrep, contentCredentials, createdAt],
      'dash_open_batch',
    );
    return { id, size: spec.size, provenance: spec.provenance, fingerprint: spec.fingerprint, tdmrep, contentCredentials, used: 0, keyPrefix, createdAt };
  }

  async batch(accountId: number, id: string): Promise<Batch | undefined> {
    const r = await this.#q<BatchRow>(`SELECT ${BATCH_COLUMNS} FROM dashboard_batches WHERE id = $1 AND account_id = $2`, [id, accountId], 'dash_batch');
    return r.rows[0] && toBatch(r.rows[0]);
  }

  async takeSlot(accountId: number, batchId: string, now: Date = new Date()): Promise<SlotResult> {
    const r = await this.#q<BatchRow>(
      `UPDATE dashboard_batches SET used = used + 1
        WHERE id = $1 AND account_id = $2 AND used < size AND created_at >= $3
        RETURNING ${BATCH_COLUMNS}`,
      [batchId, accountId, new Date(now.getTime() - BATCH_LIFETIME_MS).toISOString()],
      'dash_take_slot',
    );
    if (r.rows[0]) return { ok: true, batch: toBatch(r.rows[0]) };
    const batch = await this.batch(accountId, batchId);
    if (!batch) return { ok: false, reason: 'unknown' };
    return { ok: false, reason: batch.used >= batch.size ? 'full' : 'expired' };
  }

  async giveSlot(batchId: string): Promise<void> {
    await this.#q('UPDATE dashboard_batches SET used = used - 1 WHERE id = $1 AND used > 0', [batchId], 'dash_give_slot');
  }

  async addRecord(accountId: number, r: MarkRecord): Promise<void> {
    await this.#q(
      `INSERT INTO dashboard_records (id, account_id, ${RECORD_COLUMNS.slice(4)}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      recordValues(accountId, r),
      'dash_add_record',
    );
  }

  async removeRecord(id: string): Promise<void> {
    await this.#q('DELETE FROM dashboard_records WHERE id = $1', [id], 'dash_remove_record');
  }

  async records(accountId: number, query: RecordQuery = {}): Promise<MarkRecord[]> {
    const t = searchTerms(query);
    const r = await this.#q<RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records
        WHERE account_id = $1 AND marked_at < $2 AND (marked_at, id COLLATE "C") < ($7::text, $8::text COLLATE "C")
          AND ($3::text IS NULL OR ${this.#fold('original_name')} LIKE $3 ESCAPE '\\' OR ${this.#fold('produced_name')} LIKE $3 ESCAPE '\\'
               OR ($4::text IS NOT NULL AND sha256 >= $4 AND sha256 < $5))
        ORDER BY marked_at DESC, id COLLATE "C" DESC LIMIT $6`,
      [accountId, query.before ?? '9999', t.like, t.lo, t.hi, t.limit, query.after?.markedAt ?? '9999', query.after?.id ?? ''],
      'dash_records',
    );
    return r.rows.map(toRecord);
  }

  async batchRecords(accountId: number, batchId: string): Promise<MarkRecord[]> {
    const r = await this.#q<RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records WHERE batch_id = $1 AND account_id = $2 ORDER BY marked_at, id COLLATE "C"`,
      [batchId, accountId],
      'dash_batch_records',
    );
    return r.rows.map(toRecord);
  }

  async recordBySha256(accountId: number, sha256: string): Promise<MarkRecord | undefined> {
    const r = await this.#q<RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records WHERE sha256 = $1 AND account_id = $2 ORDER BY marked_at DESC, id COLLATE "C" DESC LIMIT 1`,
      [sha256, accountId],
      'dash_record_by_sha',
    );
    return r.rows[0] && toRecord(r.rows[0]);
  }
}
