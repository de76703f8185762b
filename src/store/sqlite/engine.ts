/**
 * The embedded engine: accounts, API keys and monthly usage counters in one WAL-mode SQLite file
 * (`${dataDir}/optmark.db`), for one machine. better-sqlite3 is synchronous: each call below is a few
 * microseconds on the calling thread, wrapped in the store's asynchronous interface.
 *
 * The request path is `authenticate` (one indexed lookup by key hash, not cached: a revocation by the
 * CLI applies to the next request), `reserve` (one transaction: the counter grows only while under the
 * limit, and the reservation's hold row is inserted with it), and `commit` (the row goes) or `refund` (the
 * row goes and the counter shrinks). Processes on the same file see each other's units at once.
 */
import { join } from 'node:path';
import { BackgroundCheckpoints } from '../checkpoints.js';
import { openDatabase, type Db } from '../db.js';
import { StoreError } from '../errors.js';
import { displayPrefix, generateKey, hashKey } from '../keys.js';
import { monthOf, parseMonth, quotaStateOf, type Operation, type QuotaState } from '../quota.js';
import {
  BOOTSTRAP_ACCOUNT,
  LAST_USED_FLUSH_MS,
  LEASE_MS,
  LEASE_RENEW_MS,
  LastUsed,
  RECONCILE_INTERVAL_MS,
  Reservations,
  authFailure,
  checkAccountName,
  checkDefaults,
  checkLimits,
  checkPlan,
  isDead,
  isEmptyCounts,
  keyHashOf,
  keyLookup,
  newOwner,
  pickByPrefix,
  planFailure,
  reservationLost,
  unknownAccount,
  type OwnerIdentity,
  type OwnerRow,
} from '../common.js';
import type {
  Account,
  AuthResult,
  BackgroundOptions,
  KeyInfo,
  Plan,
  Reservation,
  ReserveResult,
  Store,
  StoreCounts,
  StoreSnapshot,
  StoreStats,
  StoredPublicKey,
  Usage,
} from '../types.js';
import { RECORD_COLUMNS, recordValues, toBatch, toRecord, type BatchRow, type DashboardRecords, type RecordRow } from '../records.js';
import { SqliteDashboardRecords } from './records.js';
import { SqliteIdempotency } from './idempotency.js';
import { IDEMPOTENCY_PRUNE_MS, priorOf, uploadDigest, type IdempotentRequest } from '../idempotency.js';

export interface SqliteStoreOptions {
  dataDir: string;
  defaultProtectLimit: number;
  defaultVerifyLimit: number;
  /** Database path; defaults to `${dataDir}/optmark.db`. */
  file?: string;
  /** How long a write waits for another connection's write lock before store_busy (default 5000 ms). */
  busyTimeoutMs?: number;
}

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

interface HoldParams {
  owner: string;
  /** The reservation's hold id. */
  hold: number;
  account: number;
  month: string;
  op: Operation;
}

// The effective limit of :op for account row `a`: its override, else the default passed in by this process.
const LIMIT_OF_A = `coalesce(CASE :op WHEN 'protect' THEN a.protect_limit ELSE a.verify_limit END, :fallback)`;
const ACCOUNT_COLUMNS = 'a.id, a.name, a.plan, a.protect_limit, a.verify_limit, a.created_at';

export class SqliteStore implements Store {
  readonly engine = 'sqlite' as const;
  readonly sharesSecrets = false;
  readonly file: string;
  readonly #db: Db;
  readonly #defaults: Record<Operation, number>;
  readonly #reservations = new Reservations();
  readonly #owner: OwnerIdentity = newOwner();
  /** The next reservation's hold id (unique within this store's owner id). */
  #nextHold = 1;
  readonly #lastUsed = new LastUsed();
  #registered = false;
  #checkpoints: BackgroundCheckpoints | undefined;
  readonly dashboard: DashboardRecords;
  #timers: NodeJS.Timeout[] = [];
  #reconciled = 0;

