/**
 * The shared engine: PostgreSQL through the `pg` client and a bounded pool, for any number of optmark
 * instances behind a load balancer (OPTMARK_DATABASE_URL=postgres://...). The parts:
 *
 * - ./connection.ts: the pool, its settings, the migration at open, and `store_unavailable` (a query that
 *   fails for want of the database: the API answers 503 with Retry-After).
 * - ./quotas.ts: reserve, commit, refund (one statement each, ./statements.ts), gathered per event-loop
 *   turn and pipelined by ./batched.ts; ./owners.ts: the owner ids and leases the holds are under, and the
 *   reconciliation that gives a dead instance's units back.
 * - ./auth.ts: authentication with a bounded cache; ./accounts.ts: the operator side; ./secrets.ts: the
 *   provenance public keys (with LISTEN) and shared secrets; ./migration.ts: snapshot and restore;
 *   ./records.ts: the dashboard's batches and records.
 */
import { PgScanStore } from '../../scans/jobs/store-postgres.js';
import { DEFAULT_AUTH_CACHE_MS, LAST_USED_FLUSH_MS, checkDefaults, isEmptyCounts } from '../common.js';
import { BackgroundTimers } from '../background.js';
import { IDEMPOTENCY_PRUNE_MS, type IdempotentRequest } from '../idempotency.js';
import { LEASE_RENEW_MS, RECONCILE_INTERVAL_MS } from '../owners.js';
import { monthOf, type Operation, type QuotaState } from '../quota.js';
import type { DashboardRecords } from '../records.js';
import { OperatorSide } from '../operator.js';
import { CheckedDashboardRecords, checkIdempotency } from '../text.js';
import type * as T from '../types.js';
import { PgAccounts } from './accounts.js';
import { PgAuth } from './auth.js';
import { PgConnection } from './connection.js';
import { PRUNE_KEYS } from './idempotency.js';
import { pgCounts, pgRestore, pgSnapshot } from './migration.js';
import { PgOwners } from './owners.js';
import { PgQuotas } from './quotas.js';
import { PgDashboardRecords } from './records.js';
import { PgVaultRows } from '../../vault/rows-postgres.js';
import type { VaultRows } from '../../vault/rows.js';
import { PgSecrets } from './secrets.js';

export { DEFAULT_POOL_SIZE, DEFAULT_TIMEOUT_MS } from './connection.js';
export { ORPHAN_OWNERS, ownerGaps } from './statements.js';

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database[?schema=name][&pool=N]. */
  url: string;
  defaultProtectLimit: number;
  defaultVerifyLimit: number;
  /** Connections at most (default 10, or `pool` in the URL). */
  poolSize?: number;
  /** Upper bound on how long an authentication result is reused (default 2000 ms; 0 = never). */
  authCacheMs?: number | undefined;
  /** Statement timeout and connection timeout (default 5000 ms). */
  timeoutMs?: number | undefined;
  /**
   * Wait for the WAL flush at each commit (PostgreSQL's synchronous_commit). The operator commands keep
   * it on (an issued or revoked key is on disk when the command returns). The server turns it off for
   * its own writes (counters, holds, leases): a commit is then acknowledged before its WAL reaches the
   * disk, and only a crash of the PostgreSQL host itself (not of optmark) can lose the last ~0.6 s of
   * counter updates. With it on, every reservation waits for an fsync while it holds the account's
   * counter row: measured here, 46 reserve+commit per second instead of thousands (bench/quota.bench.ts).
   * `synchronous_commit=on` in the URL keeps it on for the server too (the operator's choice).
   */
  synchronousCommit?: boolean | undefined;
  /**
   * Gather concurrent reserves, commits and refunds into one statement per kind and turn (default true).
   * False sends each alone: the plain path, for side-by-side runs (bench/store-batching.bench.ts).
   */
  batching?: boolean;
}

export class PostgresStore extends OperatorSide implements T.Store {
  readonly engine = 'postgres' as const;
  readonly sharesSecrets = true;
  readonly dashboard: DashboardRecords;
  readonly vault: VaultRows;
  readonly scans: PgScanStore;
  readonly #conn: PgConnection;
  readonly #owners: PgOwners;
  readonly #quotas: PgQuotas;
  readonly #auth: PgAuth;
  protected readonly book: PgAccounts;
  readonly #secrets: PgSecrets;
  #timers: BackgroundTimers | undefined;
  #closed = false;

  private constructor(conn: PgConnection, defaults: Record<Operation, number>, opts: PostgresStoreOptions, searchFold: string) {
    super();
    this.#conn = conn;
    this.#owners = new PgOwners(conn.q);
    this.#quotas = new PgQuotas(conn, this.#owners, defaults, opts.batching ?? true);
    this.#auth = new PgAuth(conn.q, defaults, opts.authCacheMs ?? DEFAULT_AUTH_CACHE_MS);
    this.book = new PgAccounts({
      conn,
      defaults,
      state: (id, op, month, now) => this.#quotas.state(id, op, month, now),
      forgetKeys: () => this.#auth.forget(),
    });
    this.#secrets = new PgSecrets(conn);
    this.dashboard = new CheckedDashboardRecords(new PgDashboardRecords(conn.q, searchFold));
    this.vault = new PgVaultRows(conn);
    this.scans = new PgScanStore(conn);
  }

