/**
 * A scan's limits by default (docs/scans.md). The server's settings (OPTMARK_SCAN_*, src/config.ts) start
 * from these; a scan's options and the CLI's flags may lower a limit, never raise it past the setting.
 */
import type { ScanLimits } from './types.js';

export const DEFAULT_SCAN_LIMITS: Readonly<ScanLimits> = {
  maxImages: 10_000,
  maxBytes: 2 * 1024 ** 3,
  maxWallMs: 30 * 60_000,
  maxImageBytes: 25 * 1000 ** 2,
  maxRedirects: 5,
  perHostConcurrency: 4,
  perHostDelayMs: 0,
  maxHtmlBytes: 5 * 1024 ** 2,
  maxPages: 50,
  maxDepth: 2,
  connectTimeoutMs: 10_000,
  headersTimeoutMs: 15_000,
  bodyTimeoutMs: 60_000,
};

/** `limits` with each of `lower` that is smaller put in its place (a scan may lower a limit, never raise it). */
export function lowered(limits: Readonly<ScanLimits>, lower: Partial<ScanLimits>): ScanLimits {
  const out = { ...limits };
  for (const key of Object.keys(out) as (keyof ScanLimits)[]) {
    const v = lower[key];
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0 && v < out[key]) out[key] = v;
  }
  return out;
}
