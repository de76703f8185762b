/**
 * What both engines share: validation of operator input, key lookups by prefix, the state of this
 * instance's reservations, the bounded authentication cache and the batched last-used writes (the
 * instance's identity and lease are ./owners.ts).
 */
import { defaultMessage } from '../errors.js';
import type { AuthFailureCode } from './auth.js';
import { StoreError } from './errors.js';
import { parseAuthorization } from './auth.js';
import { DISPLAY_PREFIX_LENGTH, MIN_REVOKE_PREFIX_LENGTH, hashKey, isKeyPrefix, isWellFormedKey } from './keys.js';
import type { IdempotentRequest } from './idempotency.js';
import type { Operation } from './quota.js';
import { PLANS, type AuthResult, type Plan, type Reservation, type StoreCounts } from './types.js';

/** The largest limit an operator may set (the configuration's bound too). */
export const MAX_LIMIT = 2 ** 31;
/** A key's last_used_at is rewritten only when the stored value is older than this: `key list` is accurate to a minute. */
export const LAST_USED_GRANULARITY_MS = 60_000;
/** Pending last-used times are written at most this often (and at close, and before `key list`). */
export const LAST_USED_FLUSH_MS = 10_000;
/** Keys kept in the authentication cache at most (PostgreSQL); the oldest entry goes first. */
export const AUTH_CACHE_ENTRIES = 10_000;
/** How long an authentication result may be reused (PostgreSQL): the bound on how late a revocation applies. */
export const DEFAULT_AUTH_CACHE_MS = 2000;

export const ACCOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const BOOTSTRAP_ACCOUNT = 'default';
/** Plans whose keys may call the API. */
export const API_PLANS: ReadonlySet<Plan> = new Set<Plan>(['pro', 'lifetime']);

/** Is `value` one of the plans? */
export function isPlan(value: string): value is Plan {
  return (PLANS as readonly string[]).includes(value);
}

export function checkPlan(plan: string): asserts plan is Plan {
  if (!isPlan(plan)) throw new StoreError('invalid_plan', `plan must be one of ${PLANS.join(', ')}; got ${JSON.stringify(plan)}`);
}

export function checkAccountName(name: string): void {
  if (!ACCOUNT_NAME.test(name)) {
    throw new StoreError(
      'invalid_account_name',
      `account name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit; got ${JSON.stringify(name)}`,
    );
  }
}

export function checkLimits(limits: { protect?: number | null; verify?: number | null }): void {
  for (const value of [limits.protect, limits.verify]) {
    if (value != null && (!Number.isSafeInteger(value) || value < 0 || value > MAX_LIMIT)) {
      throw new StoreError('invalid_limit', `a limit must be a whole number from 0 to ${MAX_LIMIT}, got ${value}`);
    }
  }
}

export function checkDefaults(defaults: { defaultProtectLimit: number; defaultVerifyLimit: number }): void {
  for (const [name, value] of [
    ['defaultProtectLimit', defaults.defaultProtectLimit],
    ['defaultVerifyLimit', defaults.defaultVerifyLimit],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 0 || value > MAX_LIMIT) throw new RangeError(`${name} must be 0..${MAX_LIMIT}, got ${value}`);
  }
}

export function unknownAccount(name: string): StoreError {
  return new StoreError('unknown_account', `no account named "${name}" (see: optmark account list)`);
}

export function authFailure(code: AuthFailureCode, message: string = defaultMessage(code)): AuthResult {
  return { ok: false, code, message };
}

/** What `revokeKey` looks keys up by: a whole key (by hash) or a display prefix of at least 12 characters. */
export type KeyLookup = { kind: 'whole'; key: string } | { kind: 'prefix'; prefix: string; shown: string };

export function keyLookup(arg: string): KeyLookup {
  // Echo at most a display prefix of what was typed: the argument may be a whole key.
  const shown = JSON.stringify(arg.slice(0, DISPLAY_PREFIX_LENGTH));
  if (isWellFormedKey(arg)) return { kind: 'whole', key: arg };
  if (!isKeyPrefix(arg)) throw new StoreError('unknown_key', `${shown} is not the start of an optmark key (see: optmark key list <account>)`);
  if (arg.length < MIN_REVOKE_PREFIX_LENGTH) {
    throw new StoreError('key_prefix_too_short', `a key prefix needs at least ${MIN_REVOKE_PREFIX_LENGTH} characters, got ${arg.length}`);
  }
  if (arg.length > DISPLAY_PREFIX_LENGTH) {
    // Only the display prefix and the whole key's hash are stored: the characters past the prefix could
    // not be checked, so a mistyped key must not revoke the key whose prefix it shares.
    throw new StoreError(
      'unknown_key',
      `${shown}... (${arg.length} characters) is neither a whole key nor a prefix of at most ${DISPLAY_PREFIX_LENGTH} characters (give the prefix optmark key list <account> shows, or the whole key)`,
    );
  }
  return { kind: 'prefix', prefix: arg, shown };
}

/** Picks the one key a prefix names among the rows that start with it (live keys first). */
export function pickByPrefix<R extends { revoked: boolean; prefix: string; account: string }>(rows: R[], shown: string): R {
  const live = rows.filter((r) => !r.revoked);
  if (rows.length === 0) throw new StoreError('unknown_key', `no key starts with ${shown} (see: optmark key list <account>)`);
  if (live.length > 1 || (live.length === 0 && rows.length > 1)) {
    const candidates = (live.length > 1 ? live : rows).map((r) => `${r.prefix} (${r.account})`).join(', ');
    throw new StoreError('ambiguous_key_prefix', `${shown} matches several keys: ${candidates}; give more characters`);
  }
  return live[0] ?? rows[0]!;
}

