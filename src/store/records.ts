/**
 * The dashboard's part of the store: batches (a slot counter that caps a batch at its declared size, at
 * most 25 images, atomically across connections and instances) and the dated records of each image the
 * dashboard marked (SHA-256 of the produced bytes, original name, layers, time, key prefix). Records
 * belong to an account; every read is scoped to one. Both engines implement it (sqlite/records.ts,
 * postgres/records.ts).
 */

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
  tdmrep: boolean;
  contentCredentials: boolean;
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

/** What verify adds (`record`) when the uploaded bytes are an image the dashboard marked. */
export type RecordMatch = Omit<MarkRecord, 'sha256' | 'mimeType' | 'bytes'>;

export type SlotResult = { ok: true; batch: Batch } | { ok: false; reason: 'unknown' | 'full' | 'expired' };

export interface RecordQuery {
  /** Part of an original or produced file name, or the start of a SHA-256 (hex, at least 4 characters). */
  q?: string | undefined;
  /** Only records marked strictly before this ISO time. */
  before?: string | undefined;
  /**
   * Only records after this one in the newest-first order (the previous page's last record): a
   * (time, id) cursor, so records marked in the same millisecond are neither skipped nor repeated.
   */
  after?: RecordCursor | undefined;
  limit?: number | undefined;
}

/** A place in the newest-first order of records: the last record of the page before. */
export interface RecordCursor {
  markedAt: string;
  id: string;
}

export interface BatchSpec {
  size: number;
  provenance: boolean;
  fingerprint: boolean;
  /** The signal layers (docs/signals.md); absent: off. */
  tdmrep?: boolean;
  contentCredentials?: boolean;
}

export interface DashboardRecords {
  /** The display prefix of an API key (what records show of the key that marked an image). */
  keyPrefix(keyId: number): Promise<string>;
  /** Opens a batch for `size` images (1..25) with the layers every image in it gets. */
  openBatch(accountId: number, keyPrefix: string, spec: BatchSpec, now?: Date): Promise<Batch>;
  /** One of the account's batches, or undefined. */
  batch(accountId: number, id: string): Promise<Batch | undefined>;
  /** Takes one image slot of the batch in one statement (give it back with giveSlot when the image fails). */
  takeSlot(accountId: number, batchId: string, now?: Date): Promise<SlotResult>;
  giveSlot(batchId: string): Promise<void>;
  /** Stores the record of one marked image. */
  addRecord(accountId: number, record: MarkRecord): Promise<void>;
  /** Removes a record whose image never reached its client. */
  removeRecord(id: string): Promise<void>;
  /** The account's records, newest first, optionally filtered by name or SHA-256 prefix. */
  records(accountId: number, query?: RecordQuery): Promise<MarkRecord[]>;
  /** Every record of one batch, in the order they were marked. */
  batchRecords(accountId: number, batchId: string): Promise<MarkRecord[]>;
  /** The newest record of the account whose produced bytes have this SHA-256, if any. */
  recordBySha256(accountId: number, sha256: string): Promise<MarkRecord | undefined>;
}

const HEX = /^[0-9a-f]{4,64}$/;

/** How the search ignores case: Unicode lower case (the SQLite engine registers it as a function; PostgreSQL's ICU lower() agrees). */
export function foldCase(text: string): string {
  return text.toLowerCase();
}

/** The search's parameters, the same for both engines: a LIKE pattern for names, a range for a SHA-256 prefix. */
export function searchTerms(query: RecordQuery): { like: string | null; lo: string | null; hi: string | null; limit: number } {
  const q = query.q?.trim() ?? '';
  const hex = q.toLowerCase();
  const isHex = HEX.test(hex);
  return {
    // A backslash is the ESCAPE character of both engines' LIKE: a '%' or '_' typed is a character, not a
    // wildcard. Lowered here, and each engine lowers the names it compares (every letter, not only ASCII).
    like: q ? `%${foldCase(q).replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null,
    lo: isHex ? hex : null,
    // '~' sorts after every hex digit: [hex, hex~) is "starts with hex" and uses the index.
    hi: isHex ? `${hex}~` : null,
    limit: Math.max(1, Math.min(MAX_PAGE, Math.floor(query.limit ?? 100))),
  };
}

export function checkBatchSize(size: number): void {
  if (!Number.isSafeInteger(size) || size < 1 || size > MAX_BATCH_SIZE) throw new RangeError(`batch size must be 1..${MAX_BATCH_SIZE}`);
}

// ── the rows both engines read (SQLite gives 0/1 for the flags, PostgreSQL booleans and int8 as text) ──

export interface BatchRow {
  id: string;
  size: number;
  provenance: number | boolean;
  fingerprint: number | boolean;
  /** Absent in a snapshot of a store from before the signal layers. */
  tdmrep?: number | boolean;
  content_credentials?: number | boolean;
  used: number;
  key_prefix: string;
  created_at: string;
}

export interface RecordRow {
  id: string;
  batch_id: string;
  sha256: string;
  original_name: string;
  produced_name: string;
  mime_type: string;
  bytes: number | string;
  layers: string;
  key_prefix: string;
  provenance_key_id: string | null;
  marked_at: string;
}

export const RECORD_COLUMNS = 'id, batch_id, sha256, original_name, produced_name, mime_type, bytes, layers, key_prefix, provenance_key_id, marked_at';
export const BATCH_COLUMNS = 'id, size, provenance, fingerprint, tdmrep, content_credentials, used, key_prefix, created_at';

export function toBatch(row: BatchRow): Batch {
  return {
    id: row.id,
    size: Number(row.size),
    provenance: Boolean(row.provenance),
    fingerprint: Boolean(row.fingerprint),
    tdmrep: Boolean(row.tdmrep),
    contentCredentials: Boolean(row.content_credentials),
    used: Number(row.used),
    keyPrefix: row.key_prefix,
    createdAt: row.created_at,
  };
}

export function toRecord(row: RecordRow): MarkRecord {
  return {
    id: row.id,
    batchId: row.batch_id,
    sha256: row.sha256,
    originalName: row.original_name,
    producedName: row.produced_name,
    mimeType: row.mime_type,
    bytes: Number(row.bytes),
    layers: row.layers ? row.layers.split(',') : [],
    keyPrefix: row.key_prefix,
    provenanceKeyId: row.provenance_key_id,
    markedAt: row.marked_at,
  };
}

/** A record's values in the order of `id, account_id, ` + RECORD_COLUMNS after its id (both engines' INSERT). */
export function recordValues(accountId: number, r: MarkRecord): unknown[] {
  return [
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
  ];
}
