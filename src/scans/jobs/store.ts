/**
 * A scan's durable state (docs/scans.md "Jobs"): the scan, its chunks (chunk k covers candidate indices
 * [k*CHUNK_SIZE, (k+1)*CHUNK_SIZE), taken by one instance at a time under a lease), its items (one row per
 * (scan, index): a chunk taken over after a crash cannot report an image twice) and the daily counters
 * (per account per UTC day, and the service's). One interface, two engines: ./store-sqlite.ts (one
 * process, transactions) and ./store-postgres.ts (many instances, row locks and FOR UPDATE SKIP LOCKED).
 */
import { emptyCounts } from '../analyse.js';
import type { ScanCounts, ScanItem, ScanLimits } from '../types.js';
import type { SourceType } from '../sources/index.js';

export const SCAN_STATES = ['queued', 'paused', 'running', 'done', 'failed', 'cancelled'] as const;
export type ScanState = (typeof SCAN_STATES)[number];
export const FINISHED_STATES: readonly ScanState[] = ['done', 'failed', 'cancelled'];

/** Candidates per chunk. */
export const CHUNK_SIZE = 25;

/** What a scan's `options` may set (each limit only lower than the server's setting). */
export interface ScanOptions extends Partial<ScanLimits> {
  type?: SourceType;
  followLinks?: boolean;
}

export interface ScanRow {
  id: string;
  accountId: number;
  source: string;
  options: ScanOptions;
  state: ScanState;
  /** Epoch milliseconds. */
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /** Items written. */
  progress: number;
  counts: ScanCounts;
  error: { code: string; message: string } | null;
}

/**
 * A `scans` row as either engine returns it: JSON columns as text (`J` string, SQLite) or parsed
 * (PostgreSQL's jsonb), timestamps as numbers or bigint strings.
 */
export interface ScanColumns<J> {
  id: string;
  account_id: number;
  source: string;
  options: J;
  state: ScanState;
  created_at: number | string;
  started_at: number | string | null;
  finished_at: number | string | null;
  progress: number;
  counts: J;
  error: J | null;
}

/** The row as a ScanRow, `json` reading a JSON column; counts stored before a count existed gain it as 0. */
export function scanOf<J>(r: ScanColumns<J>, json: (v: J) => unknown): ScanRow {
  return {
    id: r.id,
    accountId: r.account_id,
    source: r.source,
    options: json(r.options) as ScanOptions,
    state: r.state,
    createdAt: Number(r.created_at),
    startedAt: r.started_at === null ? null : Number(r.started_at),
    finishedAt: r.finished_at === null ? null : Number(r.finished_at),
    progress: r.progress,
    counts: { ...emptyCounts(), ...(json(r.counts) as Partial<ScanCounts>) },
    error: r.error === null ? null : (json(r.error) as ScanRow['error']),
  };
}

export interface NewScan {
  id: string;
  accountId: number;
  source: string;
  options: ScanOptions;
  now: number;
}

export interface DailyLimits {
  /** Scans per account per UTC day. */
  account: number;
  /** Scans the service starts per UTC day (past it: paused). */
  service: number;
}

export type CreateResult = { ok: true; scan: ScanRow } | { ok: false };

export interface ClaimedChunk {
  scan: ScanRow;
  k: number;
}

export interface IndexedItem {
  index: number;
  item: ScanItem;
}

/** How a chunk's completion ends the scan, besides done when no chunk is left. */
export interface ChunkEnd {
  state: 'failed';
  error: { code: string; message: string };
}

export interface ScanJobStore {
  /** Counts the scan against both daily limits atomically: {ok:false} past the account's; paused past the service's. */
  create(scan: NewScan, limits: DailyLimits): Promise<CreateResult>;
  get(accountId: number, id: string): Promise<ScanRow | undefined>;
  /** The account's scans, newest first, after the cursor (createdAt, id) of the last one seen. */
  list(accountId: number, after: { createdAt: number; id: string } | undefined, limit: number): Promise<ScanRow[]>;
  /** The scan's items by index, from `from`. */
  items(scanId: string, from: number, limit: number): Promise<IndexedItem[]>;
  /** Cancels a scan not finished; the scan as it is after (undefined: none of the account's). */
  cancel(accountId: number, id: string, now: number): Promise<ScanRow | undefined>;
  /** The scan's state (the runner looks between items: a cancelled scan stops). */
  stateOf(id: string): Promise<ScanState | undefined>;
  /** Starts paused scans, oldest first, while the service's count for the day of `now` allows. */
  resumePaused(now: number, serviceLimit: number): Promise<number>;
  /** Takes a chunk whose lease is free or ran out (its scan queued or running; the scan becomes running). */
  claim(owner: string, now: number, leaseMs: number): Promise<ClaimedChunk | undefined>;
  /** Extends the lease while `owner` holds it; false when it was lost (taken over). */
  renew(owner: string, scanId: string, k: number, now: number, leaseMs: number): Promise<boolean>;
  /** Makes chunk k of the scan (nothing when it exists). */
  addChunk(scanId: string, k: number): Promise<void>;
  /**
   * In one transaction, while `owner` holds the lease: the items not yet written, the counts and progress,
   * the chunk done, and the scan done (no chunk left) or failed (`end`). False when the lease was lost.
   */
  complete(owner: string, scanId: string, k: number, items: IndexedItem[], now: number, end?: ChunkEnd): Promise<boolean>;
  /** Scans by state, service-wide (the metrics). */
  stateCounts(): Promise<Record<ScanState, number>>;
}

/** The UTC day of `now` (YYYY-MM-DD), the daily counters' key. */
export function dayOf(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}

/** The next UTC midnight after `now` (when the day's counts reset). */
export function nextDay(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

export const SERVICE_SCOPE = 'service';
export const accountScope = (accountId: number): string => `account:${accountId}`;

export function emptyStateCounts(): Record<ScanState, number> {
  return { queued: 0, paused: 0, running: 0, done: 0, failed: 0, cancelled: 0 };
}
