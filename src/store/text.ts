/**
 * The store's one text check: every text a caller hands a store (the dashboard's search, times, cursor
 * and ids, a record's names, an Idempotency-Key, an account name) passes here first, the same for both
 * engines. PostgreSQL refuses a NUL in text (SQLSTATE 22021, which was a 500) where SQLite keeps it; both
 * silently store a replacement character for a lone surrogate; and a field has a length. Each of these is
 * refused with InvalidTextError (400 `invalid_text`) before any statement runs.
 *
 * Bytes that are not UTF-8 become replacement characters when a query string is decoded, before any
 * store sees them: `checkQueryEncoding` is the part of this check that the HTTP edge runs on the raw
 * query, so that such bytes are refused too instead of searched for.
 */
import { isUtf8 } from 'node:buffer';
import { InvalidTextError } from '../errors.js';
import { StoreError } from './errors.js';
import type { Batch, BatchSpec, DashboardRecords, MarkRecord, RecordQuery, SlotResult } from './records.js';

/** Characters at most, per kind of field. */
export const TEXT_LIMITS = {
  /** The dashboard's search term. */
  search: 256,
  /** ISO times (a record's time, `before`, a cursor's time). */
  time: 64,
  /** Ids: batches, records, SHA-256 digests, key prefixes. */
  id: 128,
  /** File names, media types, layer lists, key ids. */
  name: 1024,
} as const;

// A UTF-16 code unit of a surrogate pair that has no partner.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** `value` if both engines can keep it exactly; else InvalidTextError naming `field`. */
export function checkText(field: string, value: string, max: number): string {
  if (typeof value !== 'string') throw new InvalidTextError(field, 'must be text');
  if (value.includes('\u0000')) throw new InvalidTextError(field, 'holds a NUL character');
  if (LONE_SURROGATE.test(value)) throw new InvalidTextError(field, 'is not valid UTF-8 (it holds a lone surrogate)');
  if (value.length > max) throw new InvalidTextError(field, `is longer than ${max} characters`);
  return value;
}

/** The same for an optional value. */
export function checkOptional(field: string, value: string | undefined, max: number): string | undefined {
  return value === undefined ? undefined : checkText(field, value, max);
}

/**
 * Refuses a raw (still percent-encoded) query string any of whose parameter values decodes to bytes
 * that are not UTF-8 (URLSearchParams would turn them into replacement characters).
 */
export function checkQueryEncoding(raw: string): void {
  // Plain ASCII with no escapes is UTF-8 already (the common case: no decoding).
  if (!raw.includes('%') && Buffer.byteLength(raw) === raw.length) return;
  for (const part of raw.split('&')) {
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq);
    for (const piece of eq < 0 ? [part] : [name, part.slice(eq + 1)]) {
      if (!isUtf8(percentDecoded(piece.replace(/\+/g, ' ')))) throw new InvalidTextError(safeName(name), 'is not valid UTF-8');
    }
  }
}