  readonly #authByHash;
  readonly #touchKey;
  readonly #reserveTx;
  readonly #reserveCounter;
  readonly #hold;
  readonly #release;
  readonly #commitRelease;
  readonly #uncount;
  readonly #counter;
  readonly #accountByName;
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
  readonly #registerOwner;
  readonly #renewOwner;
  readonly #owners;
  readonly #orphanOwners;
  readonly #releaseOwnerTx;
  readonly #heldOf;
  readonly #keys: SqliteIdempotency;
  readonly #reserveKeyedTx;

  private constructor(db: Db, file: string, defaults: Record<Operation, number>) {
    this.#db = db;
    this.file = file;
    this.#defaults = defaults;
    this.dashboard = new SqliteDashboardRecords(db);
    this.#keys = new SqliteIdempotency(db);
    this.#authByHash = db.prepare<[Buffer], AuthRow>(
      `SELECT ${ACCOUNT_COLUMNS}, k.id AS key_id, k.last_used_at, k.revoked_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = ?`,
    );
    this.#touchKey = db.prepare<[string, number, string]>('UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)');
    // The counter is the one row every reservation of an account goes through, so the limit check is
    // atomic against every other connection: a new month's row starts at 1 if the limit allows any unit,
    // an existing row grows only while below the limit; no row returned = over the limit (or no account).
    // Writes with RETURNING are read with .all(), never .get(): .get() ends the statement in a reset,
    // which skips SQLite's WAL hook, so the WAL would never be checkpointed or rewound by them.
    this.#reserveCounter = db.prepare<[CounterParams], { used: number; lim: number }>(
      `INSERT INTO usage_counters (account_id, month, operation, used)
         SELECT a.id, :month, :op, 1 FROM accounts a WHERE a.id = :account AND ${LIMIT_OF_A} > 0
       ON CONFLICT (account_id, month, operation) DO UPDATE SET used = used + 1
         WHERE used < (SELECT ${LIMIT_OF_A} FROM accounts a WHERE a.id = :account)
       RETURNING used, (SELECT ${LIMIT_OF_A} FROM accounts a WHERE a.id = :account) AS lim`,
    );
    this.#hold = db.prepare<[HoldParams]>('INSERT INTO reservations (owner, id, account_id, month, operation) VALUES (:owner, :hold, :account, :month, :op)');
    // One transaction: the unit is counted and held together, or neither.
    this.#reserveTx = db.transaction((p: CounterParams & HoldParams) => {
      const [taken] = this.#reserveCounter.all(p);
      if (taken) this.#hold.run(p);
      return taken;
    });
    // The same with an Idempotency-Key: a key this account already has takes no unit; else the key is
    // taken with the unit, or not at all (over the limit).
    this.#reserveKeyedTx = db.transaction((p: CounterParams & HoldParams, key: string, nowMs: number) => {
      const prior = this.#keys.find(p.account, key, nowMs);
      if (prior) return { prior };
      const [taken] = this.#reserveCounter.all(p);
      if (taken) {
        this.#hold.run(p);
        this.#keys.take(p.account, key, p.op, p.owner, nowMs);
      }
      return { taken };
    });
    this.#release = db.prepare<[HoldParams]>(
      'DELETE FROM reservations WHERE owner = :owner AND id = :hold AND account_id = :account AND month = :month AND operation = :op',
    );
    this.#commitRelease = db.prepare<[HoldParams & { now: string; fallback: number }], { used: number; lim: number }>(
      `DELETE FROM reservations WHERE owner = :owner AND id = :hold AND account_id = :account AND month = :month AND operation = :op
       RETURNING coalesce((SELECT used FROM usage_counters u WHERE u.account_id = :account AND u.month = :now AND u.operation = :op), 0) AS used,
                 (SELECT ${LIMIT_OF_A} FROM accounts a WHERE a.id = :account) AS lim`,
    );
    this.#uncount = db.prepare<[number, string, Operation]>(
      'UPDATE usage_counters SET used = used - 1 WHERE account_id = ? AND month = ? AND operation = ? AND used > 0',
    );
    this.#counter = db.prepare<[CounterParams], { used: number; lim: number }>(
      `SELECT ${LIMIT_OF_A} AS lim,
              coalesce((SELECT used FROM usage_counters u
                         WHERE u.account_id = a.id AND u.month = :month AND u.operation = :op), 0) AS used
         FROM accounts a WHERE a.id = :account`,
    );
    this.#accountByName = db.prepare<[string], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a WHERE a.name = ?`);
    this.#allAccounts = db.prepare<[], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a ORDER BY a.name`);
    this.#insertAccount = db.prepare<[string, Plan, string], AccountRow>(
      `INSERT INTO accounts (name, plan, created_at) VALUES (?, ?, ?)
       RETURNING id, name, plan, protect_limit, verify_limit, created_at`,
    );
    this.#setPlan = db.prepare<[Plan, number]>('UPDATE accounts SET plan = ? WHERE id = ?');
    this.#setLimits = db.prepare<[number | null, number | null, number]>('UPDATE accounts SET protect_limit = ?, verify_limit = ? WHERE id = ?');
    this.#countAccounts = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM accounts');
    this.#insertKey = db.prepare<[number, Buffer, string, string], { id: number }>(
      'INSERT INTO api_keys (account_id, hash, prefix, created_at) VALUES (?, ?, ?, ?) RETURNING id',
    );
    const keyColumns = 'k.id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, a.name AS account';
    this.#keysOfAccount = db.prepare<[number], KeyRow>(
      `SELECT ${keyColumns} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.account_id = ? ORDER BY k.id`,
    );
    this.#keyByHash = db.prepare<[Buffer], KeyRow>(`SELECT ${keyColumns} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = ?`);
    // A range instead of LIKE: '_' in the fixed prefix is a LIKE wildcard, and '~' sorts after every
    // base62 character, so [p, p + '~') is exactly "starts with p" and uses the prefix index.
    this.#keysByPrefix = db.prepare<[string, string], KeyRow>(
      `SELECT ${keyColumns} FROM api_keys k JOIN accounts a ON a.id = k.account_id
        WHERE k.prefix >= ? AND k.prefix < ? ORDER BY k.id`,
    );
    this.#revokeKey = db.prepare<[string, number]>('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
    this.#registerOwner = db.prepare<[string, string, number, string, number]>(
      'INSERT INTO owners (id, host, pid, started, expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at',
    );
    this.#renewOwner = db.prepare<[number, string]>('UPDATE owners SET expires_at = ? WHERE id = ?');
    this.#owners = db.prepare<[], { id: string; host: string; pid: number; started: string; expires_at: number }>(
      'SELECT id, host, pid, started, expires_at FROM owners',
    );
    this.#orphanOwners = db.prepare<[], { owner: string }>(
      'SELECT owner FROM reservations WHERE owner NOT IN (SELECT id FROM owners) UNION SELECT owner FROM holds WHERE owner NOT IN (SELECT id FROM owners)',
    );
    // `holds`: the counts of owners of an optmark before the hold rows (schema 5), during a rolling restart.
    const heldRows = db.prepare<[string, string], { account_id: number; month: string; operation: Operation; n: number }>(
      `SELECT account_id, month, operation, sum(n) AS n FROM (
         SELECT account_id, month, operation, n FROM holds WHERE owner = ?
         UNION ALL SELECT account_id, month, operation, 1 FROM reservations WHERE owner = ?
       ) GROUP BY account_id, month, operation`,
    );
    const giveBack = db.prepare<[number, number, string, Operation]>(
      'UPDATE usage_counters SET used = max(0, used - ?) WHERE account_id = ? AND month = ? AND operation = ?',
    );
    const dropHolds = db.prepare<[string]>('DELETE FROM holds WHERE owner = ?');
    const dropReservations = db.prepare<[string]>('DELETE FROM reservations WHERE owner = ?');
    const dropOwner = db.prepare<[string]>('DELETE FROM owners WHERE id = ?');
    // Everything the owner held goes back to its counters, and its rows go, in one transaction.
    this.#releaseOwnerTx = db.transaction((owner: string): number => {
      let units = 0;
      for (const h of heldRows.all(owner, owner)) {
        if (h.n > 0) giveBack.run(h.n, h.account_id, h.month, h.operation);
        units += h.n;
      }
      dropHolds.run(owner);
      dropReservations.run(owner);
      this.#keys.dropHeldOf(owner);
      dropOwner.run(owner);
      return units;
    });
    this.#heldOf = db.prepare<[{ account: number; month: string }], { operation: Operation; n: number }>(
      `SELECT operation, sum(n) AS n FROM (
         SELECT operation, n FROM holds WHERE account_id = :account AND month = :month
         UNION ALL SELECT operation, 1 FROM reservations WHERE account_id = :account AND month = :month
       ) GROUP BY operation`,
    );
  }

  /** Opens or creates `${dataDir}/optmark.db` (WAL), migrating its schema. */
  static async open(opts: SqliteStoreOptions): Promise<SqliteStore> {
    return SqliteStore.openSync(opts);
  }

  /** The same, synchronously (benchmarks and child-process fixtures). */
  static openSync(opts: SqliteStoreOptions): SqliteStore {
    checkDefaults(opts);
    const file = opts.file ?? join(opts.dataDir, 'optmark.db');
    return new SqliteStore(openDatabase(file, opts.busyTimeoutMs), file, { protect: opts.defaultProtectLimit, verify: opts.defaultVerifyLimit });
  }

  get location(): string {
    return this.file;
  }

  get instanceId(): string {
    return this.#owner.id;
  }

  // ── request path ──────────────────────────────────────────────────────────────────────────────

  async authenticate(authorization: string | undefined, now: Date = new Date()): Promise<AuthResult> {
    return this.authenticateSync(authorization, now);
  }

  authenticateSync(authorization: string | undefined, now: Date = new Date()): AuthResult {
    const key = keyHashOf(authorization);
    if ('failure' in key) return key.failure;
    const row = this.#authByHash.get(key.hash);
    if (!row) return authFailure('invalid_api_key');
    if (row.revoked_at !== null) return authFailure('invalid_api_key', 'The API key has been revoked.');
    this.#lastUsed.note(row.key_id, row.last_used_at, now);
    const refused = planFailure(row.plan);
    if (refused) return refused;
    return { ok: true, account: this.#toAccount(row), keyId: row.key_id };
  }

  async reserve(accountId: number, op: Operation, now: Date = new Date(), idempotency?: IdempotentRequest): Promise<ReserveResult> {
    return this.reserveSync(accountId, op, now, idempotency);
  }

  reserveSync(accountId: number, op: Operation, now: Date = new Date(), idempotency?: IdempotentRequest): ReserveResult {
    if (!this.#registered) this.#register(now.getTime());
    const month = monthOf(now);
    const p = { account: accountId, month, op, fallback: this.#defaults[op], owner: this.#owner.id, hold: this.#nextHold++ };
    let taken: { used: number; lim: number } | undefined;
    if (idempotency) {
      const keyed = this.#reserveKeyedTx.immediate(p, idempotency.key, now.getTime());
      if (keyed.prior) return { ok: false, state: this.#state(accountId, op, month, now), prior: priorOf(keyed.prior) };
      taken = keyed.taken;
    } else {
      taken = this.#reserveTx.immediate(p);
    }
    if (!taken) return { ok: false, state: this.#state(accountId, op, month, now) };
    return {
      ok: true,
      reservation: this.#reservations.create(p.hold, accountId, op, month, idempotency),
      state: quotaStateOf(op, taken.lim, taken.used, month, now),
    };
  }

  async commit(r: Reservation, now: Date = new Date(), onSent?: () => void): Promise<QuotaState | undefined> {
    if (onSent && this.#reservations.state(r) === undefined) throw reservationLost(); // refunded or reclaimed: no answer
    const state = this.commitSync(r, now);
    onSent?.();
    return state;
  }

  commitSync(r: Reservation, now: Date = new Date()): QuotaState | undefined {
    if (this.#reservations.state(r) !== 'held') return undefined;
    const month = monthOf(now);
    const owner = this.#owner.id;
    // One statement: the hold taken off, and the counter read back for the RateLimit headers.
    const release = () => {
      const [row] = this.#commitRelease.all({
        owner,
        hold: r.id,
        account: r.accountId,
        month: r.month,
        op: r.operation,
        now: month,
        fallback: this.#defaults[r.operation],
      });
      return row;
    };
    // With its key, committed in the same transaction.
    const key = r.idempotency;
    const row = key
      ? this.#db
          .transaction((sha256: string) => {
            const released = release();
            if (released) this.#keys.commit(r.accountId, key.key, owner, sha256, now.getTime());
            return released;
          })
          .immediate(uploadDigest(key))
      : release();
    if (!row) {
      this.#reservations.set(r, undefined);
      throw reservationLost();
    }
    this.#reservations.set(r, 'committed');
    return quotaStateOf(r.operation, row.lim, row.used, month, now);
  }

  async refund(r: Reservation, now: Date = new Date()): Promise<QuotaState | undefined> {
    return this.refundSync(r, now);
  }

  refundSync(r: Reservation, now: Date = new Date()): QuotaState | undefined {
    const state = this.#reservations.state(r);
    if (state === undefined) return undefined;
    this.#db
      .transaction(() => {
        // A held unit comes back only if this instance still holds it (else a reconciliation did it).
        const held =
          state === 'held' && this.#release.run({ owner: this.#owner.id, hold: r.id, account: r.accountId, month: r.month, op: r.operation }).changes === 1;
        if (held || state === 'committed') this.#uncount.run(r.accountId, r.month, r.operation);
        if (r.idempotency) this.#keys.drop(r.accountId, r.idempotency.key, this.#owner.id);
      })
      .immediate();
    // Forgotten only once the write went through: after a failed write (SQLITE_BUSY) a retry still refunds.
    this.#reservations.set(r, undefined);
    return this.#state(r.accountId, r.operation, monthOf(now), now);
  }

  async quotaState(accountId: number, op: Operation, now: Date = new Date()): Promise<QuotaState> {
    return this.#state(accountId, op, monthOf(now), now);
  }

  async reconcile(now: Date = new Date()): Promise<number> {
    return this.reconcileSync(now);
  }

  reconcileSync(now: Date = new Date()): number {
    const t = now.getTime();
    const dead: string[] = [];
    for (const o of this.#owners.all()) {
      const row: OwnerRow = { id: o.id, host: o.host, pid: o.pid, started: o.started, expiresAt: o.expires_at };
      if (isDead(row, this.#owner, t)) dead.push(o.id);
    }
    for (const { owner } of this.#orphanOwners.all()) if (owner !== this.#owner.id) dead.push(owner);
    let units = 0;
    for (const id of dead) units += this.#releaseOwnerTx.immediate(id);
    this.#reconciled += units;
    return units;
  }

  async pruneIdempotencyKeys(now: Date = new Date()): Promise<number> {
    return this.#keys.prune(now.getTime());
  }

  // ── operator side ─────────────────────────────────────────────────────────────────────────────

  async bootstrapIfEmpty(): Promise<{ account: Account; key: string } | undefined> {
    // IMMEDIATE: two servers starting on one empty directory must not both create an account.
    return this.#db
      .transaction(() => {
        if (this.#countAccounts.get()!.n > 0) return undefined;
        const account = this.#createAccount(BOOTSTRAP_ACCOUNT, 'pro', new Date());
        const { key } = this.#issueKey(account.name, new Date());
        return { account, key };
      })
      .immediate();
  }

  async createAccount(name: string, plan: Plan, now: Date = new Date()): Promise<Account> {
    return this.#createAccount(name, plan, now);
  }

  #createAccount(name: string, plan: Plan, now: Date): Account {
    checkAccountName(name);
    checkPlan(plan);
    try {
      return this.#toAccount(this.#insertAccount.all(name, plan, now.toISOString())[0]!);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE') {
        throw new StoreError('duplicate_account', `an account named "${name}" already exists (names ignore case)`);
      }
      throw err;
    }
  }

  async listAccounts(): Promise<Account[]> {
    return this.#allAccounts.all().map((row) => this.#toAccount(row));
  }

  async getAccount(name: string): Promise<Account> {
    return this.#toAccount(this.#row(name));
  }

  async setPlan(name: string, plan: Plan): Promise<Account> {
    checkPlan(plan);
    const row = this.#row(name);
    this.#setPlan.run(plan, row.id);
    return this.#toAccount({ ...row, plan });
  }

  async setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Promise<Account> {
    checkLimits(limits);
    return this.#db
      .transaction(() => {
        const row = this.#row(name);
        const next = {
          ...row,
          protect_limit: limits.protect === undefined ? row.protect_limit : limits.protect,
          verify_limit: limits.verify === undefined ? row.verify_limit : limits.verify,
        };
        this.#setLimits.run(next.protect_limit, next.verify_limit, row.id);
        return this.#toAccount(next);
      })
      .immediate(); // write lock before the read: a deferred read-then-write could fail SQLITE_BUSY_SNAPSHOT
  }

  async issueKey(accountName: string, now: Date = new Date()): Promise<{ key: string; prefix: string; id: number }> {
    return this.#issueKey(accountName, now);
  }

  #issueKey(accountName: string, now: Date): { key: string; prefix: string; id: number } {
    const row = this.#row(accountName);
    const key = generateKey();
    const prefix = displayPrefix(key);
    const { id } = this.#insertKey.all(row.id, hashKey(key), prefix, now.toISOString())[0]!;
    return { key, prefix, id };
  }

  async listKeys(accountName: string): Promise<KeyInfo[]> {
    this.#flushLastUsed();
    return this.#keysOfAccount.all(this.#row(accountName).id).map(toKeyInfo);
  }

  async revokeKey(prefix: string, now: Date = new Date()): Promise<{ prefix: string; account: string; alreadyRevoked: boolean }> {
    const key = this.#findKey(prefix.trim());
    const changed = this.#revokeKey.run(now.toISOString(), key.id).changes === 1;
    return { prefix: key.prefix, account: key.account, alreadyRevoked: !changed };
  }

  async usage(accountName: string, month?: string, now: Date = new Date()): Promise<Usage> {
    const m = month === undefined ? monthOf(now) : parseMonth(month);
    const { id } = this.#row(accountName);
    const held = { protect: 0, verify: 0 };
    for (const h of this.#heldOf.all({ account: id, month: m })) held[h.operation] = h.n;
    return { month: m, protect: this.#state(id, 'protect', m, now), verify: this.#state(id, 'verify', m, now), held };
  }

  // ── shared secrets: the data directory's files hold them for SQLite ───────────────────────────

  async recordPublicKey(): Promise<boolean> {
    return false;
  }

  async listPublicKeys(): Promise<StoredPublicKey[]> {
    return [];
  }

  async sharedSecret(_name: string, create: () => Buffer): Promise<Buffer> {
    return create();
  }

  async onPublicKeysChanged(): Promise<() => Promise<void>> {
    return async () => undefined;
  }

  // ── migration ─────────────────────────────────────────────────────────────────────────────────

  async counts(): Promise<StoreCounts> {
    const row = this.#db
      .prepare<[], Omit<StoreCounts, 'publicKeys' | 'secrets'>>(
        `SELECT (SELECT count(*) FROM accounts) AS accounts, (SELECT count(*) FROM api_keys) AS keys,
                (SELECT count(*) FROM usage_counters) AS counters, (SELECT count(*) FROM dashboard_batches) AS batches,
                (SELECT count(*) FROM dashboard_records) AS records`,
      )
      .get()!;
    // Public keys and secrets are the data directory's files.
    return { ...row, publicKeys: 0, secrets: 0 };
  }

  async isEmpty(): Promise<boolean> {
    return isEmptyCounts(await this.counts());
  }

  async snapshot(months?: string[]): Promise<StoreSnapshot> {
    const db = this.#db;
    return db
      .transaction((): StoreSnapshot => {
        const accounts = db
          .prepare<[], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a ORDER BY a.id`)
          .all()
          .map((a) => ({ name: a.name, plan: a.plan, protectLimit: a.protect_limit, verifyLimit: a.verify_limit, createdAt: a.created_at }));
        const keys = db
          .prepare<[], { account: string; hash: Buffer; prefix: string; created_at: string; last_used_at: string | null; revoked_at: string | null }>(
            'SELECT a.name AS account, k.hash, k.prefix, k.created_at, k.last_used_at, k.revoked_at FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id',
          )
          .all()
          .map((k) => ({ account: k.account, hash: k.hash, prefix: k.prefix, createdAt: k.created_at, lastUsedAt: k.last_used_at, revokedAt: k.revoked_at }));
        const wanted = months && new Set(months);
        const counters = db
          .prepare<[], { account: string; month: string; operation: Operation; used: number; held: number }>(
            `SELECT a.name AS account, u.month, u.operation, u.used,
                    coalesce((SELECT sum(n) FROM holds h WHERE h.account_id = u.account_id AND h.month = u.month AND h.operation = u.operation), 0)
                    + (SELECT count(*) FROM reservations r WHERE r.account_id = u.account_id AND r.month = u.month AND r.operation = u.operation) AS held
               FROM usage_counters u JOIN accounts a ON a.id = u.account_id ORDER BY a.id, u.month, u.operation`,
          )
          .all()
          .filter((c) => !wanted || wanted.has(c.month))
          .map((c) => ({ account: c.account, month: c.month, operation: c.operation, used: Math.max(0, c.used - c.held) }));
        const batches = db
          .prepare<[], BatchRow & { account: string }>(
            'SELECT b.*, a.name AS account FROM dashboard_batches b JOIN accounts a ON a.id = b.account_id ORDER BY b.created_at, b.id',
          )
          .all()
          .map((r) => ({ ...toBatch(r), account: r.account }));
        const records = db
          .prepare<[], RecordRow & { account: string }>(
            'SELECT d.*, a.name AS account FROM dashboard_records d JOIN accounts a ON a.id = d.account_id ORDER BY d.marked_at, d.id',
          )
          .all()
          .map((r) => ({ ...toRecord(r), account: r.account }));
        return { accounts, keys, counters, batches, records, publicKeys: [], secrets: [] };
      })
      .deferred();
  }

  async restore(s: StoreSnapshot): Promise<void> {
    const db = this.#db;
    db.transaction(() => {
      db.exec(
        'DELETE FROM dashboard_records; DELETE FROM dashboard_batches; DELETE FROM reservations; DELETE FROM holds; DELETE FROM usage_counters; DELETE FROM api_keys; DELETE FROM accounts;',
      );
      const ids = new Map<string, number>();
      const idOf = (name: string): number => {
        const id = ids.get(name.toLowerCase());
        if (id === undefined) throw unknownAccount(name);
        return id;
      };
      const insA = db.prepare<[string, Plan, number | null, number | null, string], { id: number }>(
        'INSERT INTO accounts (name, plan, protect_limit, verify_limit, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id',
      );
      for (const a of s.accounts) ids.set(a.name.toLowerCase(), insA.all(a.name, a.plan, a.protectLimit, a.verifyLimit, a.createdAt)[0]!.id);
      const insK = db.prepare('INSERT INTO api_keys (account_id, hash, prefix, created_at, last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)');
      for (const k of s.keys) insK.run(idOf(k.account), k.hash, k.prefix, k.createdAt, k.lastUsedAt, k.revokedAt);
      const insC = db.prepare('INSERT INTO usage_counters (account_id, month, operation, used) VALUES (?, ?, ?, ?)');
      for (const c of s.counters) insC.run(idOf(c.account), c.month, c.operation, c.used);
      const insB = db.prepare(
        'INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, used, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      );
      for (const b of s.batches) insB.run(b.id, idOf(b.account), b.keyPrefix, b.size, b.provenance ? 1 : 0, b.fingerprint ? 1 : 0, b.used, b.createdAt);
      const insR = db.prepare(`INSERT INTO dashboard_records (id, account_id, ${RECORD_COLUMNS.slice(4)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
      for (const r of s.records) insR.run(...recordValues(idOf(r.account), r));
    }).immediate();
  }

  // ── lifecycle ─────────────────────────────────────────────────────────────────────────────────

  /**
   * The server's background work: WAL checkpoints on a thread of their own (src/store/checkpoints.ts),
   * the lease heartbeat, a reconciliation now (units held by a process that was killed are given back
   * before the first request) and every second, and the batched last-used writes.
   */
  async startBackground(options: BackgroundOptions = {}): Promise<void> {
    if (this.#timers.length > 0) return;
    const report = (what: string) => (err: unknown) => options.onError?.(err instanceof Error ? err : new Error(String(err)), what);
    this.startBackgroundCheckpoints({ intervalMs: options.checkpointIntervalMs, onError: report('checkpoints') });
    this.#register(Date.now());
    const reconcile = () => {
      try {
        const units = this.reconcileSync();
        if (units > 0) options.onReconciled?.(units);
      } catch (err) {
        report('reconcile')(err);
      }
    };
    reconcile();
    const every = (ms: number, fn: () => void) => {
      const t = setInterval(fn, ms);
      t.unref();
      this.#timers.push(t);
    };
    every(RECONCILE_INTERVAL_MS, reconcile);
    every(LEASE_RENEW_MS, () => {
      try {
        this.#renew(Date.now());
      } catch (err) {
        report('lease')(err);
      }
    });
    every(LAST_USED_FLUSH_MS, () => {
      try {
        this.#flushLastUsed();
      } catch (err) {
        report('last-used')(err);
      }
    });
    every(IDEMPOTENCY_PRUNE_MS, () => {
      try {
        this.#keys.prune(Date.now());
      } catch (err) {
        report('idempotency keys')(err);
      }
    });
  }

  async stopBackground(): Promise<void> {
    for (const t of this.#timers.splice(0)) clearInterval(t);
    await this.stopBackgroundCheckpoints();
  }

  /**
   * Moves WAL checkpoints to a thread of their own (src/store/checkpoints.ts), for a connection whose
   * commits run on an event loop: the server's. `onError` hears when the thread fails (the connection
   * then checkpoints itself, as by default). Stop with stopBackgroundCheckpoints() before close().
   */
  startBackgroundCheckpoints(options: { intervalMs?: number | undefined; onError?: (err: Error) => void } = {}): void {
    if (this.#checkpoints || this.file === ':memory:') return;
    this.#checkpoints = new BackgroundCheckpoints(this.#db, this.file, { intervalMs: options.intervalMs, onError: options.onError });
  }

  async stopBackgroundCheckpoints(): Promise<void> {
    await this.#checkpoints?.stop();
  }

  get stats(): StoreStats {
    return { engine: 'sqlite', checkpoints: this.#checkpoints?.stats, reconciledUnits: this.#reconciled };
  }

  /** The checkpointer's figures, while one was started. */
  get checkpointStats() {
    return this.#checkpoints?.stats;
  }

  async close(): Promise<void> {
    this.closeSync();
  }

  closeSync(): void {
    for (const t of this.#timers.splice(0)) clearInterval(t);
    if (!this.#db.open) return;
    try {
      this.#flushLastUsed();
      // Whatever this instance still holds was never answered: give it back now rather than at expiry.
      if (this.#registered) this.#releaseOwnerTx.immediate(this.#owner.id);
    } finally {
      this.#db.close();
    }
  }

  // ── helpers ───────────────────────────────────────────────────────────────────────────────────

  #register(now: number): void {
    const o = this.#owner;
    this.#registerOwner.run(o.id, o.host, o.pid, o.started, now + LEASE_MS);
    this.#registered = true;
  }

  #renew(now: number): void {
    // A missing row means another instance took this one for dead and gave its units back: register
    // again; the reservations it held fail at commit (reservation_lost).
    if (this.#renewOwner.run(now + LEASE_MS, this.#owner.id).changes === 0) this.#register(now);
  }

  #flushLastUsed(): void {
    if (this.#lastUsed.size === 0) return;
    const rows = this.#lastUsed.take();
    this.#db.transaction(() => {
      for (const { id, at } of rows) this.#touchKey.run(at, id, at);
    })();
  }

  #row(name: string): AccountRow {
    const row = this.#accountByName.get(name);
    if (!row) throw unknownAccount(name);
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
    const lookup = keyLookup(arg);
    if (lookup.kind === 'whole') {
      const row = this.#keyByHash.get(hashKey(lookup.key));
      if (!row) throw new StoreError('unknown_key', 'no key matches that key');
      return row;
    }
    const rows = this.#keysByPrefix.all(lookup.prefix, `${lookup.prefix}~`).map((r) => ({ ...r, revoked: r.revoked_at !== null }));
    return pickByPrefix(rows, lookup.shown);
  }
}

function toKeyInfo(row: KeyRow): KeyInfo {
  return { id: row.id, prefix: row.prefix, createdAt: row.created_at, lastUsedAt: row.last_used_at, revokedAt: row.revoked_at };
}
