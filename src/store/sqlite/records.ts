/**
 * The dashboard's batches and records in the SQLite file (schema version 3, src/store/db.ts). Statements
 * are prepared once; each call is one statement.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../db.js';
import { BATCH_COLUMNS, BATCH_LIFETIME_MS, RECORD_COLUMNS, checkBatchSize, foldCase, searchTerms, toBatch, recordValues, toRecord } from '../records.js';
import type { BatchRow, RecordRow, Batch, BatchSpec, DashboardRecords, MarkRecord, RecordQuery, SlotResult } from '../records.js';

/**
 * Does name column `c` match the lowered pattern :like? SQLite's own LIKE, which ignores the case of ASCII
 * letters only, decides alone for an ASCII name (for one it is exactly the lowered match); a name with any
 * other character (more bytes than characters) is lowered by the registered function, as foldCase does.
 * The call into JavaScript per row is what this spares the common case: a search over 200,000 ASCII names
 * took 1.3-2.2x the time of SQLite's LIKE alone this way, and 3-5x with every name lowered.
 */
const matches = (c: string) => `(${c} LIKE :like ESCAPE '\\' OR (octet_length(${c}) <> length(${c}) AND optmark_fold(${c}) LIKE :like ESCAPE '\\'))`;

export class SqliteDashboardRecords implements DashboardRecords {
  readonly #keyPrefix;
  readonly #insertBatch;
  readonly #batch;
  readonly #takeSlot;
  readonly #giveSlot;
  readonly #insertRecord;
  readonly #deleteRecord;
  readonly #search;
  readonly #ofBatch;
  readonly #bySha;

  constructor(db: Db) {
    // SQLite's LIKE ignores the case of ASCII letters only: names are lowered as the search term is.
    db.function('optmark_fold', { deterministic: true }, (s: unknown) => (typeof s === 'string' ? foldCase(s) : s));
    this.#keyPrefix = db.prepare<[number], { prefix: string }>('SELECT prefix FROM api_keys WHERE id = ?');
    this.#insertBatch = db.prepare<[string, number, string, number, number, number, number, number, string]>(
      'INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, tdmrep, content_credentials, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.#batch = db.prepare<[string, number], BatchRow>(`SELECT ${BATCH_COLUMNS} FROM dashboard_batches WHERE id = ? AND account_id = ?`);
    // One statement: the slot is taken only while the batch has room and is young enough, so no number
    // of concurrent uploads (from any instance on this database) can put a 26th image in a batch.
    this.#takeSlot = db.prepare<[string, number, string], BatchRow>(
      `UPDATE dashboard_batches SET used = used + 1
        WHERE id = ? AND account_id = ? AND used < size AND created_at >= ?
        RETURNING ${BATCH_COLUMNS}`,
    );
    this.#giveSlot = db.prepare<[string]>('UPDATE dashboard_batches SET used = used - 1 WHERE id = ? AND used > 0');
    this.#insertRecord = db.prepare<unknown[]>(
      `INSERT INTO dashboard_records (${RECORD_COLUMNS.replace('id, ', 'id, account_id, ')}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#deleteRecord = db.prepare<[string]>('DELETE FROM dashboard_records WHERE id = ?');
    this.#search = db.prepare<
      { account: number; before: string; at: string; id: string; like: string | null; lo: string | null; hi: string | null; limit: number },
      RecordRow
    >(
      // (marked_at, id) < (:at, :id): the page after the cursor record in the ORDER BY below, so
      // records of one millisecond are split across pages by id, never skipped or repeated.
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records
        WHERE account_id = :account AND marked_at < :before AND (marked_at, id) < (:at, :id)
          AND (:like IS NULL OR ${matches('original_name')} OR ${matches('produced_name')}
               OR (:lo IS NOT NULL AND sha256 >= :lo AND sha256 < :hi))
        ORDER BY marked_at DESC, id DESC LIMIT :limit`,
    );
    this.#ofBatch = db.prepare<[string, number], RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records WHERE batch_id = ? AND account_id = ? ORDER BY marked_at, id`,
    );
    this.#bySha = db.prepare<[string, number], RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records WHERE sha256 = ? AND account_id = ? ORDER BY marked_at DESC, id DESC LIMIT 1`,
    );
  }

  /** The display prefix of an API key (what records show of the key that marked an image). */
  async keyPrefix(keyId: number): Promise<string> {
    return this.#keyPrefix.get(keyId)?.prefix ?? '';
  }

  /** Opens a batch for `size` images (1..25) with the layers every image in it gets. */
  async openBatch(accountId: number, keyPrefix: string, spec: BatchSpec, now: Date = new Date()): Promise<Batch> {
    checkBatchSize(spec.size);
    const id = randomUUID();
    const createdAt = now.toISOString();
    const { tdmrep = false, contentCredentials = false } = spec;
    this.#insertBatch.run(
      id,
      accountId,
      keyPrefix,
      spec.size,
      spec.provenance ? 1 : 0,
      spec.fingerprint ? 1 : 0,
      tdmrep ? 1 : 0,
      contentCredentials ? 1 : 0,
      createdAt,
    );
    return { id, size: spec.size, provenance: spec.provenance, fingerprint: spec.fingerprint, tdmrep, contentCredentials, used: 0, keyPrefix, createdAt };
  }

  /** One of the account's batches, or undefined. */
  async batch(accountId: number, id: string): Promise<Batch | undefined> {
    const row = this.#batch.get(id, accountId);
    return row && toBatch(row);
  }

  /** Takes one image slot of the batch (give it back with giveSlot when the image fails). */
  async takeSlot(accountId: number, batchId: string, now: Date = new Date()): Promise<SlotResult> {
    const [row] = this.#takeSlot.all(batchId, accountId, new Date(now.getTime() - BATCH_LIFETIME_MS).toISOString());
    if (row) return { ok: true, batch: toBatch(row) };
    const batch = await this.batch(accountId, batchId);
    if (!batch) return { ok: false, reason: 'unknown' };
    return { ok: false, reason: batch.used >= batch.size ? 'full' : 'expired' };
  }

  async giveSlot(batchId: string): Promise<void> {
    this.#giveSlot.run(batchId);
  }

  /** Stores the record of one marked image. */
  async addRecord(accountId: number, record: MarkRecord): Promise<void> {
    this.#insertRecord.run(...recordValues(accountId, record));
  }

  /** Removes a record whose image never reached its client. */
  async removeRecord(id: string): Promise<void> {
    this.#deleteRecord.run(id);
  }

  /** The account's records, newest first, optionally filtered by name or SHA-256 prefix. */
  async records(accountId: number, query: RecordQuery = {}): Promise<MarkRecord[]> {
    const t = searchTerms(query);
    return this.#search
      .all({
        account: accountId,
        before: query.before ?? '9999',
        at: query.after?.markedAt ?? '9999',
        id: query.after?.id ?? '',
        like: t.like,
        lo: t.lo,
        hi: t.hi,
        limit: t.limit,
      })
      .map(toRecord);
  }

  /** Every record of one batch, in the order they were marked. */
  async batchRecords(accountId: number, batchId: string): Promise<MarkRecord[]> {
    return this.#ofBatch.all(batchId, accountId).map(toRecord);
  }

  /** The newest record of the account whose produced bytes have this SHA-256, if any. */
  async recordBySha256(accountId: number, sha256: string): Promise<MarkRecord | undefined> {
    const row = this.#bySha.get(sha256, accountId);
    return row && toRecord(row);
  }
}
