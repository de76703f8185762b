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
import { SqliteScanStore } from '../../scans/jobs/store-sqlite.js';
import { join } from 'node:path';
import { toAccount, unknownAccountId, type AccountRow } from '../accounts.js';
import { BackgroundTimers } from '../background.js';
import { BackgroundCheckpoints } from '../checkpoints.js';
import { LAST_USED_FLUSH_MS, LastUsed, Reservations, authFailure, checkDefaults, isEmptyCounts, keyHashOf, planFailure, reservationLost } from '../common.js';
import { openDatabase, type Db } from '../db.js';
import { IDEMPOTENCY_PRUNE_MS, priorOf, uploadDigest, type IdempotentRequest } from '../idempotency.js';
import {
  LEASE_RENEW_MS,
  RECONCILE_INTERVAL_MS,
  SELECT_OWNERS,
  deadOwners,
  newOwner,
  registration,
  LEASE_MS,
  type OwnerDbRow,
  type OwnerIdentity,
} from '../owners.js';
import { monthOf, quotaStateOf, type Operation, type QuotaState } from '../quota.js';
import type { DashboardRecords } from '../records.js';
import { OperatorSide } from '../operator.js';
import { CheckedDashboardRecords, checkIdempotency } from '../text.js';
import type * as T from '../types.js';
import { SqliteAccounts } from './accounts.js';
import { SqliteIdempotency } from './idempotency.js';
import { sqliteCounts, sqliteRestore, sqliteSnapshot } from './migration.js';
import { SqliteDashboardRecords } from './records.js';
import { SqliteVaultRows } from '../../vault/rows-sqlite.js';
import type { VaultRows } from '../../vault/rows.js';

export interface SqliteStoreOptions {
  dataDir: string;
  defaultProtectLimit: number;
  defaultVerifyLimit: number;
  /** Database path; defaults to `${dataDir}/optmark.db`. */
  file?: string;
  /** How long a write waits for another connection's write lock before store_busy (default 5000 ms). */
  busyTimeoutMs?: number;
}

interface AuthRow extends AccountRow {
  key_id: number;
  last_used_at: string | null;
  revoked_at: string | null;
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

export class SqliteStore extends OperatorSide implements T.Store {
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
  readonly vault: VaultRows;
  readonly scans: SqliteScanStore;
  #timers: BackgroundTimers | undefined;
  #reconciled = 0;
  protected readonly book: SqliteAccounts;

  readonly #authByHash;
  readonly #touchKey;
  readonly #reserveTx;
  readonly #reserveCounter;
  readonly #hold;
  readonly #release;
  readonly #commitRelease;
  readonly #uncount;
  readonly #counter;
  readonly #registerOwner;
  readonly #renewOwner;
  readonly #owners;
  readonly #orphanOwners;
  readonly #releaseOwnerTx;
  readonly #keys: SqliteIdempotency;
  readonly #reserveKeyedTx;

