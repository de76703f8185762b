/**
 * Accounts, API keys and monthly usage counters in one SQLite file (`${dataDir}/optmark.db`).
 *
 * The request path is three calls: `authenticate` (one indexed lookup by key hash), `reserve` (one
 * atomic upsert that takes a unit only while under the limit) and `commit` or `refund`. Every call goes
 * to the database, so revocations, plan changes and new limits made by the operator commands in another
 * process apply to the next request; nothing about keys or limits is cached in memory.
 */
import { join } from 'node:path';
import { defaultMessage } from '../errors.js';
import { parseAuthorization, type AuthFailureCode } from './auth.js';
import { BackgroundCheckpoints, type CheckpointStats } from './checkpoints.js';
import { openDatabase, type Db } from './db.js';
import { StoreError } from './errors.js';
import { DashboardRecords } from './records.js';
import {
  DISPLAY_PREFIX_LENGTH,
  MIN_REVOKE_PREFIX_LENGTH,
  displayPrefix,
  generateKey,
  hashKey,
  isKeyPrefix,
  isWellFormedKey,
} from './keys.js';
import { monthOf, parseMonth, quotaStateOf, type Operation, type QuotaState } from './quota.js';

export { StoreError, STORE_ERROR_CODES, type StoreErrorCode } from './errors.js';
export { parseAuthorization, wwwAuthenticate, type AuthFailureCode } from './auth.js';
export { KEY_PREFIX, isWellFormedKey } from './keys.js';
export { monthOf, rateLimitHeaders, OPERATIONS, resetTimeOf, utcMinuteText, type Operation, type QuotaState } from './quota.js';
export { SCHEMA_VERSION } from './db.js';
export type { CheckpointStats } from './checkpoints.js';
export { MAX_BATCH_SIZE, type Batch, type MarkRecord, type RecordQuery, type SlotResult, type DashboardRecords } from './records.js';

export type Plan = 'free' | 'pro' | 'lifetime';
export const PLANS: readonly Plan[] = ['free', 'pro', 'lifetime'];
/** Plans whose keys may call the API. */
const API_PLANS: ReadonlySet<Plan> = new Set<Plan>(['pro', 'lifetime']);

/** An account with its effective limits (its own override, else the configured default). */
export interface Account {
  id: number;
  name: string;
  plan: Plan;
  protectLimit: number;
  verifyLimit: number;
  createdAt: string;
}

export type AuthResult =
  | { ok: true; account: Account; keyId: number }
  | { ok: false; code: AuthFailureCode; message: string };

/** A unit taken by `reserve`; pass this same object to `commit` or `refund`. */
export interface Reservation {
  readonly accountId: number;
  readonly operation: Operation;
  /** YYYY-MM (UTC) the unit was taken from; a refund returns it there even after the month turned. */
  readonly month: string;
}

export type ReserveResult = { ok: true; reservation: Reservation; state: QuotaState } | { ok: false; state: QuotaState };

export interface KeyInfo {
  id: number;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface StoreOptions {
  dataDir: string;
  defaultProtectLimit: number;
  defaultVerifyLimit: number;
  /** Database path; defaults to `${dataDir}/optmark.db`. */
  file?: string;
}

/** The largest limit an operator may set (the configuration's bound too). */
export const MAX_LIMIT = 2 ** 31;
/**
 * last_used_at is rewritten only when the stored value is older than this, so a busy key costs one
 * write a minute instead of one per request; `key list` is accurate to a minute.
 */
export const LAST_USED_GRANULARITY_MS = 60_000;
const ACCOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const BOOTSTRAP_ACCOUNT = 'default';

interface AccountRow {
  id: number;
  name: string;
  plan: Plan;
  protect_limit: number | null;
  verify_limit: number | null;
  created_at: string;
}

interface AuthRow extends AccountRow {
  key_id: number;
  last_used_at: string | null;
  revoked_at: string | null;
}

interface KeyRow {
  id: number;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  account: string;
}

interface CounterParams {
  account: number;
  month: string;
  op: Operation;
  fallback: number;
}

// The effective limit of :op for account row `a`: its override, else the default passed in by this process.
const LIMIT_OF_A = `coalesce(CASE :op WHEN 'protect' THEN a.protect_limit ELSE a.verify_limit END, :fallback)`;
const ACCOUNT_COLUMNS = 'a.id, a.name, a.plan, a.protect_limit, a.verify_limit, a.created_at';

/** Is `value` one of the plans? */
export function isPlan(value: string): value is Plan {
  return (PLANS as readonly string[]).includes(value);
}

/** May keys of an account on this plan call the API (protect, verify)? */
export function hasApiAccess(plan: Plan): boolean {
  return API_PLANS.has(plan);
}

/** The account store; one per process, opened at start and closed at shutdown. */
export class Store {
  readonly file: string;
  readonly #db: Db;
  readonly #defaults: Record<Operation, number>;
  /** Reservations not yet committed or refunded: what makes commit/refund idempotent per object. */
  readonly #pending = new WeakSet<Reservation>();
  #checkpoints: BackgroundCheckpoints | undefined;
  /** The dashboard's batches and records of marked images. */
  readonly dashboard: DashboardRecords;

