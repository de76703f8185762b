/**
 * The store: accounts, API keys, monthly usage counters with expiring reservations, and (PostgreSQL)
 * the secrets every instance shares. One asynchronous interface (`Store`, src/store/types.ts), two
 * engines: the embedded WAL-mode SQLite file (default, one machine) and PostgreSQL
 * (OPTMARK_DATABASE_URL=postgres://..., any number of instances).
 */
import { SqliteStore } from './sqlite/engine.js';
import type { Store } from './types.js';

export { StoreError, STORE_ERROR_CODES, isStoreUnavailable, type StoreErrorCode } from './errors.js';
export { parseAuthorization, wwwAuthenticate, type AuthFailureCode } from './auth.js';
export { KEY_PREFIX, isWellFormedKey } from './keys.js';
export { monthOf, rateLimitHeaders, OPERATIONS, resetInstantOf, resetTimeOf, utcMinuteText, type Operation, type QuotaState } from './quota.js';
export { SCHEMA_VERSION } from './db.js';
export { TEXT_LIMITS, checkQueryEncoding, checkText } from './text.js';
export { IDEMPOTENCY_TTL_MS, type IdempotentRequest, type PriorRequest } from './idempotency.js';
export { PG_SCHEMA_VERSION } from './postgres/schema.js';
export type { CheckpointStats } from './checkpoints.js';
export {
  MAX_BATCH_SIZE,
  type Batch,
  type BatchSpec,
  type DashboardRecords,
  type MarkRecord,
  type RecordCursor,
  type RecordMatch,
  type RecordQuery,
  type SlotResult,
} from './records.js';
export { MAX_LIMIT, LAST_USED_GRANULARITY_MS, DEFAULT_AUTH_CACHE_MS, hasApiAccess, isPlan } from './common.js';
export { LEASE_MS, RECONCILE_INTERVAL_MS } from './owners.js';
export { PLANS } from './types.js';
export type * from './types.js';
export { SqliteStore } from './sqlite/engine.js';
export { parseDatabaseUrl } from './postgres/url.js';
export type { PostgresStore, PostgresStoreOptions } from './postgres/engine.js';

/**
 * The PostgreSQL engine, loaded on first use: `pg` and its dependencies cost a start-up that opens the
 * SQLite file 2-3 CPU-seconds of module loading on a busy machine, for nothing.
 */
export async function postgresEngine(): Promise<typeof import('./postgres/engine.js')> {
  return import('./postgres/engine.js');
}

export interface StoreOptions {
  dataDir: string;
  defaultProtectLimit: number;
  defaultVerifyLimit: number;
  /** postgres://... selects PostgreSQL; undefined or empty keeps the SQLite file in dataDir. */
  databaseUrl?: string | undefined;
  /** SQLite database path; defaults to `${dataDir}/optmark.db`. */
  file?: string;
  /** PostgreSQL: upper bound on how long an authentication result is reused (default 2000 ms). */
  authCacheMs?: number;
  /**
   * How long a store call may wait before the request is answered 503 (default 5000 ms): SQLite, for the
   * write lock of another connection; PostgreSQL, for a statement and for a connection from the pool.
   */
  storeTimeoutMs?: number;
  /** PostgreSQL: wait for the WAL flush at each commit (default true; the server passes false, see PostgresStoreOptions). */
  synchronousCommit?: boolean;
}

/** Opens the configured store: PostgreSQL when a database URL is given, else the SQLite file. */
export async function openStore(opts: StoreOptions): Promise<Store> {
  if (opts.databaseUrl) {
    const { PostgresStore } = await postgresEngine();
    return PostgresStore.open({
      url: opts.databaseUrl,
      defaultProtectLimit: opts.defaultProtectLimit,
      defaultVerifyLimit: opts.defaultVerifyLimit,
      authCacheMs: opts.authCacheMs,
      synchronousCommit: opts.synchronousCommit,
      timeoutMs: opts.storeTimeoutMs,
    });
  }
  return SqliteStore.open({
    dataDir: opts.dataDir,
    defaultProtectLimit: opts.defaultProtectLimit,
    defaultVerifyLimit: opts.defaultVerifyLimit,
    file: opts.file,
    busyTimeoutMs: opts.storeTimeoutMs,
  });
}