  /** Connects, creates the schema named in the URL if needed, and migrates it (once across instances). */
  static async open(opts: PostgresStoreOptions): Promise<PostgresStore> {
    checkDefaults(opts);
    const conn = await PgConnection.open(opts);
    const fold = await PgDashboardRecords.searchFold(conn.q).catch(async (err: unknown) => {
      await conn.end();
      throw err;
    });
    return new PostgresStore(conn, { protect: opts.defaultProtectLimit, verify: opts.defaultVerifyLimit }, opts, fold);
  }

  /** The PostgreSQL URL without its password. */
  get location(): string {
    return this.#conn.location;
  }

  get instanceId(): string {
    return this.#owners.current.id;
  }

  // ── request path (./auth.ts, ./quotas.ts) ─────────────────────────────────────────────────────

  async authenticate(authorization: string | undefined, now: Date = new Date()): Promise<T.AuthResult> {
    return this.#auth.authenticate(authorization, now);
  }

  async reserve(accountId: number, op: Operation, now: Date = new Date(), idempotency?: IdempotentRequest): Promise<T.ReserveResult> {
    return this.#quotas.reserve(accountId, op, now, checkIdempotency(idempotency));
  }

  commit(res: T.Reservation, now: Date = new Date(), onSent?: () => void): Promise<QuotaState | undefined> {
    return this.#quotas.commit(res, now, onSent);
  }

  refund(res: T.Reservation, now: Date = new Date()): Promise<QuotaState | undefined> {
    return this.#quotas.refund(res, now);
  }

  async quotaState(accountId: number, op: Operation, now: Date = new Date()): Promise<QuotaState> {
    return this.#quotas.state(accountId, op, monthOf(now), now);
  }

  async pruneIdempotencyKeys(now: Date = new Date()): Promise<number> {
    return (await this.#conn.q(PRUNE_KEYS, [now.getTime()])).rowCount ?? 0;
  }

  async reconcile(now: Date = new Date()): Promise<number> {
    return this.#owners.reconcile(now);
  }

  protected flushLastUsed(): Promise<void> {
    return this.#auth.flushLastUsed();
  }

  // ── shared secrets (./secrets.ts) ─────────────────────────────────────────────────────────────

  async recordPublicKey(keyId: string, pem: string, now: Date = new Date()): Promise<boolean> {
    return this.#secrets.recordPublicKey(keyId, pem, now);
  }

  async listPublicKeys(): Promise<T.StoredPublicKey[]> {
    return this.#secrets.listPublicKeys();
  }

  async sharedSecret(name: string, create: () => Buffer): Promise<Buffer> {
    return this.#secrets.sharedSecret(name, create);
  }

  async onPublicKeysChanged(listener: () => void): Promise<() => Promise<void>> {
    if (this.#closed) return async () => undefined;
    return this.#secrets.onPublicKeysChanged(listener);
  }

  // ── migration (./migration.ts) ────────────────────────────────────────────────────────────────

  async counts(): Promise<T.StoreCounts> {
    return pgCounts(this.#conn);
  }

  async isEmpty(): Promise<boolean> {
    return isEmptyCounts(await this.counts());
  }

  async snapshot(months?: string[]): Promise<T.StoreSnapshot> {
    return pgSnapshot(this.#conn, months);
  }

  async restore(s: T.StoreSnapshot): Promise<void> {
    await pgRestore(this.#conn, s);
    this.#auth.forget();
  }

  // ── lifecycle ─────────────────────────────────────────────────────────────────────────────────

  async startBackground(options: T.BackgroundOptions = {}): Promise<void> {
    if (this.#timers?.running) return;
    const timers = (this.#timers = new BackgroundTimers(options));
    await this.#owners.ensureRegistered();
    const reconcile = async () => {
      await this.#quotas.retryPending();
      const units = await this.reconcile();
      if (units > 0) options.onReconciled?.(units);
    };
    await timers.run('reconcile', reconcile);
    timers.every(RECONCILE_INTERVAL_MS, 'reconcile', reconcile);
    timers.every(LEASE_RENEW_MS, 'lease', () => this.#owners.renew());
    timers.every(LAST_USED_FLUSH_MS, 'last-used', () => this.#auth.flushLastUsed());
    timers.every(IDEMPOTENCY_PRUNE_MS, 'idempotency keys', () => this.pruneIdempotencyKeys());
  }

  async stopBackground(): Promise<void> {
    this.#timers?.stop();
  }

  get stats(): T.StoreStats {
    return { engine: 'postgres', reconciledUnits: this.#owners.reconciled, pool: this.#conn.stats };
  }

  get checkpointStats(): undefined {
    return undefined;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#timers?.stop();
    try {
      await this.#auth.flushLastUsed();
      await this.#owners.releaseAll();
    } catch {
      // The database is gone: the lease expires and another instance gives the units back.
    } finally {
      await this.#secrets.close();
      await this.#conn.end();
    }
  }
}