  private constructor(db: Db, file: string, defaults: Record<Operation, number>) {
    super();
    this.#db = db;
    this.file = file;
    this.#defaults = defaults;
    this.dashboard = new CheckedDashboardRecords(new SqliteDashboardRecords(db));
    this.vault = new SqliteVaultRows(db);
    this.scans = new SqliteScanStore(db);
    this.#keys = new SqliteIdempotency(db);
    this.book = new SqliteAccounts(db, defaults, (id, op, month, now) => this.#state(id, op, month, now));
    this.#authByHash = db.prepare<[Buffer], AuthRow>(
      `SELECT a.id, a.name, a.plan, a.protect_limit, a.verify_limit, a.created_at, k.id AS key_id, k.last_used_at, k.revoked_at
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
    this.#registerOwner = db.prepare<[string, string, number, string, number]>(
      'INSERT INTO owners (id, host, pid, started, expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at',
    );
    this.#renewOwner = db.prepare<[number, string]>('UPDATE owners SET expires_at = ? WHERE id = ?');
    this.#owners = db.prepare<[], OwnerDbRow>(SELECT_OWNERS);
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

  async authenticate(authorization: string | undefined, now: Date = new Date()): Promise<T.AuthResult> {
    return this.authenticateSync(authorization, now);
  }

  authenticateSync(authorization: string | undefined, now: Date = new Date()): T.AuthResult {
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

  async reserve(accountId: number, op: Operation, now: Date = new Date(), idempotency?: IdempotentRequest): Promise<T.ReserveResult> {
    return this.reserveSync(accountId, op, now, idempotency);
  }

  reserveSync(accountId: number, op: Operation, now: Date = new Date(), idempotency?: IdempotentRequest): T.ReserveResult {
    checkIdempotency(idempotency);
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

  async commit(r: T.Reservation, now: Date = new Date(), onSent?: () => void): Promise<QuotaState | undefined> {
    if (onSent && this.#reservations.state(r) === undefined) throw reservationLost(); // refunded or reclaimed: no answer
    const state = this.commitSync(r, now);
    onSent?.();
    return state;
  }

  commitSync(r: T.Reservation, now: Date = new Date()): QuotaState | undefined {
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

  async refund(r: T.Reservation, now: Date = new Date()): Promise<QuotaState | undefined> {
    return this.refundSync(r, now);
  }

  refundSync(r: T.Reservation, now: Date = new Date()): QuotaState | undefined {
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
    const dead = deadOwners(this.#owners.all(), this.#owner, now.getTime());
    for (const { owner } of this.#orphanOwners.all()) if (owner !== this.#owner.id) dead.push(owner);
    let units = 0;
    for (const id of dead) units += this.#releaseOwnerTx.immediate(id);
    this.#reconciled += units;
    return units;
  }

  async pruneIdempotencyKeys(now: Date = new Date()): Promise<number> {
    return this.#keys.prune(now.getTime());
  }

  // ── shared secrets: the data directory's files hold them for SQLite ───────────────────────────

  async recordPublicKey(): Promise<boolean> {
    return false;
  }

  async listPublicKeys(): Promise<T.StoredPublicKey[]> {
    return [];
  }

  async sharedSecret(_name: string, create: () => Buffer): Promise<Buffer> {
    return create();
  }

  async onPublicKeysChanged(): Promise<() => Promise<void>> {
    return async () => undefined;
  }

  // ── migration ─────────────────────────────────────────────────────────────────────────────────

  async counts(): Promise<T.StoreCounts> {
    return sqliteCounts(this.#db);
  }

  async isEmpty(): Promise<boolean> {
    return isEmptyCounts(await this.counts());
  }

  async snapshot(months?: string[]): Promise<T.StoreSnapshot> {
    return sqliteSnapshot(this.#db, months);
  }

  async restore(s: T.StoreSnapshot): Promise<void> {
    sqliteRestore(this.#db, s);
  }

  // ── lifecycle ─────────────────────────────────────────────────────────────────────────────────

  /**
   * The server's background work: WAL checkpoints on a thread of their own (src/store/checkpoints.ts),
   * the lease heartbeat, a reconciliation now (units held by a process that was killed are given back
   * before the first request) and every second, and the batched last-used writes.
   */
  async startBackground(options: T.BackgroundOptions = {}): Promise<void> {
    if (this.#timers?.running) return;
    const timers = (this.#timers = new BackgroundTimers(options));
    this.startBackgroundCheckpoints({ intervalMs: options.checkpointIntervalMs, onError: (err) => timers.report('checkpoints', err) });
    this.#register(Date.now());
    const reconcile = () => {
      const units = this.reconcileSync();
      if (units > 0) options.onReconciled?.(units);
    };
    await timers.run('reconcile', reconcile);
    timers.every(RECONCILE_INTERVAL_MS, 'reconcile', reconcile);
    timers.every(LEASE_RENEW_MS, 'lease', () => this.#renew(Date.now()));
    timers.every(LAST_USED_FLUSH_MS, 'last-used', () => this.flushLastUsed());
    timers.every(IDEMPOTENCY_PRUNE_MS, 'idempotency keys', () => this.#keys.prune(Date.now()));
  }

  async stopBackground(): Promise<void> {
    this.#timers?.stop();
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

  get stats(): T.StoreStats {
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
    this.#timers?.stop();
    if (!this.#db.open) return;
    try {
      this.flushLastUsed();
      // Whatever this instance still holds was never answered: give it back now rather than at expiry.
      if (this.#registered) this.#releaseOwnerTx.immediate(this.#owner.id);
    } finally {
      this.#db.close();
    }
  }

  // ── helpers ───────────────────────────────────────────────────────────────────────────────────

  #register(now: number): void {
    const o = this.#owner;
    this.#registerOwner.run(...registration(o, now));
    this.#registered = true;
  }

  #renew(now: number): void {
    // A missing row means another instance took this one for dead and gave its units back: register
    // again; the reservations it held fail at commit (reservation_lost).
    if (this.#renewOwner.run(now + LEASE_MS, this.#owner.id).changes === 0) this.#register(now);
  }

  protected flushLastUsed(): void {
    if (this.#lastUsed.size === 0) return;
    const rows = this.#lastUsed.take();
    this.#db.transaction(() => {
      for (const { id, at } of rows) this.#touchKey.run(at, id, at);
    })();
  }

  #state(accountId: number, op: Operation, month: string, now: Date): QuotaState {
    const row = this.#counter.get({ account: accountId, month, op, fallback: this.#defaults[op] });
    if (!row) throw unknownAccountId(accountId);
    return quotaStateOf(op, row.lim, row.used, month, now);
  }

  #toAccount(row: AccountRow): T.Account {
    return toAccount(row, this.#defaults);
  }
}
