/**
 * The store's one asynchronous interface. Two engines implement it: the embedded WAL-mode SQLite file
 * (src/store/sqlite/, the default for one machine) and PostgreSQL (src/store/postgres/, selected by
 * OPTMARK_DATABASE_URL, shared by any number of instances). Callers hold a `Store` and never learn which.
 */
import type { ScanJobStore } from '../scans/jobs/store.js';
import type { AuthFailureCode } from './auth.js';
import type { CheckpointStats } from './checkpoints.js';
import type { IdempotentRequest, PriorRequest } from './idempotency.js';
import type { Operation, QuotaState } from './quota.js';
import type { VaultRows } from '../vault/rows.js';
import type { Batch, DashboardRecords, MarkRecord } from './records.js';

export type Plan = 'free' | 'pro' | 'lifetime';
export const PLANS: readonly Plan[] = ['free', 'pro', 'lifetime'];

/** An account with its effective limits (its own override, else the configured default). */
export interface Account {
  id: number;
  name: string;
  plan: Plan;
  protectLimit: number;
  verifyLimit: number;
  createdAt: string;
}

export type AuthResult = { ok: true; account: Account; keyId: number } | { ok: false; code: AuthFailureCode; message: string };

/**
 * A unit taken by `reserve`; pass this same object to `commit` or `refund`. While it is neither, the
 * unit is *held* by this store instance (its owner id, with a lease): if the instance dies, the unit is
 * given back by whichever instance reconciles next.
 */
export interface Reservation {
  /**
   * The reservation's number in this store instance: its hold is the row (owner, id), so a commit or
   * refund sent twice acts on this reservation alone, and once.
   */
  readonly id: number;
  readonly accountId: number;
  readonly operation: Operation;
  /** YYYY-MM (UTC) the unit was taken from; a refund returns it there even after the month turned. */
  readonly month: string;
  /** The client's Idempotency-Key (src/store/idempotency.ts), written with the unit. */
  readonly idempotency?: IdempotentRequest;
}

/**
 * `prior`: the Idempotency-Key already names a request (no unit taken, whatever the limit); `state` is
 * then the counter as it is.
 */
export type ReserveResult = { ok: true; reservation: Reservation; state: QuotaState } | { ok: false; state: QuotaState; prior?: PriorRequest };

export interface KeyInfo {
  id: number;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

/** A provenance public key as the shared store keeps it (PostgreSQL only; SQLite keeps them as files). */
export interface StoredPublicKey {
  keyId: string;
  /** SPKI PEM. */
  pem: string;
  recordedAt: string;
}

export interface Usage {
  month: string;
  protect: QuotaState;
  verify: QuotaState;
  /** Units held by requests in progress (counted in `used` until they succeed or are given back). */
  held: { protect: number; verify: number };
}

/** Everything `optmark store migrate` copies from one store into another. Accounts are named, not numbered. */
export interface StoreSnapshot {
  accounts: Array<{ name: string; plan: Plan; protectLimit: number | null; verifyLimit: number | null; createdAt: string }>;
  keys: Array<{ account: string; hash: Buffer; prefix: string; createdAt: string; lastUsedAt: string | null; revokedAt: string | null }>;
  /** Counters (committed units: held ones are not copied). */
  counters: Array<{ account: string; month: string; operation: Operation; used: number }>;
  /** The dashboard's batches and records (src/store/records.ts). */
  batches: Array<Batch & { account: string }>;
  records: Array<MarkRecord & { account: string }>;
  /** Provenance public keys (PostgreSQL; the SQLite engine keeps them as files, which `store migrate` adds). */
  publicKeys: StoredPublicKey[];
  /** Shared secrets by name (PostgreSQL; the fingerprint key of a SQLite data directory is its file). */
  secrets: Array<{ name: string; value: Buffer }>;
}

/** How many rows of each kind a store holds (what `store migrate` reports, and refuses to overwrite). */
export type StoreCounts = { [K in keyof StoreSnapshot]: number };

export interface BackgroundOptions {
  /** Hears failures of the background work (checkpoints, heartbeats, reconciliation, last-used writes). */
  onError?: (err: Error, what: string) => void;
  /** Hears how many held units a reconciliation gave back (only when > 0). */
  onReconciled?: (units: number) => void;
  /** SQLite checkpoint interval (tests). */
  checkpointIntervalMs?: number;
}

export interface StoreStats {
  engine: 'sqlite' | 'postgres';
  /** SQLite's checkpointer, while it runs. */
  checkpoints?: CheckpointStats;
  /** Units given back from dead instances since start. */
  reconciledUnits: number;
  /** PostgreSQL pool: connections open, idle, and queries waiting for one. */
  pool?: { total: number; idle: number; waiting: number };
}

export interface Store {
  readonly engine: 'sqlite' | 'postgres';
  /** The SQLite file, or the PostgreSQL URL without its password. */
  readonly location: string;
  /** This instance's owner id on the reservations it holds. */
  readonly instanceId: string;

