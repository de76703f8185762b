/**
 * The dashboard's part of the store: batches (a slot counter that caps a batch at its declared size, at
 * most 25 images, atomically against every other connection) and the dated records of each image the
 * dashboard marked (SHA-256 of the produced bytes, original name, layers, time, key prefix). Records
 * belong to an account; every read is scoped to one.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from './db.js';

/** The most images one dashboard batch may hold (the contract's browser batch size). */
export const MAX_BATCH_SIZE = 25;
/** A batch takes new images for this long after it was opened. */
export const BATCH_LIFETIME_MS = 24 * 3600 * 1000;
/** The most records one page of history returns. */
export const MAX_PAGE = 500;

export interface Batch {
  id: string;
  size: number;
  provenance: boolean;
  fingerprint: boolean;
  /** Slots taken: images marked plus images in progress. */
  used: number;
  keyPrefix: string;
  createdAt: string;
}

export interface MarkRecord {
  id: string;
  batchId: string;
  sha256: string;
  originalName: string;
  producedName: string;
  mimeType: string;
  bytes: number;
  layers: string[];
  keyPrefix: string;
  provenanceKeyId: string | null;
  markedAt: string;
}

export type SlotResult = { ok: true; batch: Batch } | { ok: false; reason: 'unknown' | 'full' | 'expired' };

export interface RecordQuery {
  /** Part of an original or produced file name, or the start of a SHA-256 (hex, at least 4 characters). */
  q?: string | undefined;
  /** Only records marked before this ISO time (the previous page's last `markedAt`). */
  before?: string | undefined;
  limit?: number | undefined;
}

interface BatchRow {
  id: string;
  size: number;
  provenance: number;
  fingerprint: number;
  used: number;
  key_prefix: string;
  created_at: string;
}

interface RecordRow {
  id: string;
  batch_id: string;
  sha256: string;
  original_name: string;
  produced_name: string;
  mime_type: string;
  bytes: number;
  layers: string;
  key_prefix: string;
  provenance_key_id: string | null;
  marked_at: string;
}

const RECORD_COLUMNS = 'id, batch_id, sha256, original_name, produced_name, mime_type, bytes, layers, key_prefix, provenance_key_id, marked_at';
const BATCH_COLUMNS = 'id, size, provenance, fingerprint, used, key_prefix, created_at';
const HEX = /^[0-9a-f]{4,64}$/;

