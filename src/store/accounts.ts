/**
 * The operator side's rows as both engines read them, and what is made of them once: accounts with their
 * effective limits, key listings, usage with its held units, and the limit changes an operator asks for.
 * SQLite gives times as ISO text, PostgreSQL as Date; both come out as ISO text.
 */
import { StoreError } from './errors.js';
import type { Operation, QuotaState } from './quota.js';
import type { Account, KeyInfo, Plan, Usage } from './types.js';

export type When = string | Date;

/** An ISO-8601 UTC time from either engine's column. */
export function iso(t: When): string {
  return typeof t === 'string' ? t : t.toISOString();
}

export function isoOrNull(t: When | null): string | null {
  return t === null ? null : iso(t);
}

export interface AccountRow {
  id: number;
  name: string;
  plan: Plan;
  protect_limit: number | null;
  verify_limit: number | null;
  created_at: When;
}

export interface KeyRow {
  id: number;
  prefix: string;
  created_at: When;
  last_used_at: When | null;
  revoked_at: When | null;
  account: string;
}

/** The columns of AccountRow (accounts as `a`) and of KeyRow (api_keys as `k` joined to `a`), in both dialects. */
export const ACCOUNT_COLUMNS = 'a.id, a.name, a.plan, a.protect_limit, a.verify_limit, a.created_at';
export const KEY_COLUMNS = 'k.id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, a.name AS account';

/** The account of `row`, each limit its own override or else the configured default. */
export function toAccount(row: AccountRow, defaults: Readonly<Record<Operation, number>>): Account {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    protectLimit: row.protect_limit ?? defaults.protect,
    verifyLimit: row.verify_limit ?? defaults.verify,
    createdAt: iso(row.created_at),
  };
}

export function toKeyInfo(row: KeyRow): KeyInfo {
  return { id: row.id, prefix: row.prefix, createdAt: iso(row.created_at), lastUsedAt: isoOrNull(row.last_used_at), revokedAt: isoOrNull(row.revoked_at) };
}

/** The overrides after `setLimits(limits)`: a limit left undefined keeps its value, null goes back to the default. */
export function nextLimits(row: AccountRow, limits: { protect?: number | null; verify?: number | null }): { protect: number | null; verify: number | null } {
  return {
    protect: limits.protect === undefined ? row.protect_limit : limits.protect,
    verify: limits.verify === undefined ? row.verify_limit : limits.verify,
  };
}

/** A month's usage from its two counters and the held units per operation (rows of either engine). */
export function usageOf(month: string, protect: QuotaState, verify: QuotaState, held: readonly { operation: Operation; n: number }[]): Usage {
  const out = { protect: 0, verify: 0 };
  for (const h of held) out[h.operation] = Number(h.n);
  return { month, protect, verify, held: out };
}

export function duplicateAccount(name: string): StoreError {
  return new StoreError('duplicate_account', `an account named "${name}" already exists (names ignore case)`);
}

export function unknownAccountId(id: number): StoreError {
  return new StoreError('unknown_account', `no account with id ${id}`);
}