  readonly #authByHash;
  readonly #touchKey;
  readonly #reserve;
  readonly #refund;
  readonly #counter;
  readonly #accountByName;
  readonly #accountById;
  readonly #allAccounts;
  readonly #insertAccount;
  readonly #setPlan;
  readonly #setLimits;
  readonly #countAccounts;
  readonly #insertKey;
  readonly #keysOfAccount;
  readonly #keyByHash;
  readonly #keysByPrefix;
  readonly #revokeKey;

  private constructor(db: Db, file: string, defaults: Record<Operation, number>) {
    this.#db = db;
    this.file = file;
    this.#defaults = defaults;
    this.dashboard = new DashboardRecords(db);
    this.#authByHash = db.prepare<[Buffer], AuthRow>(
      `SELECT ${ACCOUNT_COLUMNS}, k.id AS key_id, k.last_used_at, k.revoked_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = ?`,
    );
    this.#touchKey = db.prepare<[string, number, string]>(
      'UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)',
    );
    // The whole reservation is this one statement, so it is atomic against every other connection:
    // a new month's row starts at 1 if the limit allows any unit, an existing row grows only while
    // below the limit; no row returned = over the limit (or no such account).
    // Writes with RETURNING are read with .all(), never .get(): .get() stops at the first row and the
    // statement ends in a reset, which commits without calling SQLite's WAL hook, so the WAL is never
    // checkpointed or rewound by them (it grew by a page per request, with one large sync whenever some
    // other write did call the hook).
    this.#reserve = db.prepare<[CounterParams], { used: number; lim: number }>(
      `INSERT INTO usage_counters (account_id, month, operation, used)
         SELECT a.id, :month, :op, 1 FROM accounts a WHERE a.id = :account AND ${LIMIT_OF_A} > 0
       ON CONFLICT (account_id, month, operation) DO UPDATE SET used = used + 1
         WHERE used < (SELECT ${LIMIT_OF_A} FROM accounts a WHERE a.id = :account)
       RETURNING used, (SELECT ${LIMIT_OF_A} FROM accounts a WHERE a.id = :account) AS lim`,
    );
    this.#refund = db.prepare<[number, string, Operation]>(
      'UPDATE usage_counters SET used = used - 1 WHERE account_id = ? AND month = ? AND operation = ? AND used > 0',
    );
    this.#counter = db.prepare<[CounterParams], { used: number; lim: number }>(
      `SELECT ${LIMIT_OF_A} AS lim,
              coalesce((SELECT used FROM usage_counters u
                         WHERE u.account_id = a.id AND u.month = :month AND u.operation = :op), 0) AS used
         FROM accounts a WHERE a.id = :account`,
    );
    this.#accountByName = db.prepare<[string], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a WHERE a.name = ?`);
    this.#accountById = db.prepare<[number], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a WHERE a.id = ?`);
    this.#allAccounts = db.prepare<[], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a ORDER BY a.name`);
    this.#insertAccount = db.prepare<[string, Plan, string], AccountRow>(
      `INSERT INTO accounts (name, plan, created_at) VALUES (?, ?, ?)
       RETURNING id, name, plan, protect_limit, verify_limit, created_at`,
    );
    this.#setPlan = db.prepare<[Plan, number]>('UPDATE accounts SET plan = ? WHERE id = ?');
    this.#setLimits = db.prepare<[number | null, number | null, number]>(
      'UPDATE accounts SET protect_limit = ?, verify_limit = ? WHERE id = ?',
    );
    this.#countAccounts = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM accounts');
    this.#insertKey = db.prepare<[number, Buffer, string, string], { id: number }>(
      'INSERT INTO api_keys (account_id, hash, prefix, created_at) VALUES (?, ?, ?, ?) RETURNING id',
    );
    const keyColumns = 'k.id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, a.name AS account';
    this.#keysOfAccount = db.prepare<[number], KeyRow>(
      `SELECT ${keyColumns} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.account_id = ? ORDER BY k.id`,
    );
    this.#keyByHash = db.prepare<[Buffer], KeyRow>(
      `SELECT ${keyColumns} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = ?`,
    );
    // A range instead of LIKE: '_' in the fixed prefix is a LIKE wildcard, and '~' sorts after every
    // base62 character, so [p, p + '~') is exactly "starts with p" and uses the prefix index.
    this.#keysByPrefix = db.prepare<[string, string], KeyRow>(
      `SELECT ${keyColumns} FROM api_keys k JOIN accounts a ON a.id = k.account_id
        WHERE k.prefix >= ? AND k.prefix < ? ORDER BY k.id`,
    );
    this.#revokeKey = db.prepare<[string, number]>('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
  }

  /** Opens or creates `${dataDir}/optmark.db` (WAL), migrating its schema. */
  static open(opts: StoreOptions): Store {
    const file = opts.file ?? join(opts.dataDir, 'optmark.db');
    for (const [name, value] of [
      ['defaultProtectLimit', opts.defaultProtectLimit],
      ['defaultVerifyLimit', opts.defaultVerifyLimit],
    ] as const) {
      if (!Number.isSafeInteger(value) || value < 0 || value > MAX_LIMIT) throw new RangeError(`${name} must be 0..${MAX_LIMIT}, got ${value}`);
    }
    return new Store(openDatabase(file), file, { protect: opts.defaultProtectLimit, verify: opts.defaultVerifyLimit });
  }

  // ── request path ──────────────────────────────────────────────────────────────────────────────

  /**
   * Checks an Authorization header value ("Bearer <key>", scheme case-insensitive): malformed keys fail
   * without touching the database, well-formed ones cost one indexed lookup of their hash. Never cached,
   * so a revocation applies to the very next call. The key itself never appears in the result.
   */
  authenticate(authorization: string | undefined, now: Date = new Date()): AuthResult {
    const parsed = parseAuthorization(authorization);
    if (parsed.kind === 'missing') return authFailure('missing_api_key');
    if (parsed.kind === 'other_scheme') return authFailure('invalid_api_key', 'Send the API key as "Authorization: Bearer <key>".');
    if (!isWellFormedKey(parsed.token)) return authFailure('invalid_api_key');
    const row = this.#authByHash.get(hashKey(parsed.token));
    if (!row) return authFailure('invalid_api_key');
    if (row.revoked_at !== null) return authFailure('invalid_api_key', 'The API key has been revoked.');
    const stale = new Date(now.getTime() - LAST_USED_GRANULARITY_MS).toISOString();
    if (row.last_used_at === null || row.last_used_at < stale) this.#touchKey.run(now.toISOString(), row.key_id, stale);
    if (!API_PLANS.has(row.plan)) {
      return authFailure('plan_required', `The account's plan (${row.plan}) does not include API access; the pro and lifetime plans do.`);
    }
    return { ok: true, account: this.#toAccount(row), keyId: row.key_id };
  }

  /**
   * Takes one unit of `op` for the UTC month of `now`, atomically (one statement; exact under any
   * number of concurrent callers, in this process or others on the same file). Durable when it
   * returns. On { ok: false } nothing was taken and `state` says when the month resets.
   */
  reserve(accountId: number, op: Operation, now: Date = new Date()): ReserveResult {
    const month = monthOf(now);
    const [taken] = this.#reserve.all({ account: accountId, month, op, fallback: this.#defaults[op] });
    if (!taken) return { ok: false, state: this.#state(accountId, op, month, now) };
    const reservation: Reservation = Object.freeze({ accountId, operation: op, month });
    this.#pending.add(reservation);
    return { ok: true, reservation, state: quotaStateOf(op, taken.lim, taken.used, month, now) };
  }

  /** The call succeeded: its unit stays counted. Idempotent; a no-op after `refund`. */
  commit(r: Reservation): void {
    // Nothing to write: reserve already counted the unit durably, which is why a kill -9 after a
    // success loses nothing. Forgetting the reservation is what stops a later refund from undoing it.
    this.#pending.delete(r);
  }

  /** The call failed: give its unit back to the month it came from. Idempotent; a no-op after `commit`. */
  refund(r: Reservation): void {
    if (!this.#pending.has(r)) return;
    // Forgotten only once the write went through: after a failed write (SQLITE_BUSY) a retry still refunds.
    this.#refund.run(r.accountId, r.month, r.operation);
    this.#pending.delete(r);
  }

  /** The counter of `op` this month, for the RateLimit headers of answers that reserved nothing. */
  quotaState(accountId: number, op: Operation, now: Date = new Date()): QuotaState {
    return this.#state(accountId, op, monthOf(now), now);
  }

  // ── operator side ─────────────────────────────────────────────────────────────────────────────

  /** Creates the "default" pro account and one key if the store has no account yet; else undefined. */
  bootstrapIfEmpty(): { account: Account; key: string } | undefined {
    // IMMEDIATE: two servers starting on one empty directory must not both create an account.
    return this.#db
      .transaction(() => {
        if (this.#countAccounts.get()!.n > 0) return undefined;
        const account = this.createAccount(BOOTSTRAP_ACCOUNT, 'pro');
        const { key } = this.issueKey(account.name);
        return { account, key };
      })
      .immediate();
  }

  /** Creates an account with the default limits. */
  createAccount(name: string, plan: Plan, now: Date = new Date()): Account {
    if (!ACCOUNT_NAME.test(name)) {
      throw new StoreError(
        'invalid_account_name',
        `account name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit; got ${JSON.stringify(name)}`,
      );
    }
    checkPlan(plan);
    try {
      return this.#toAccount(this.#insertAccount.all(name, plan, now.toISOString())[0]!);
    } catch (err) {
      if (isSqliteError(err, 'SQLITE_CONSTRAINT_UNIQUE')) {
        throw new StoreError('duplicate_account', `an account named "${name}" already exists (names ignore case)`);
      }
      throw err;
    }
  }

  /** All accounts, by name. */
  listAccounts(): Account[] {
    return this.#allAccounts.all().map((row) => this.#toAccount(row));
  }

  /** One account by name (names ignore case). */
  getAccount(name: string): Account {
    return this.#toAccount(this.#row(name));
  }

  /** Changes an account's plan; applies to the next request. */
  setPlan(name: string, plan: Plan): Account {
    checkPlan(plan);
    const row = this.#row(name);
    this.#setPlan.run(plan, row.id);
    return this.#toAccount({ ...row, plan });
  }

  /** Overrides an account's monthly limits; `null` goes back to the configured default, omitted keeps it. */
  setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Account {
    for (const value of [limits.protect, limits.verify]) {
      if (value != null && (!Number.isSafeInteger(value) || value < 0 || value > MAX_LIMIT)) {
        throw new StoreError('invalid_limit', `a limit must be a whole number from 0 to ${MAX_LIMIT}, got ${value}`);
      }
    }
    return this.#db.transaction(() => {
      const row = this.#row(name);
      const next = {
        ...row,
        protect_limit: limits.protect === undefined ? row.protect_limit : limits.protect,
        verify_limit: limits.verify === undefined ? row.verify_limit : limits.verify,
      };
      this.#setLimits.run(next.protect_limit, next.verify_limit, row.id);
      return this.#toAccount(next);
    }).immediate(); // write lock before the read: a deferred read-then-write could fail SQLITE_BUSY_SNAPSHOT
  }

  /** Issues a key for the account; the only time the key exists outside the client is this return value. */
  issueKey(accountName: string, now: Date = new Date()): { key: string; prefix: string; id: number } {
    const row = this.#row(accountName);
    const key = generateKey();
    const prefix = displayPrefix(key);
    const { id } = this.#insertKey.all(row.id, hashKey(key), prefix, now.toISOString())[0]!;
    return { key, prefix, id };
  }

  /** The account's keys, oldest first, by display prefix only. */
  listKeys(accountName: string): KeyInfo[] {
    return this.#keysOfAccount.all(this.#row(accountName).id).map(toKeyInfo);
  }

  /**
   * Revokes the key a display prefix (at least 12 characters) or a whole key names; applies to the next
   * request. Refuses a prefix shared by several live keys. Revoking a revoked key reports it, unchanged.
   */
  revokeKey(prefix: string, now: Date = new Date()): { prefix: string; account: string; alreadyRevoked: boolean } {
    const key = this.#findKey(prefix.trim());
    const changed = this.#revokeKey.run(now.toISOString(), key.id).changes === 1;
    return { prefix: key.prefix, account: key.account, alreadyRevoked: !changed };
  }

  /** Both counters of an account for a month (default: the current UTC month), with current limits. */
  usage(accountName: string, month?: string, now: Date = new Date()): { month: string; protect: QuotaState; verify: QuotaState } {
    const m = month === undefined ? monthOf(now) : parseMonth(month);
    const { id } = this.#row(accountName);
    return { month: m, protect: this.#state(id, 'protect', m, now), verify: this.#state(id, 'verify', m, now) };
  }

  /**
   * Moves WAL checkpoints to a thread of their own (src/store/checkpoints.ts), for a connection whose
   * commits run on an event loop: the server's. `onError` hears when the thread fails (the connection
   * then checkpoints itself, as by default). Stop with stopBackgroundCheckpoints() before close().
   */
  startBackgroundCheckpoints(options: { intervalMs?: number; onError?: (err: Error) => void } = {}): void {
    if (this.#checkpoints || this.file === ':memory:') return;
    this.#checkpoints = new BackgroundCheckpoints(this.#db, this.file, options);
  }

  async stopBackgroundCheckpoints(): Promise<void> {
    await this.#checkpoints?.stop();
  }

  /** The checkpointer's figures, while one was started. */
  get checkpointStats(): CheckpointStats | undefined {
    return this.#checkpoints?.stats;
  }

  /** Closes the database (checkpointing the WAL if this is the last connection). */
  close(): void {
    if (this.#db.open) this.#db.close();
  }

  // ── helpers ───────────────────────────────────────────────────────────────────────────────────

  #row(name: string): AccountRow {
    const row = this.#accountByName.get(name);
    if (!row) throw new StoreError('unknown_account', `no account named "${name}" (see: optmark account list)`);
    return row;
  }

  #state(accountId: number, op: Operation, month: string, now: Date): QuotaState {
    const row = this.#counter.get({ account: accountId, month, op, fallback: this.#defaults[op] });
    if (!row) throw new StoreError('unknown_account', `no account with id ${accountId}`);
    return quotaStateOf(op, row.lim, row.used, month, now);
  }

  #toAccount(row: AccountRow): Account {
    return {
      id: row.id,
      name: row.name,
      plan: row.plan,
      protectLimit: row.protect_limit ?? this.#defaults.protect,
      verifyLimit: row.verify_limit ?? this.#defaults.verify,
      createdAt: row.created_at,
    };
  }

  #findKey(arg: string): KeyRow {
    // Echo at most a display prefix of what was typed: the argument may be a whole key.
    const shown = JSON.stringify(arg.slice(0, DISPLAY_PREFIX_LENGTH));
    if (isWellFormedKey(arg)) {
      const row = this.#keyByHash.get(hashKey(arg));
      if (!row) throw new StoreError('unknown_key', 'no key matches that key');
      return row;
    }
    if (!isKeyPrefix(arg)) throw new StoreError('unknown_key', `${shown} is not the start of an optmark key (see: optmark key list <account>)`);
    if (arg.length < MIN_REVOKE_PREFIX_LENGTH) {
      throw new StoreError('key_prefix_too_short', `a key prefix needs at least ${MIN_REVOKE_PREFIX_LENGTH} characters, got ${arg.length}`);
    }
    const p = arg.slice(0, DISPLAY_PREFIX_LENGTH);
    const rows = this.#keysByPrefix.all(p, `${p}~`);
    const live = rows.filter((r) => r.revoked_at === null);
    if (rows.length === 0) throw new StoreError('unknown_key', `no key starts with ${shown} (see: optmark key list <account>)`);
    if (live.length > 1 || (live.length === 0 && rows.length > 1)) {
      const candidates = (live.length > 1 ? live : rows).map((r) => `${r.prefix} (${r.account})`).join(', ');
      throw new StoreError('ambiguous_key_prefix', `${shown} matches several keys: ${candidates}; give more characters`);
    }
    return live[0] ?? rows[0]!;
  }
}

function authFailure(code: AuthFailureCode, message: string = defaultMessage(code)): AuthResult {
  return { ok: false, code, message };
}

function checkPlan(plan: string): asserts plan is Plan {
  if (!isPlan(plan)) throw new StoreError('invalid_plan', `plan must be one of ${PLANS.join(', ')}; got ${JSON.stringify(plan)}`);
}

function toKeyInfo(row: KeyRow): KeyInfo {
  return { id: row.id, prefix: row.prefix, createdAt: row.created_at, lastUsedAt: row.last_used_at, revokedAt: row.revoked_at };
}

function isSqliteError(err: unknown, code: string): boolean {
  return err instanceof Error && (err as { code?: unknown }).code === code;
}
