/**
 * A scan's limits by default (docs/scans.md). The server's settings (OPTMARK_SCAN_*, src/config.ts) start
 * from these; a scan's options may lower a limit, never raise it past the setting. The one exception is
 * `perHostDelayMs`, a politeness: a scan may raise it (up to MAX_PER_HOST_DELAY_MS), never lower it.
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

/** The longest pause between two requests to a host a scan may ask for (OPTMARK_SCAN_PER_HOST_DELAY_MS's maximum too). */
export const MAX_PER_HOST_DELAY_MS = 60_000;

/**
 * `limits` with a scan's own limits applied: each of `asked` that is smaller put in its place (a scan may
 * lower a limit, never raise it), except `perHostDelayMs`, which only a larger value replaces (at most
 * MAX_PER_HOST_DELAY_MS): a scan may be politer than the server's setting, never less polite.
 */
export function lowered(limits: Readonly<ScanLimits>, asked: Partial<ScanLimits>): ScanLimits {
  const out = { ...limits };
  for (const key of Object.keys(out) as (keyof ScanLimits)[]) {
    const v = asked[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) continue;
    if (key === 'perHostDelayMs') out[key] = Math.max(out[key], Math.min(v, MAX_PER_HOST_DELAY_MS));
    else if (v < out[key]) out[key] = v;
  }
  return out;
}