  // ── request path ──
  /**
   * Checks an Authorization header value. SQLite reads the key on every call (a revocation applies to
   * the next request); PostgreSQL keeps a bounded cache of at most `authCacheMs` (2 s by default), so
   * a key issued or revoked on any instance works or stops everywhere within that. Revocations made
   * through this same instance apply at once. last_used_at is written in batches, not per request.
   */
  authenticate(authorization: string | undefined, now?: Date): Promise<AuthResult>;
  /**
   * Takes one unit of `op` for the UTC month of `now` in one statement that cannot overshoot the limit.
   * With `idempotency`, the key is taken with the unit in one transaction, unless an unexpired row of
   * this account already has it: then no unit is taken and `prior` says what it names.
   */
  reserve(accountId: number, op: Operation, now?: Date, idempotency?: IdempotentRequest): Promise<ReserveResult>;
  /**
   * The call succeeded: its unit stays counted, durably, and is no longer held (a crash after this
   * keeps it). Returns the counter after it. Idempotent. Throws StoreError `reservation_lost` when the
   * hold was reclaimed meanwhile (this instance missed its lease): the unit is then not counted and the
   * answer must not be given.
   *
   * `onSent` is called once the commit is on its way: SQLite, done; PostgreSQL, its statement written to
   * a connection (not yet acknowledged) while this instance's lease is fresh, else acknowledged. The
   * server sends the last byte of its answer there, so that a `kill -9` finds the answer and its unit
   * together, both or neither, within microseconds instead of a database round trip (src/http/api.ts).
   * A failure before `onSent` throws and `onSent` is not called; a failure after it (the database went
   * away mid-statement) throws too, and the commit is retried in the background.
   *
   * A keyed reservation's key is marked committed, with `idempotency.sha256`, in the same statement.
   */
  commit(r: Reservation, now?: Date, onSent?: () => void): Promise<QuotaState | undefined>;
  /** The call failed: give its unit back to the month it came from, once (also after commit); its idempotency key goes with it. */
  refund(r: Reservation, now?: Date): Promise<QuotaState | undefined>;
  /** The counter of `op` this month. */
  quotaState(accountId: number, op: Operation, now?: Date): Promise<QuotaState>;
  /** Gives back the units held by dead instances (expired lease, or a dead process on this host), and their keys. */
  reconcile(now?: Date): Promise<number>;
  /** Deletes idempotency keys that expired by `now` (the background work does it every minute); how many. */
  pruneIdempotencyKeys(now?: Date): Promise<number>;

  // ── operator side ──
  bootstrapIfEmpty(): Promise<{ account: Account; key: string } | undefined>;
  createAccount(name: string, plan: Plan, now?: Date): Promise<Account>;
  listAccounts(): Promise<Account[]>;
  getAccount(name: string): Promise<Account>;
  setPlan(name: string, plan: Plan): Promise<Account>;
  setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Promise<Account>;
  issueKey(accountName: string, now?: Date): Promise<{ key: string; prefix: string; id: number }>;
  listKeys(accountName: string): Promise<KeyInfo[]>;
  revokeKey(prefix: string, now?: Date): Promise<{ prefix: string; account: string; alreadyRevoked: boolean }>;
  usage(accountName: string, month?: string, now?: Date): Promise<Usage>;

  // ── the dashboard's batches and records (src/store/records.ts) ──
  readonly dashboard: DashboardRecords;
  /** The Private Vault's rows (src/vault/rows.ts). */
  readonly vault: VaultRows;
  /** Repository scans' jobs (src/scans/jobs/store.ts). */
  readonly scans: ScanJobStore;

  // ── shared secrets (PostgreSQL: shared by every instance; SQLite: the data directory's files do it) ──
  readonly sharesSecrets: boolean;
  recordPublicKey(keyId: string, pem: string, now?: Date): Promise<boolean>;
  listPublicKeys(): Promise<StoredPublicKey[]>;
  /** The named secret, created from `create()` by the first instance that asks. */
  sharedSecret(name: string, create: () => Buffer): Promise<Buffer>;
  /** Calls `listener` when another instance records a public key (PostgreSQL LISTEN); returns a stop function. */
  onPublicKeysChanged(listener: () => void): Promise<() => Promise<void>>;

  // ── migration ──
  /** Everything the store holds (counters of the given months only, when `months` is given), read in one transaction. */
  snapshot(months?: string[]): Promise<StoreSnapshot>;
  /** The rows of each kind (held units and instance leases are not content). */
  counts(): Promise<StoreCounts>;
  /** True when `counts()` is all zeros. */
  isEmpty(): Promise<boolean>;
  /**
   * Replaces this store's accounts, keys, counters, batches and records with the snapshot's, in one
   * transaction; public keys are added to those already there (a public key only ever verifies), and
   * the snapshot's secrets replace those of the same name. Engines that keep keys and secrets as files
   * (SQLite) ignore those two parts.
   */
  restore(snapshot: StoreSnapshot): Promise<void>;

  // ── lifecycle ──
  /** The server's background work: lease heartbeats, reconciliation, batched last-used writes, SQLite checkpoints. */
  startBackground(options?: BackgroundOptions): Promise<void>;
  stopBackground(): Promise<void>;
  readonly stats: StoreStats;
  /** Writes pending last-used times, gives back this instance's held units, closes. */
  close(): Promise<void>;
}