/** The bytes of a percent-encoded piece, as WHATWG URL decoding takes them (a '%' not followed by two hex digits stays). */
function percentDecoded(piece: string): Buffer {
  const bytes: number[] = [];
  const raw = Buffer.from(piece, 'utf8');
  for (let i = 0; i < raw.length; i++) {
    const hex = raw[i] === 0x25 && i + 2 < raw.length ? raw.subarray(i + 1, i + 3).toString('latin1') : '';
    if (/^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else bytes.push(raw[i]!);
  }
  return Buffer.from(bytes);
}

/** A parameter name fit to echo in a message. */
function safeName(name: string): string {
  let decoded = name;
  try {
    decoded = decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    // not UTF-8 itself: shown as sent
  }
  return decoded.replace(/[^\x20-\x7e]/g, '?').slice(0, 64);
}

/** The dashboard's search as a store may run it: its search term, times and cursor checked. */
export function checkRecordQuery(query: RecordQuery): RecordQuery {
  checkOptional('q', query.q, TEXT_LIMITS.search);
  checkOptional('before', query.before, TEXT_LIMITS.time);
  if (query.after) {
    checkText('cursor', query.after.markedAt, TEXT_LIMITS.time);
    checkText('cursor', query.after.id, TEXT_LIMITS.id);
  }
  return query;
}

/** A record's texts checked before it is stored. */
export function checkRecord(r: MarkRecord): MarkRecord {
  for (const [field, value, max] of [
    ['id', r.id, TEXT_LIMITS.id],
    ['batchId', r.batchId, TEXT_LIMITS.id],
    ['sha256', r.sha256, TEXT_LIMITS.id],
    ['originalName', r.originalName, TEXT_LIMITS.name],
    ['producedName', r.producedName, TEXT_LIMITS.name],
    ['mimeType', r.mimeType, TEXT_LIMITS.name],
    ['layers', r.layers.join(','), TEXT_LIMITS.name],
    ['keyPrefix', r.keyPrefix, TEXT_LIMITS.id],
    ['markedAt', r.markedAt, TEXT_LIMITS.time],
  ] as const)
    checkText(field, value, max);
  if (r.provenanceKeyId !== null) checkText('provenanceKeyId', r.provenanceKeyId, TEXT_LIMITS.name);
  return r;
}

/** An engine's dashboard records behind the text check: what both engines' callers go through. */
export class CheckedDashboardRecords implements DashboardRecords {
  readonly #inner: DashboardRecords;

  constructor(inner: DashboardRecords) {
    this.#inner = inner;
  }

  keyPrefix(keyId: number): Promise<string> {
    return this.#inner.keyPrefix(keyId);
  }

  async openBatch(accountId: number, keyPrefix: string, spec: BatchSpec, now?: Date): Promise<Batch> {
    return this.#inner.openBatch(accountId, checkText('keyPrefix', keyPrefix, TEXT_LIMITS.id), spec, now);
  }

  async batch(accountId: number, id: string): Promise<Batch | undefined> {
    return this.#inner.batch(accountId, checkText('id', id, TEXT_LIMITS.id));
  }

  async takeSlot(accountId: number, batchId: string, now?: Date): Promise<SlotResult> {
    return this.#inner.takeSlot(accountId, checkText('batchId', batchId, TEXT_LIMITS.id), now);
  }

  async giveSlot(batchId: string): Promise<void> {
    return this.#inner.giveSlot(checkText('batchId', batchId, TEXT_LIMITS.id));
  }

  async addRecord(accountId: number, record: MarkRecord): Promise<void> {
    return this.#inner.addRecord(accountId, checkRecord(record));
  }

  async removeRecord(id: string): Promise<void> {
    return this.#inner.removeRecord(checkText('id', id, TEXT_LIMITS.id));
  }

  async records(accountId: number, query?: RecordQuery): Promise<MarkRecord[]> {
    return this.#inner.records(accountId, query && checkRecordQuery(query));
  }

  async batchRecords(accountId: number, batchId: string): Promise<MarkRecord[]> {
    return this.#inner.batchRecords(accountId, checkText('batchId', batchId, TEXT_LIMITS.id));
  }

  async recordBySha256(accountId: number, sha256: string): Promise<MarkRecord | undefined> {
    return this.#inner.recordBySha256(accountId, checkText('sha256', sha256, TEXT_LIMITS.id));
  }
}

/** A reservation's Idempotency-Key checked (the HTTP edge allows printable ASCII only; other callers too). */
export function checkIdempotency<T extends { key: string } | undefined>(idempotency: T): T {
  if (idempotency) checkText('Idempotency-Key', idempotency.key, TEXT_LIMITS.name);
  return idempotency;
}

/** An account name or key prefix an operator typed, checked before it is looked up (StoreError `invalid_text`: a command's one-line refusal). */
export function checkName(field: string, value: string): string {
  try {
    return checkText(field, value, TEXT_LIMITS.name);
  } catch (err) {
    throw new StoreError('invalid_text', (err as Error).message);
  }
}
