/**
 * Monthly quota windows (UTC calendar months) and the IETF RateLimit header fields that describe them.
 */
import { StoreError } from './errors.js';

export type Operation = 'protect' | 'verify';
export const OPERATIONS: readonly Operation[] = ['protect', 'verify'];

/** One operation's counter as a client sees it; `resetSeconds` counts to the next UTC month. */
export interface QuotaState {
  operation: Operation;
  limit: number;
  used: number;
  remaining: number;
  resetSeconds: number;
  windowSeconds: number;
}

const MONTH_SHAPE = /^(\d{4})-(0[1-9]|1[0-2])$/;

/** The UTC calendar month of `now` as YYYY-MM. */
export function monthOf(now: Date): string {
  return now.toISOString().slice(0, 7);
}

/** When the counters of `now`'s month reset: the first instant of the next UTC month. */
export function resetTimeOf(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/**
 * The reset instant a counter's `resetSeconds` counts to, read at `now`: the start of the month that holds
 * `now + resetSeconds`. The state was built a moment before `now` (a store round trip, a queue), so that sum is
 * at or just past the true instant, never a month past it; rounding back from one second before it instead
 * named the month after next whenever more than a second had passed (seen under load: "resets at 2027-01-01"
 * on 25 November).
 */
export function resetInstantOf(resetSeconds: number, now: Date): Date {
  const at = new Date(now.getTime() + resetSeconds * 1000);
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

/** A UTC instant as people read it in messages: "2026-12-01 00:00 UTC". */
export function utcMinuteText(at: Date): string {
  return `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** Validates a YYYY-MM month string or throws invalid_month. */
export function parseMonth(month: string): string {
  monthBounds(month);
  return month;
}

/** Start and end (exclusive) of a YYYY-MM month, in epoch milliseconds. */
export function monthBounds(month: string): { start: number; end: number } {
  const m = MONTH_SHAPE.exec(month);
  if (!m) throw new StoreError('invalid_month', `month must be YYYY-MM (UTC), got ${JSON.stringify(month)}`);
  const year = Number(m[1]);
  const index = Number(m[2]) - 1;
  return { start: Date.UTC(year, index, 1), end: Date.UTC(year, index + 1, 1) };
}

/** Builds the state of one counter in `month` as seen at `now` (reset 0 once the month is over). */
export function quotaStateOf(operation: Operation, limit: number, used: number, month: string, now: Date): QuotaState {
  const { start, end } = monthBounds(month);
  return {
    operation,
    limit,
    used,
    remaining: Math.max(0, limit - used),
    resetSeconds: Math.max(0, Math.ceil((end - now.getTime()) / 1000)),
    windowSeconds: (end - start) / 1000,
  };
}

/**
 * The RateLimit-Policy and RateLimit fields for one operation, in the syntax of
 * draft-ietf-httpapi-ratelimit-headers-11 (May 2026, §3 and §4): each field is a Structured Fields List
 * whose items are a policy name as an sf-string with integer parameters — `q` quota and `w` window in
 * seconds for the policy, `r` remaining quota and `t` seconds for which it applies for the live state.
 * Our window is the current calendar month, so `w` is that month's length and `t` the time left in it.
 * https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/
 */
export function rateLimitHeaders(state: QuotaState): Record<string, string> {
  const name = `"${state.operation}"`;
  return {
    'RateLimit-Policy': `${name};q=${state.limit};w=${state.windowSeconds}`,
    RateLimit: `${name};r=${state.remaining};t=${state.resetSeconds}`,
  };
}
