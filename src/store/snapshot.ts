/**
 * The engine-neutral half of `optmark store migrate`: what a snapshot holds, made once from the rows
 * either engine reads (the statements below are the same text in both dialects, but for the counters,
 * whose held units each engine counts in its own terms), and what a snapshot must hold to be restored.
 * The months asked for are checked and chosen here, and held units left out here, for both engines.
 */
import { iso, isoOrNull, type AccountRow, type When } from './accounts.js';
import { unknownAccount } from './common.js';
import { parseMonth, type Operation } from './quota.js';
import { toBatch, toRecord, type BatchRow, type RecordRow } from './records.js';
import type { StoreSnapshot } from './types.js';

/** The rows a snapshot is made of, as either engine reads them in one transaction. */
export interface SnapshotRows {
  accounts: AccountRow[];
  keys: Array<{ account: string; hash: Buffer; prefix: string; created_at: When; last_used_at: When | null; revoked_at: When | null }>;
  /** Every counter, with the units of it that are held (taken, neither committed nor given back). */
  counters: Array<{ account: string; month: string; operation: Operation; used: number; held: number }>;
  batches: Array<BatchRow & { account: string }>;
  records: Array<RecordRow & { account: string }>;
  publicKeys: Array<{ key_id: string; public_pem: string; recorded_at: When }>;
  secrets: Array<{ name: string; value: Buffer }>;
}

/** The statements of the parts both dialects read alike. */
export const SNAPSHOT_SQL = {
  accounts: 'SELECT a.id, a.name, a.plan, a.protect_limit, a.verify_limit, a.created_at FROM accounts a ORDER BY a.id',
  keys: 'SELECT a.name AS account, k.hash, k.prefix, k.created_at, k.last_used_at, k.revoked_at FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id',
  batches: 'SELECT b.*, a.name AS account FROM dashboard_batches b JOIN accounts a ON a.id = b.account_id ORDER BY b.created_at, b.id',
  records: 'SELECT d.*, a.name AS account FROM dashboard_records d JOIN accounts a ON a.id = d.account_id ORDER BY d.marked_at, d.id',
} as const;

/** The counters' statement, given the dialect's count of a counter `u`'s held units. */
export function snapshotCounters(held: string): string {
  return `SELECT a.name AS account, u.month, u.operation, u.used, (${held}) AS held
            FROM usage_counters u JOIN accounts a ON a.id = u.account_id ORDER BY a.id, u.month, u.operation`;
}

/** The months a snapshot keeps (undefined: all), each checked to be YYYY-MM. */
export function wantedMonths(months: readonly string[] | undefined): ReadonlySet<string> | undefined {
  return months && new Set(months.map(parseMonth));
}

/** The snapshot of `rows`: committed units only (held ones are not copied), of the `months` given. */
export function shapeSnapshot(rows: SnapshotRows, months?: ReadonlySet<string>): StoreSnapshot {
  return {
    accounts: rows.accounts.map((a) => ({
      name: a.name,
      plan: a.plan,
      protectLimit: a.protect_limit,
      verifyLimit: a.verify_limit,
      createdAt: iso(a.created_at),
    })),
    keys: rows.keys.map((k) => ({
      account: k.account,
      hash: k.hash,
      prefix: k.prefix,
      createdAt: iso(k.created_at),
      lastUsedAt: isoOrNull(k.last_used_at),
      revokedAt: isoOrNull(k.revoked_at),
    })),
    counters: rows.counters
      .filter((c) => !months || months.has(c.month))
      .map((c) => ({ account: c.account, month: c.month, operation: c.operation, used: Math.max(0, Number(c.used) - Number(c.held)) })),
    batches: rows.batches.map((r) => ({ ...toBatch(r), account: r.account })),
    records: rows.records.map((r) => ({ ...toRecord(r), account: r.account })),
    publicKeys: rows.publicKeys.map((k) => ({ keyId: k.key_id, pem: k.public_pem, recordedAt: iso(k.recorded_at) })),
    secrets: rows.secrets,
  };
}

/**
 * Refuses (unknown_account) a snapshot whose keys, counters, batches or records name an account it does
 * not hold, before anything is written: a restore takes all of a snapshot or none of it.
 */
export function checkRestorable(s: StoreSnapshot): void {
  const names = new Set(s.accounts.map((a) => a.name.toLowerCase()));
  for (const part of [s.keys, s.counters, s.batches, s.records]) {
    for (const row of part) if (!names.has(row.account.toLowerCase())) throw unknownAccount(row.account);
  }
}
