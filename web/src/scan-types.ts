/**
 * The shapes of the scan API as the page reads them (docs/scans.md; GET /api/v1/scans/{id} and its
 * /results). Written out here rather than imported: the server's src/scans/types.ts refers to Node's
 * stream types, which the page's build does not have.
 */

export type ScanState = 'queued' | 'paused' | 'running' | 'done' | 'failed' | 'cancelled';

export interface ScanCounts {
  images: number;
  optedOut: number;
  servedOptOut: number;
  noOptOut: number;
  ours: number;
  oursStripped: number;
  failed: number;
  skipped?: number;
  /** Images that look like one of the account's vault originals (absent on scans made before it was counted). */
  inVault?: number;
}

export interface ScanProgress {
  /** Images looked at so far. */
  done: number;
  /** Images known to be waiting, when the source says (a URL list does; a page being crawled does not). */
  total: number | null;
}

export interface Scan {
  id: string;
  state: ScanState;
  source: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** Items written so far (the jobs store's count), or done of a known total. */
  progress: number | ScanProgress;
  counts: ScanCounts;
  error: { code: string; message: string } | null;
}

export interface ScanItem {
  location: string;
  sha256: string | null;
  format: string | null;
  optedOut: boolean;
  signals: string[];
  servedSignals: string[];
  provenance: { present: boolean; valid: boolean } | null;
  fingerprint: { present: boolean; confidence?: number } | null;
  c2pa: { present: boolean; valid: boolean; trainingMining?: string | null } | null;
  record: { id: string; createdAt?: string } | null;
  /** The account's vault originals the picture looks like, nearest first; null where no vault was searched. */
  vault?: { id: string; name: string; distance: number; record: string | null }[] | null;
  error: { code: string; message: string } | null;
}

export interface ScanList {
  scans: Scan[];
}

export interface ResultsPage {
  items: ScanItem[];
  nextCursor: string | null;
}

/** The progress as done and total (null: the source does not say how many are coming). */
export function progressOf(scan: Scan): ScanProgress {
  return typeof scan.progress === 'number' ? { done: scan.progress, total: null } : scan.progress;
}

/** A scan that may still change: the page keeps polling it. */
export function live(state: ScanState): boolean {
  return state === 'queued' || state === 'paused' || state === 'running';
}

/** Marked by this server: a valid provenance tag or the fingerprint (the server's `ours` count). */
export function isOurs(item: ScanItem): boolean {
  return Boolean((item.provenance?.present && item.provenance.valid) || item.fingerprint?.present);
}

/** A Git LFS pointer: reported where an image would be, counted as skipped, not as an image. */
export function isSkipped(item: ScanItem): boolean {
  return item.error?.code === 'lfs_pointer';
}

/** The summary's categories, as filters of the table (each the rule of its count, src/scans/analyse.ts). */
export const FILTERS = {
  all: { label: 'All images', test: (i: ScanItem) => !isSkipped(i) },
  optedOut: { label: 'Opted out (embedded)', test: (i: ScanItem) => !i.error && i.optedOut },
  servedOptOut: { label: 'Opted out (served)', test: (i: ScanItem) => !i.error && i.servedSignals.length > 0 },
  noOptOut: { label: 'No opt-out', test: (i: ScanItem) => !i.error && !i.optedOut && i.servedSignals.length === 0 },
  ours: { label: 'Marked by this server', test: (i: ScanItem) => !i.error && isOurs(i) },
  oursStripped: { label: 'Ours, opt-out stripped', test: (i: ScanItem) => !i.error && isOurs(i) && !i.optedOut },
  inVault: { label: 'Looks like a vault original', test: (i: ScanItem) => !i.error && (i.vault?.length ?? 0) > 0 },
  failed: { label: 'Failed', test: (i: ScanItem) => i.error !== null && !isSkipped(i) },
  skipped: { label: 'Skipped (Git LFS pointers)', test: isSkipped },
} as const;

export type FilterId = keyof typeof FILTERS;

export const STATE_TEXT: Record<ScanState, string> = {
  queued: 'Queued',
  paused: 'Paused (the service-wide daily ceiling was reached; it starts when the ceiling resets)',
  running: 'Running',
  done: 'Done',
  failed: 'Failed',
  cancelled: 'Cancelled',
};