// ── reservations ─────────────────────────────────────────────────────────────────────────────────

type ReservationState = 'held' | 'committed';

/** The state of this instance's reservations: what makes commit and refund idempotent per object. */
export class Reservations {
  readonly #state = new WeakMap<Reservation, ReservationState>();

  create(id: number, accountId: number, operation: Operation, month: string, idempotency?: IdempotentRequest): Reservation {
    const r: Reservation = Object.freeze(idempotency ? { id, accountId, operation, month, idempotency } : { id, accountId, operation, month });
    this.#state.set(r, 'held');
    return r;
  }

  state(r: Reservation): ReservationState | undefined {
    return this.#state.get(r);
  }

  set(r: Reservation, state: ReservationState | undefined): void {
    if (state === undefined) this.#state.delete(r);
    else this.#state.set(r, state);
  }

  readonly #busy = new WeakMap<Reservation, Promise<unknown>>();

  /** Runs `fn` after every earlier call on the same reservation settled: a commit and a refund never overlap. */
  serial<T>(r: Reservation, fn: () => Promise<T>): Promise<T> {
    const before = this.#busy.get(r) ?? Promise.resolve();
    const next = before.then(fn, fn);
    this.#busy.set(
      r,
      next.catch(() => undefined),
    );
    return next;
  }
}

/** The reservation's hold was reclaimed (this instance missed its lease): the unit is not counted. */
export function reservationLost(): StoreError {
  return new StoreError('reservation_lost', 'the reservation was reclaimed by another instance (this one missed its lease); the unit is not counted');
}

// ── authentication cache and last-used batching ──────────────────────────────────────────────────

export interface AuthRow {
  keyId: number;
  accountId: number;
  name: string;
  plan: Plan;
  protectLimit: number | null;
  verifyLimit: number | null;
  createdAt: string;
  lastUsedAt: string | null;
  revoked: boolean;
}

/** A bounded, time-limited map from key hash to its row; entries older than `ttlMs` are read again. */
export class AuthCache {
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #entries = new Map<string, { row: AuthRow; at: number }>();

  constructor(ttlMs: number, max = AUTH_CACHE_ENTRIES) {
    this.#ttlMs = ttlMs;
    this.#max = max;
  }

  get enabled(): boolean {
    return this.#ttlMs > 0;
  }

  get(hash: string, now: number): AuthRow | undefined {
    const e = this.#entries.get(hash);
    if (!e) return undefined;
    if (now - e.at >= this.#ttlMs || now < e.at) {
      this.#entries.delete(hash);
      return undefined;
    }
    return e.row;
  }

  set(hash: string, row: AuthRow, now: number): void {
    if (!this.enabled) return;
    this.#entries.delete(hash);
    if (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(hash, { row, at: now });
  }

  /** Forgets everything (a revocation, plan or limit change made through this instance). */
  clear(): void {
    this.#entries.clear();
  }
}

/** last_used_at values waiting to be written, at most one per key. */
export class LastUsed {
  readonly #pending = new Map<number, string>();
  /** The latest value noted per key (written or not): a cached row's older value must not cause a write. */
  readonly #latest = new Map<number, string>();

  /** Notes a use at `now` when the known value is older than the granularity. */
  note(keyId: number, known: string | null, now: Date): void {
    const noted = this.#latest.get(keyId);
    const latest = noted !== undefined && (known === null || noted > known) ? noted : known;
    const stale = new Date(now.getTime() - LAST_USED_GRANULARITY_MS).toISOString();
    if (latest === null || latest < stale) {
      const at = now.toISOString();
      this.#pending.set(keyId, at);
      if (this.#latest.size >= AUTH_CACHE_ENTRIES) this.#latest.clear();
      this.#latest.set(keyId, at);
    }
  }

  /** Takes the pending values (the caller writes them: only ever forward in time). */
  take(): Array<{ id: number; at: string }> {
    const out = [...this.#pending].map(([id, at]) => ({ id, at }));
    this.#pending.clear();
    return out;
  }

  get size(): number {
    return this.#pending.size;
  }
}

/** May keys of an account on this plan call the API (protect, verify)? */
export function hasApiAccess(plan: Plan): boolean {
  return API_PLANS.has(plan);
}

/** Does a store hold nothing (see Store.counts)? */
export function isEmptyCounts(counts: StoreCounts): boolean {
  return Object.values(counts).every((n) => n === 0);
}

/**
 * Both engines' first step of `authenticate`: the key's hash from an Authorization header, or the
 * failure to answer (no header, another scheme, not an optmark key) without asking the store.
 */
export function keyHashOf(authorization: string | undefined): { hash: Buffer } | { failure: AuthResult } {
  const parsed = parseAuthorization(authorization);
  if (parsed.kind === 'missing') return { failure: authFailure('missing_api_key') };
  if (parsed.kind === 'other_scheme') return { failure: authFailure('invalid_api_key', 'Send the API key as "Authorization: Bearer <key>".') };
  if (!isWellFormedKey(parsed.token)) return { failure: authFailure('invalid_api_key') };
  return { hash: hashKey(parsed.token) };
}

/** The refusal of a key whose account's plan has no API access, or undefined when it has. */
export function planFailure(plan: Plan): AuthResult | undefined {
  if (hasApiAccess(plan)) return undefined;
  return authFailure('plan_required', `The account's plan (${plan}) does not include API access; the pro and lifetime plans do.`);
}
