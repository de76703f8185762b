/**
 * One candidate of a scan as one item of its results: its bytes loaded (./sources/), then everything
 * POST /api/v1/verify reports about them (the caller's `verify`: src/pipeline/verify.ts verifyReport over
 * the server's layers, on the worker pool or a batch lane), the account's record it matches, and the
 * signals served with it. A bad image is an item with an `error`, never a thrown error: one unreadable
 * file must not end a scan of ten thousand.
 */
import { toErrorShape } from '../errors.js';
import { detectFormat } from '../formats/index.js';
import type { VaultMatch } from '../vault/recognition.js';
import type { Candidate, ScanCounts, ScanItem } from './types.js';

/** What a scan needs of a verify report (src/pipeline/verify.ts VerifyReport has these fields and more). */
export interface ScanVerifyReport {
  optedOut: boolean;
  signals: string[];
  otherSignals: string[];
  provenance: { present: boolean; valid: boolean; verifiable: boolean };
  fingerprint: { present: boolean; confidence: number; blocks: number };
  sha256: string;
  c2pa: unknown;
  /** The picture's PDQ hash, when it was asked for (the account keeps vault originals); null: none kept. */
  perceptualHash?: string | null;
}

export interface AnalyseDeps {
  /** Everything verify reports for `bytes` (the same function as POST /api/v1/verify); throws a coded error for a bad image. */
  verify(bytes: Uint8Array): Promise<ScanVerifyReport>;
  /** The account's record whose produced SHA-256 is `sha256`, if any (the CLI has no account). */
  recordOf?(sha256: string): Promise<{ id: string; createdAt: string } | null>;
  /**
   * The account's vault originals a picture with this PDQ hash looks like (src/vault/recognition.ts).
   * Absent where no vault is searched (the CLI; an account keeping no originals): items get `vault: null`.
   */
  vaultOf?(hash: string): Promise<VaultMatch[]>;
}

/** The candidate loaded and verified, as a result item (never throws for the image's sake). */
export async function analyseCandidate(c: Candidate, deps: AnalyseDeps): Promise<ScanItem> {
  let loaded;
  try {
    loaded = await c.load();
  } catch (err) {
    return failedItem(c.location, null, null, [], err);
  }
  const { bytes, servedSignals } = loaded;
  const format = detectFormat(bytes)?.name ?? null;
  if (format === null) return failedItem(c.location, null, null, servedSignals, { code: 'not_an_image', message: 'not a JPEG, PNG or WebP image' });
  let report: ScanVerifyReport;
  try {
    report = await deps.verify(bytes);
  } catch (err) {
    return failedItem(c.location, null, format, servedSignals, err);
  }
  const record = deps.recordOf ? await deps.recordOf(report.sha256) : null;
  const vault = deps.vaultOf ? (report.perceptualHash ? await deps.vaultOf(report.perceptualHash) : []) : null;
  // Every reservation embedded in the file counts: the IPTC field, and the C2PA training assertion and
  // the TDMRep reservation verify lists beside it (`otherSignals`).
  const signals = [...report.signals, ...report.otherSignals];
  return {
    location: c.location,
    sha256: report.sha256,
    format,
    optedOut: report.optedOut || report.otherSignals.length > 0,
    signals,
    servedSignals,
    provenance: report.provenance,
    fingerprint: report.fingerprint,
    c2pa: report.c2pa,
    record,
    vault,
    error: null,
  };
}

function failedItem(location: string, sha256: string | null, format: string | null, servedSignals: string[], err: unknown): ScanItem {
  return {
    location,
    sha256,
    format,
    optedOut: false,
    signals: [],
    servedSignals,
    provenance: null,
    fingerprint: null,
    c2pa: null,
    record: null,
    vault: null,
    error: errorOf(err),
  };
}

/** A thrown value as `{code, message}`: a scan's own codes, the pipeline's, else internal_error. */
export function errorOf(err: unknown): { code: string; message: string } {
  const e = err as { code?: unknown; message?: unknown } | null;
  const shape = toErrorShape(err);
  if (shape.code !== 'internal_error') return shape;
  if (e && typeof e.code === 'string' && /^[a-z][a-z0-9_]*$/.test(e.code) && typeof e.message === 'string') return { code: e.code, message: e.message };
  return { code: 'internal_error', message: err instanceof Error ? `${shape.message}: ${err.message}` : shape.message };
}

export function emptyCounts(): ScanCounts {
  return { images: 0, optedOut: 0, servedOptOut: 0, noOptOut: 0, ours: 0, oursStripped: 0, failed: 0, skipped: 0, inVault: 0 };
}

/** Whether this server marked the image: its provenance tag verified with this server's key, or its fingerprint found. */
export function isOurs(item: ScanItem): boolean {
  const p = item.provenance as { present?: boolean; valid?: boolean } | null;
  const f = item.fingerprint as { present?: boolean } | null;
  return (p?.present === true && p.valid === true) || f?.present === true;
}

/**
 * Adds one item to the summary (docs/scans.md): `images` every item but an LFS pointer (counted as
 * skipped: it is no image, only where one would be); `failed` those with an error (and nothing else); `optedOut` an embedded
 * signal; `servedOptOut` any served signal; `noOptOut` neither; `ours` this server's provenance or
 * fingerprint; `oursStripped` ours with no embedded opt-out left, whatever is served beside it; `inVault`
 * those that look like one of the account's vault originals.
 */
export function addToCounts(counts: ScanCounts, item: ScanItem): ScanCounts {
  if (item.error?.code === 'lfs_pointer') {
    counts.skipped++;
    return counts;
  }
  counts.images++;
  if (item.error) {
    counts.failed++;
    return counts;
  }
  if (item.servedSignals.length > 0) counts.servedOptOut++;
  if (item.optedOut) counts.optedOut++;
  if (!item.optedOut && item.servedSignals.length === 0) counts.noOptOut++;
  if (isOurs(item)) {
    counts.ours++;
    if (!item.optedOut) counts.oursStripped++;
  }
  // Scans stored before the vault was searched have no inVault count yet.
  if (item.vault && item.vault.length > 0) counts.inVault = (counts.inVault ?? 0) + 1;
  return counts;
}