/** Escapes LIKE's wildcards ('\' is the ESCAPE character below). */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export class DashboardRecords {
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
    this.#keyPrefix = db.prepare<[number], { prefix: string }>('SELECT prefix FROM api_keys WHERE id = ?');
    this.#insertBatch = db.prepare<[string, number, string, number, number, number, string]>(
      'INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
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
    this.#insertRecord = db.prepare<[string, number, string, string, string, string, string, number, string, string, string | null, string]>(
      `INSERT INTO dashboard_records (${RECORD_COLUMNS.replace('id, ', 'id, account_id, ')}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#deleteRecord = db.prepare<[string]>('DELETE FROM dashboard_records WHERE id = ?');
    this.#search = db.prepare<{ account: number; before: string; like: string | null; lo: string | null; hi: string | null; limit: number }, RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records
        WHERE account_id = :account AND marked_at < :before
          AND (:like IS NULL OR original_name LIKE :like ESCAPE '\\' OR produced_name LIKE :like ESCAPE '\\'
               OR (:lo IS NOT NULL AND sha256 >= :lo AND sha256 < :hi))
        ORDER BY marked_at DESC, id DESC LIMIT :limit`,
    );
    this.#ofBatch = db.prepare<[string, number], RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records WHERE batch_id = ? AND account_id = ? ORDER BY marked_at, id`,
    );
    this.#bySha = db.prepare<[string, number], RecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM dashboard_records WHERE sha256 = ? AND account_id = ? ORDER BY marked_at DESC LIMIT 1`,
    );
  }

  /** The display prefix of an API key (what records show of the key that marked an image). */
  keyPrefix(keyId: number): string {
    return this.#keyPrefix.get(keyId)?.prefix ?? '';
  }

  /** Opens a batch for `size` images (1..25) with the layers every image in it gets. */
  openBatch(accountId: number, keyPrefix: string, spec: { size: number; provenance: boolean; fingerprint: boolean }, now: Date = new Date()): Batch {
    if (!Number.isSafeInteger(spec.size) || spec.size < 1 || spec.size > MAX_BATCH_SIZE) throw new RangeError(`batch size must be 1..${MAX_BATCH_SIZE}`);
    const id = randomUUID();
    const createdAt = now.toISOString();
    this.#insertBatch.run(id, accountId, keyPrefix, spec.size, spec.provenance ? 1 : 0, spec.fingerprint ? 1 : 0, createdAt);
    return { id, size: spec.size, provenance: spec.provenance, fingerprint: spec.fingerprint, used: 0, keyPrefix, createdAt };
  }

  /** One of the account's batches, or undefined. */
  batch(accountId: number, id: string): Batch | undefined {
    const row = this.#batch.get(id, accountId);
    return row && toBatch(row);
  }

  /** Takes one image slot of the batch (give it back with giveSlot when the image fails). */
  takeSlot(accountId: number, batchId: string, now: Date = new Date()): SlotResult {
    const [row] = this.#takeSlot.all(batchId, accountId, new Date(now.getTime() - BATCH_LIFETIME_MS).toISOString());
    if (row) return { ok: true, batch: toBatch(row) };
    const batch = this.batch(accountId, batchId);
    if (!batch) return { ok: false, reason: 'unknown' };
    return { ok: false, reason: batch.used >= batch.size ? 'full' : 'expired' };
  }

  giveSlot(batchId: string): void {
    this.#giveSlot.run(batchId);
  }

  /** Stores the record of one marked image. */
  addRecord(accountId: number, record: MarkRecord): void {
    const r = record;
    this.#insertRecord.run(
      r.id,
      accountId,
      r.batchId,
      r.sha256,
      r.originalName,
      r.producedName,
      r.mimeType,
      r.bytes,
      r.layers.join(','),
      r.keyPrefix,
      r.provenanceKeyId,
      r.markedAt,
    );
  }

  /** Removes a record whose image never reached its client. */
  removeRecord(id: string): void {
    this.#deleteRecord.run(id);
  }

  /** The account's records, newest first, optionally filtered by name or SHA-256 prefix. */
  records(accountId: number, query: RecordQuery = {}): MarkRecord[] {
    const q = query.q?.trim() ?? '';
    const hex = q.toLowerCase();
    const limit = Math.max(1, Math.min(MAX_PAGE, Math.floor(query.limit ?? 100)));
    return this.#search
      .all({
        account: accountId,
        before: query.before ?? '9999',
        like: q ? likePattern(q) : null,
        lo: HEX.test(hex) ? hex : null,
        hi: HEX.test(hex) ? `${hex}~` : null,
        limit,
      })
      .map(toRecord);
  }

  /** Every record of one batch, in the order they were marked. */
  batchRecords(accountId: number, batchId: string): MarkRecord[] {
    return this.#ofBatch.all(batchId, accountId).map(toRecord);
  }

  /** The newest record of the account whose produced bytes have this SHA-256, if any. */
  recordBySha256(accountId: number, sha256: string): MarkRecord | undefined {
    const row = this.#bySha.get(sha256, accountId);
    return row && toRecord(row);
  }
}

function toBatch(row: BatchRow): Batch {
  return {
    id: row.id,
    size: row.size,
    provenance: row.provenance === 1,
    fingerprint: row.fingerprint === 1,
    used: row.used,
    keyPrefix: row.key_prefix,
    createdAt: row.created_at,
  };
}

function toRecord(row: RecordRow): MarkRecord {
  return {
    id: row.id,
    batchId: row.batch_id,
    sha256: row.sha256,
    originalName: row.original_name,
    producedName: row.produced_name,
    mimeType: row.mime_type,
    bytes: row.bytes,
    layers: row.layers ? row.layers.split(',') : [],
    keyPrefix: row.key_prefix,
    provenanceKeyId: row.provenance_key_id,
    markedAt: row.marked_at,
  };
}
