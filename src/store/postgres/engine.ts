/**
 * The shared engine: PostgreSQL through the `pg` client and a bounded pool, for any number of optmark
 * instances behind a load balancer (OPTMARK_DATABASE_URL=postgres://...).
 *
 * - Quotas: `reserve` is one statement. The counter row of (account, month, operation) is where every
 *   instance's reservations meet: `INSERT ... ON CONFLICT DO UPDATE SET used = used + 1 WHERE used <
 *   limit` locks that row and evaluates the WHERE on its latest version (also under Read Committed), so
 *   no number of instances can take more than the limit. The same statement inserts the reservation's
 *   hold row (its id, under this instance's owner id) into `reservations`. `commit` deletes the row (the
 *   unit stays counted); `refund` deletes it and takes the unit off the counter (after a commit: marks it
 *   refunded). Each acts on its own row, so sent again it changes nothing. A unit is given back exactly
 *   once: by the refund, or by a reconciliation that deletes a dead instance's hold rows and subtracts
 *   them from the counters in one statement (row locks order them).
 *   Concurrent requests' reserves, commits and refunds go in one statement per kind and event-loop turn
 *   (./batch.ts), each answered exactly as if it had been alone, in arrival order.
 * - Keys: authentication results are cached for at most `authCacheMs` (2 s), bounded in size; last-used
 *   times are written in batches every 10 s.
 * - Unavailability: a query that fails for want of the database (connection refused or lost, timeouts,
 *   admin shutdown, too many connections) becomes StoreError `store_unavailable`; the API answers 503
 *   with Retry-After, and no unit is ever granted without its reservation having been written. A reserve
 *   whose statement was sent without an answer may still have run: its owner id is retired (#retire), so
 *   such a unit goes back within seconds on a live instance too.
 */
import pg from 'pg';
import { IDEMPOTENCY_PRUNE_MS, IDEMPOTENCY_TTL_MS, priorOf, uploadDigest, type IdempotentRequest, type KeyRow as IdemRow } from '../idempotency.js';
import { StoreError } from '../errors.js';
import { displayPrefix, generateKey, hashKey } from '../keys.js';
import { monthOf, parseMonth, quotaStateOf, type Operation, type QuotaState } from '../quota.js';
import {
  AuthCache,
  BOOTSTRAP_ACCOUNT,
  DEFAULT_AUTH_CACHE_MS,
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
  type AuthRow,
  type OwnerIdentity,
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
import { RECORD_COLUMNS, toBatch, toRecord, type BatchRow, type DashboardRecords, type RecordRow } from '../records.js';
import { Batcher, DEFER, RESERVE_BATCH, COMMIT_BATCH, REFUND_BATCH, groupArrays, groupsOf, memberArrays, runOn } from './batch.js';
import { PgDashboardRecords } from './records.js';
import { migrate } from './schema.js';
import { DROP_KEY, KEYS_RELEASED, KEY_COMMITTED, KEY_REFUNDED, PRUNE_KEYS, reserveKeyed, withKey } from './idempotency.js';
import { parseDatabaseUrl } from './url.js';

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database[?schema=name][&pool=N]. */
  url: string;
  defaultProtectLimit: number;
  defaultVerifyLimit: number;
  /** Connections at most (default 10, or `pool` in the URL). */
  poolSize?: number;
  /** Upper bound on how long an authentication result is reused (default 2000 ms; 0 = never). */
  authCacheMs?: number;
  /** Statement timeout and connection timeout (default 5000 ms). */
  timeoutMs?: number;
  /**
   * Wait for the WAL flush at each commit (PostgreSQL's synchronous_commit). The operator commands keep
   * it on (an issued or revoked key is on disk when the command returns). The server turns it off for
   * its own writes (counters, holds, leases): a commit is then acknowledged before its WAL reaches the
   * disk, and only a crash of the PostgreSQL host itself (not of optmark) can lose the last ~0.6 s of
   * counter updates. With it on, every reservation waits for an fsync while it holds the account's
   * counter row: measured here, 46 reserve+commit per second instead of thousands (bench/quota.bench.ts).
   * `synchronous_commit=on` in the URL keeps it on for the server too (the operator's choice).
   */
  synchronousCommit?: boolean;
}

export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_TIMEOUT_MS = 5000;
const KEYS_CHANNEL = 'optmark_signing_keys';

// int8 (counters and limits up to 2^31, lease times in ms) as numbers: every value stays below 2^53.
const TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** SQLSTATE classes that mean "the database cannot answer now", not "the statement is wrong". */
function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return true; // network errors (ECONNREFUSED...), pool and query timeouts
  if (/^E[A-Z]+$/.test(code)) return true;
  return /^(08|53|57|58|40|55)/.test(code);
}

interface AccountRow {
  id: number;
  name: string;
  plan: Plan;
  protect_limit: number | null;
  verify_limit: number | null;
  created_at: Date;
}

interface KeyRow {
  id: number;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  account: string;
}

const ACCOUNT_COLUMNS = 'a.id, a.name, a.plan, a.protect_limit, a.verify_limit, a.created_at';
const KEY_COLUMNS = 'k.id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, a.name AS account';
/** The effective limit of operation $op for account `a`, with $fallback the configured default. */
const limitOf = (op: string, fallback: string) => `coalesce(CASE ${op}::text WHEN 'protect' THEN a.protect_limit ELSE a.verify_limit END, ${fallback}::bigint)`;

// A reservation alone in its turn (the batch statement of ./batch.ts does the same for many, at about
// three times the execution cost of this one).
/**
 * One unit of $3 for account $1 in month $2 (counter `c`, never past the limit in `lim`) and its hold row
 * (owner $5, id `hold`: `h`), taken only when `guard` (a condition on `lim`) holds too: the part of a
 * reservation that RESERVE and the keyed reservation (./idempotency.ts) share.
 */
const takeUnit = (guard: string, hold: string) => `c AS (
    INSERT INTO usage_counters AS u (account_id, month, operation, used)
      SELECT id, $2::text, $3::text, 1 FROM lim WHERE ${guard}
    ON CONFLICT (account_id, month, operation) DO UPDATE SET used = u.used + 1
      WHERE u.used < (SELECT lim FROM lim)
    RETURNING u.used
  ),
  h AS (
    INSERT INTO reservations (owner, id, account_id, month, operation) SELECT $5::text, ${hold}::bigint, $1, $2::text, $3::text FROM c RETURNING 1
  )`;

const RESERVE = `
  WITH lim AS (SELECT a.id, ${limitOf('$3', '$4')} AS lim FROM accounts a WHERE a.id = $1),
  ${takeUnit('lim.lim > 0', '$6')}
  SELECT c.used, (SELECT lim FROM lim) AS lim, (SELECT count(*) FROM h)::int AS held FROM c`;

const STATE_OF = (month: string) => `
  SELECT ${limitOf('$4', '$6')} AS lim,
         coalesce((SELECT used FROM usage_counters u WHERE u.account_id = a.id AND u.month = ${month}::text AND u.operation = $4::text), 0) AS used
    FROM accounts a WHERE a.id = $2`;

// $7: the reservation's hold id. Its row goes (once: sent again, the statement finds nothing).
const COMMIT = `
  WITH h AS (
    DELETE FROM reservations
     WHERE owner = $1::text AND id = $7::bigint AND account_id = $2 AND month = $3::text AND operation = $4::text AND NOT refunded RETURNING 1
  ),
  s AS (${STATE_OF('$5')})
  SELECT (SELECT count(*) FROM h)::int AS released, s.lim, s.used FROM s`;

// $7: the unit is still held (its row $8 goes, and the unit off the counter only if the row was there);
// false: it was committed (its row is marked refunded, and the unit off the counter only if it was not
// marked yet). As REFUND_BATCH (./batch.ts) for one call: sent again, it changes nothing. Only keyed
// refunds use it (others go through the batch): the key $9 goes with its unit (./idempotency.ts).
const REFUND_KEYED = `
  WITH h AS (
    DELETE FROM reservations
     WHERE $7::boolean AND owner = $1::text AND id = $8::bigint AND account_id = $2 AND month = $3::text AND operation = $4::text AND NOT refunded
    RETURNING 1
  ),
  m AS (
    INSERT INTO reservations AS r (owner, id, account_id, month, operation, refunded)
      SELECT $1::text, $8::bigint, $2, $3::text, $4::text, true WHERE NOT $7::boolean
    ON CONFLICT (id, owner) DO UPDATE SET refunded = true WHERE NOT r.refunded
    RETURNING 1
  ),
  c AS (
    UPDATE usage_counters SET used = used - 1
     WHERE account_id = $2 AND month = $3::text AND operation = $4::text AND used > 0
       AND (EXISTS (SELECT 1 FROM h) OR EXISTS (SELECT 1 FROM m)) RETURNING used
  ),
  ${KEY_REFUNDED},
  s AS (${STATE_OF('$5')})
  SELECT s.lim, s.used, (SELECT used FROM c) AS after, ($3::text = $5::text) AS same_month FROM s`;

// Everything a dead owner held goes back to its counters and its rows go, with its held idempotency
// keys, in one statement. Two reconcilers racing on one owner: the second waits on the row locks and
// then finds nothing to delete. `holds` has the counts of owners of an optmark before the hold rows
// (schema 4), during a rolling upgrade.
const RELEASE_OWNER = withKey(
  `
  WITH o AS (DELETE FROM owners WHERE id = $1),
  ho AS (DELETE FROM holds WHERE owner = $1 RETURNING account_id, month, operation, n),
  r AS (DELETE FROM reservations WHERE owner = $1 RETURNING account_id, month, operation, refunded),
  h AS (
    SELECT account_id, month, operation, sum(n) AS n
      FROM (SELECT account_id, month, operation, n FROM ho UNION ALL SELECT account_id, month, operation, 1 FROM r WHERE NOT refunded) z
     GROUP BY account_id, month, operation
  ),
  u AS (
    UPDATE usage_counters c SET used = greatest(0, c.used - h.n) FROM h
     WHERE c.account_id = h.account_id AND c.month = h.month AND c.operation = h.operation RETURNING h.n
  )
  SELECT coalesce(sum(n), 0)::bigint AS units FROM u`,
  KEYS_RELEASED,
);

/**
 * The reconciliation's search for hold rows of unregistered owners: one probe of the owner index per gap
 * between the owners known (sorted as the column's "C" collation sorts them, byte by byte), each the first
 * row inside it. A probe never walks a known owner's rows, the dead ones its commits leave until VACUUM
 * included, so its cost is the number of owners, not the table's size (`NOT IN (SELECT id FROM owners)`
 * read every row). $1/$2: the bounded gaps; $3: the last owner (the gap above it).
 */
export const ORPHAN_OWNERS = `
  SELECT r.owner FROM unnest($1::text[], $2::text[]) AS g(lo, hi)
   CROSS JOIN LATERAL (SELECT owner FROM reservations WHERE owner > g.lo COLLATE "C" AND owner < g.hi COLLATE "C" ORDER BY owner LIMIT 1) r
  UNION ALL
  (SELECT owner FROM reservations WHERE owner > $3::text COLLATE "C" ORDER BY owner LIMIT 1)`;

/** ORPHAN_OWNERS' parameters for `known`: the gaps below, between and above them. */
export function ownerGaps(known: Iterable<string>): { lo: string[]; hi: string[]; last: string } {
  const sorted = [...known].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return { lo: ['', ...sorted.slice(0, -1)], hi: sorted, last: sorted.at(-1) ?? '' };
}

// The same with the reservation's Idempotency-Key (./idempotency.ts).
const RESERVE_KEYED = reserveKeyed(limitOf('$3', '$4'), takeUnit);
const COMMIT_KEYED = withKey(COMMIT, KEY_COMMITTED);

interface Call {
  /** The reservation's hold id. */
  hold: number;
  accountId: number;
  /** The month the unit is taken from (or was). */
  month: string;
  operation: Operation;
  /** The month whose counter the answer shows. */
  at: string;
}
type ReserveCall = Call;
/** `used`: the counter after this call (granted), or as it stands (refused); `owner`: whose hold has the unit. */
type ReserveAnswer = { granted: boolean; lim: number; used: number; owner: string };
interface CommitCall extends Call {
  /** The owner whose hold has the unit. */
  owner: string;
  /** Runs once the statement is written (lease fresh) or once it is answered. */
  onSent?: () => void;
  sent: boolean;
  /** What `onSent` threw. */
  failed?: unknown;
}
type CommitAnswer = { released: boolean; lim: number; used: number };
interface RefundCall extends Call {
  /** Still held (not committed). */
  held: boolean;
  /** The owner whose hold has the unit. */
  owner: string;
}
/**
 * An owner id this instance registered: renewed while it is current or while statements or reservations
 * taken under it are outstanding (`busy`); a retired one is released once none is.
 */
interface OwnerUse {
  busy: number;
  retired: boolean;
}
/** Undefined when the account is gone. */
type RefundAnswer = { lim: number; used: number } | undefined;

export class PostgresStore implements Store {
  readonly engine = 'postgres' as const;
  readonly sharesSecrets = true;
  readonly location: string;
  readonly #pool: pg.Pool;
  readonly dashboard: DashboardRecords;
  readonly #config: pg.PoolConfig;
  readonly #defaults: Record<Operation, number>;
  readonly #reservations = new Reservations();
  /** The owner id new reservations are taken under (see #retire). */
  #owner: OwnerIdentity = newOwner();
  /** Every owner id registered and not yet released, the current one included. */
  readonly #owners = new Map<string, OwnerUse>();
  /** The owner each reservation still counted in its owner's `busy` was taken under. */
  readonly #ownerOf = new WeakMap<Reservation, string>();
  readonly #lastUsed = new LastUsed();
  readonly #cache: AuthCache;
  /** Key lookups on their way, by key hash: concurrent requests with one key share one. */
  readonly #lookups = new Map<string, Promise<AuthRow | undefined>>();
  #registered: Promise<void> | undefined;
  #timers: NodeJS.Timeout[] = [];
  #reconciled = 0;
  #closed = false;
  #listeners: pg.Client[] = [];
  /** Refunds the database could not take when asked: retried with each reconciliation. */
  readonly #retry = new Set<Reservation>();
  /** Commits sent whose outcome is unknown (the connection failed after the answer went out): done again. */
  readonly #commitRetry = new Set<Reservation>();
  /** The next reservation's hold id (unique within this store, so within each of its owner ids). */
  #nextHold = 1;
  /** Rows marking committed units given back, whose refund was answered (no longer needed): deleted in the background. */
  readonly #markers: { owner: string; hold: number }[] = [];
  /** When the lease was last written (Date.now() before the statement): see #leaseFresh. */
  #leaseAt = 0;
  readonly #timeoutMs: number;
  readonly #reserves = new Batcher<ReserveCall, ReserveAnswer>((calls) => this.#reserveBatch(calls));
  readonly #commits = new Batcher<CommitCall, CommitAnswer>((calls) => this.#commitBatch(calls));
  readonly #refunds = new Batcher<RefundCall, RefundAnswer>((calls) => this.#refundBatch(calls));

  private constructor(pool: pg.Pool, config: pg.PoolConfig, location: string, defaults: Record<Operation, number>, authCacheMs: number, timeoutMs: number) {
    this.#pool = pool;
    this.#timeoutMs = timeoutMs;
    this.#config = config;
    this.location = location;
    this.#defaults = defaults;
    this.#cache = new AuthCache(authCacheMs);
    this.dashboard = new PgDashboardRecords((text, values, name) => this.#q(text, values, name));
  }

  /** Connects, creates the schema named in the URL if needed, and migrates it (once across instances). */
  static async open(opts: PostgresStoreOptions): Promise<PostgresStore> {
    checkDefaults(opts);
    const url = parseDatabaseUrl(opts.url);
    const timeout = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // Generic plans: every statement here is a keyed lookup or write whose plan does not depend on its
    // values, and PostgreSQL's default (a custom plan while it judges one cheaper) planned the batch
    // statements afresh on every call: 0.4 ms of the database's CPU per commit batch (pg_stat_statements).
    const settings = [`-c statement_timeout=${timeout}`, `-c idle_in_transaction_session_timeout=${4 * timeout}`, '-c plan_cache_mode=force_generic_plan'];
    // The server's default (off) gives way to the operator's `synchronous_commit=on` in the URL.
    if (opts.synchronousCommit === false && url.synchronousCommit !== true) settings.push('-c synchronous_commit=off');
    if (url.schema) settings.push(`-c search_path=${url.schema}`);
    const config: pg.PoolConfig = {
      connectionString: url.connectionString,
      max: opts.poolSize ?? url.pool ?? DEFAULT_POOL_SIZE,
      connectionTimeoutMillis: timeout,
      idleTimeoutMillis: 30_000,
      query_timeout: timeout + 1000,
      options: settings.join(' '),
      application_name: 'optmark',
      types: TYPES,
    };
    const pool = new pg.Pool(config);
    // An idle connection that breaks (server restart) is dropped by the pool; without a listener the
    // 'error' event would end the process.
    pool.on('error', () => undefined);
    // The pool listens to a client only while it is idle. One checked out (a reserve, a commit, a
    // transaction) whose connection ends without a word from PostgreSQL (a network cut, a host gone)
    // emits 'error' too, and without a listener that ended the process. Its statements fail with the
    // error (store_unavailable) and the pool drops it when it is released, so the event needs no more.
    pool.on('connect', (client) => client.on('error', () => undefined));
    const store = new PostgresStore(
      pool,
      config,
      url.display,
      { protect: opts.defaultProtectLimit, verify: opts.defaultVerifyLimit },
      opts.authCacheMs ?? DEFAULT_AUTH_CACHE_MS,
      timeout,
    );
    try {
      const client = await pool.connect().catch((err: unknown) => {
        throw unavailable(err, url.display);
      });
      try {
        if (url.schema) await client.query(`CREATE SCHEMA IF NOT EXISTS ${url.schema}`).catch(() => undefined);
        await migrate(client);
      } finally {
        client.release();
      }
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    return store;
  }

  get instanceId(): string {
    return this.#owner.id;
  }

  async #q<R extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string): Promise<pg.QueryResult<R>> {
    try {
      return await this.#pool.query<R>(name ? { name, text, values } : { text, values });
    } catch (err) {
      if (isUnavailable(err)) throw unavailable(err, this.location);
      throw err;
    }
  }

  /** Runs `fn` in a transaction on one connection. */
  async #tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      throw unavailable(err, this.location);
    }
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (!(err instanceof StoreError) && isUnavailable(err)) throw unavailable(err, this.location);
      throw err;
    } finally {
      client.release();
    }
  }

  // ── request path ──────────────────────────────────────────────────────────────────────────────

  async authenticate(authorization: string | undefined, now: Date = new Date()): Promise<AuthResult> {
    const key = keyHashOf(authorization);
    if ('failure' in key) return key.failure;
    const hash = key.hash;
    const cacheKey = hash.toString('base64');
    const t = Date.now();
    let row = this.#cache.get(cacheKey, t);
    if (!row) {
      // Requests that find the entry expired together wait for one lookup, not one each (eight in flight
      // made eight statements every time the entry expired, each prepared on a pooled connection of its own).
      let pending = this.#lookups.get(cacheKey);
      if (!pending) {
        const lookup = this.#lookUp(hash, cacheKey, t).finally(() => {
          if (this.#lookups.get(cacheKey) === lookup) this.#lookups.delete(cacheKey);
        });
        this.#lookups.set(cacheKey, (pending = lookup));
      }
      row = await pending;
      if (!row) return authFailure('invalid_api_key'); // unknown keys are not cached: a new key works at once
    }
    if (row.revoked) return authFailure('invalid_api_key', 'The API key has been revoked.');
    this.#lastUsed.note(row.keyId, row.lastUsedAt, now);
    const refused = planFailure(row.plan);
    if (refused) return refused;
    const account: Account = {
      id: row.accountId,
      name: row.name,
      plan: row.plan,
      protectLimit: row.protectLimit ?? this.#defaults.protect,
      verifyLimit: row.verifyLimit ?? this.#defaults.verify,
      createdAt: row.createdAt,
    };
    return { ok: true, account, keyId: row.keyId };
  }

  /** After a change made through this instance: no cached key row, and no lookup begun before it is joined. */
  #forgetKeys(): void {
    this.#cache.clear();
    this.#lookups.clear();
  }

  /** The key's row from the database (cached as of `t`, when the lookup began), or undefined. */
  async #lookUp(hash: Buffer, cacheKey: string, t: number): Promise<AuthRow | undefined> {
    const r = await this.#q<AccountRow & { key_id: number; last_used_at: Date | null; revoked_at: Date | null }>(
      `SELECT ${ACCOUNT_COLUMNS}, k.id AS key_id, k.last_used_at, k.revoked_at FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = $1`,
      [hash],
      'optmark_auth',
    );
    const db = r.rows[0];
    if (!db) return undefined;
    const row: AuthRow = {
      keyId: db.key_id,
      accountId: db.id,
      name: db.name,
      plan: db.plan,
      protectLimit: db.protect_limit,
      verifyLimit: db.verify_limit,
      createdAt: db.created_at.toISOString(),
      lastUsedAt: db.last_used_at?.toISOString() ?? null,
      revoked: db.revoked_at !== null,
    };
    this.#cache.set(cacheKey, row, t);
    return row;
  }

  async reserve(accountId: number, op: Operation, now: Date = new Date(), idempotency?: IdempotentRequest): Promise<ReserveResult> {
    const month = monthOf(now);
    if (idempotency) return this.#reserveKeyed(accountId, op, month, now, idempotency);
    const hold = this.#nextHold++;
    const taken = await this.#reserves.add({ hold, accountId, month, operation: op, at: month });
    const state = quotaStateOf(op, taken.lim, taken.used, month, now);
    if (!taken.granted) return { ok: false, state };
    return { ok: true, reservation: this.#held(this.#reservations.create(hold, accountId, op, month), taken.owner), state };
  }

  /** A reservation granted under `owner` (counted in its `busy` until it is committed or given back). */
  #held(res: Reservation, owner: string): Reservation {
    this.#ownerOf.set(res, owner);
    return res;
  }

  /** The owner a reservation was taken under (the current one for a reservation done with its hold). */
  #ownerFor(res: Reservation): string {
    return this.#ownerOf.get(res) ?? this.#owner.id;
  }

  /** The reservation's new state; one no longer held (with a known outcome) is done with its owner. */
  #set(res: Reservation, state: 'held' | 'committed' | undefined): void {
    this.#reservations.set(res, state);
    if (state !== 'held') this.#done(res);
  }

  #done(res: Reservation): void {
    const id = this.#ownerOf.get(res);
    if (id === undefined || this.#commitRetry.has(res)) return;
    this.#ownerOf.delete(res);
    this.#unbusy(id, 1);
  }

  /** The current owner, registered, with `n` statements counted busy under it (see #unbusy). */
  async #take(n: number): Promise<string> {
    for (;;) {
      const id = this.#owner.id;
      await (this.#registered ??= this.#register().catch((err: unknown) => {
        this.#registered = undefined;
        throw err;
      }));
      const use = this.#owners.get(id);
      if (use && this.#owner.id === id) {
        use.busy += n;
        return id;
      }
    }
  }

  /** `n` statements or reservations under `id` are done; a retired owner with none left is released. */
  #unbusy(id: string, n: number): void {
    const use = this.#owners.get(id);
    if (!use || n === 0) return;
    use.busy -= n;
    if (!use.retired || use.busy > 0) return;
    this.#owners.delete(id);
    // Gives back exactly the units no request of this instance knows of (every known one is done).
    // Failing that, it is renewed no more: its lease runs out and any instance's reconciliation does it.
    this.#q<{ units: number }>(RELEASE_OWNER, [id]).then(
      (r) => void (this.#reconciled += r.rows[0]!.units),
      () => undefined,
    );
  }

  /**
   * A reserve under \`id\` was sent and its outcome is not known (the connection failed before the answer):
   * PostgreSQL may have taken a unit under it that no request will commit or refund. New reservations go
   * under a fresh owner id; this one is renewed only while what this instance knows was granted under it
   * is outstanding, then released, which gives back exactly such units (never one counted twice).
   */
  #retire(id: string): void {
    const use = this.#owners.get(id);
    if (!use || use.retired) return;
    use.retired = true;
    if (this.#owner.id !== id) return;
    this.#owner = newOwner();
    this.#registered = undefined;
  }

  async #reserveKeyed(accountId: number, op: Operation, month: string, now: Date, idempotency: IdempotentRequest): Promise<ReserveResult> {
    const key = idempotency.key;
    const t = now.getTime();
    const owner = await this.#take(1);
    const hold = this.#nextHold++;
    let granted = false;
    try {
      const r = await this.#q<{
        lim: number | null;
        used: number | null;
        keyed: number;
        prior_state: IdemRow['state'] | null;
        prior_operation: Operation | null;
        prior_sha256: string | null;
      }>(RESERVE_KEYED, [accountId, month, op, this.#defaults[op], owner, key, t, t + IDEMPOTENCY_TTL_MS, hold], 'optmark_reserve_keyed').catch(
        (err: unknown) => {
          // Sent or not (the pool does not say): a statement that may have run retires its owner.
          if (!isAnswered(err)) this.#retire(owner);
          throw err;
        },
      );
      const row = r.rows[0]!;
      if (row.keyed === 0 && row.lim !== null) {
        const prior = row.prior_state && row.prior_operation ? { state: row.prior_state, operation: row.prior_operation, sha256: row.prior_sha256 } : undefined;
        return { ok: false, state: await this.#state(accountId, op, month, now), prior: priorOf(prior) };
      }
      if (row.used === null || row.lim === null) {
        // Over the limit (or no such account: #state says so): the key taken without a unit goes back.
        if (row.keyed === 1) await this.#q(DROP_KEY, [accountId, key, owner], 'optmark_drop_key');
        return { ok: false, state: await this.#state(accountId, op, month, now) };
      }
      granted = true;
      const reservation = this.#held(this.#reservations.create(hold, accountId, op, month, idempotency), owner);
      return { ok: true, reservation, state: quotaStateOf(op, row.lim, row.used, month, now) };
    } finally {
      if (!granted) this.#unbusy(owner, 1);
    }
  }

  /** The commit statement of a reservation (with its key and the upload's digest when it has one). */
  #commitQuery(res: Reservation, month: string, now: Date): { name: string; text: string; values: unknown[] } {
    const values: unknown[] = [this.#ownerFor(res), res.accountId, res.month, res.operation, month, this.#defaults[res.operation], res.id];
    const key = res.idempotency;
    if (!key) return { name: 'optmark_commit', text: COMMIT, values };
    return { name: 'optmark_commit_keyed', text: COMMIT_KEYED, values: [...values, key.key, uploadDigest(key), now.getTime() + IDEMPOTENCY_TTL_MS] };
  }

  commit(res: Reservation, now: Date = new Date(), onSent?: () => void): Promise<QuotaState | undefined> {
    return this.#reservations.serial(res, () => this.#commit(res, now, onSent));
  }

  async #commit(res: Reservation, now: Date, onSent: (() => void) | undefined): Promise<QuotaState | undefined> {
    const state = this.#reservations.state(res);
    if (state !== 'held') {
      if (onSent && state === undefined) throw reservationLost(); // refunded or reclaimed: no answer
      onSent?.();
      return undefined;
    }
    const m = monthOf(now);
    if (res.idempotency) return this.#commitKeyed(res, m, now, onSent);
    const call: CommitCall = {
      hold: res.id,
      accountId: res.accountId,
      month: res.month,
      operation: res.operation,
      at: m,
      owner: this.#ownerFor(res),
      onSent,
      sent: false,
    };
    let row: CommitAnswer;
    try {
      row = await this.#commits.add(call);
    } catch (err) {
      if (call.sent) {
        // The answer went out; whether the statement ran is not known. Counted as committed, and the
        // commit is done again once the database answers (taking a hold that is already gone changes nothing).
        this.#commitRetry.add(res);
        this.#set(res, 'committed');
      }
      throw err;
    }
    if (!row.released) {
      if (this.#reservations.state(res) === 'held') this.#set(res, undefined);
      throw reservationLost();
    }
    this.#set(res, 'committed');
    if (call.failed !== undefined) throw call.failed;
    if (!call.sent) onSent?.();
    return quotaStateOf(res.operation, row.lim, row.used, m, now);
  }

  /** A keyed reservation's commit (its key recorded in the same statement): one statement of its own. */
  async #commitKeyed(res: Reservation, m: string, now: Date, onSent: (() => void) | undefined): Promise<QuotaState | undefined> {
    const query = this.#commitQuery(res, m, now);
    let row: { released: number; lim: number; used: number } | undefined;
    if (onSent && this.#leaseFresh()) {
      row = await this.#commitPipelined(res, query, onSent);
    } else {
      row = (await this.#q<{ released: number; lim: number; used: number }>(query.text, query.values, query.name)).rows[0];
      if (row?.released === 1) {
        this.#set(res, 'committed');
        onSent?.();
      }
    }
    if (row?.released !== 1) {
      if (this.#reservations.state(res) === 'held') this.#set(res, undefined);
      throw reservationLost();
    }
    this.#set(res, 'committed');
    return quotaStateOf(res.operation, row.lim, row.used, m, now);
  }

  /**
   * The commit statement is written to a connection, then `onSent` runs at once, before the answer comes
   * back. Written means PostgreSQL gets it even if this process is killed the next instant (the kernel
   * sends what the socket holds), so the unit and the answer's last byte go out together. Only while the
   * lease is fresh: a statement that lands after this instance's holds were reclaimed would not count.
   */
  async #commitPipelined(
    res: Reservation,
    query: { name: string; text: string; values: unknown[] },
    onSent: () => void,
  ): Promise<{ released: number; lim: number; used: number } | undefined> {
    const client = await this.#connection();
    let sent = false;
    let failure: Error | undefined;
    try {
      // node-postgres writes the statement to the socket inside query() when the connection is idle (a
      // pooled connection is): it is on its way when the call returns.
      const pending = client.query<{ released: number; lim: number; used: number }>(query);
      sent = true;
      onSent();
      return (await pending).rows[0];
    } catch (err) {
      failure = err instanceof Error ? err : new Error(String(err));
      if (!sent) throw isUnavailable(err) ? unavailable(err, this.location) : err;
      // The answer went out; whether the statement ran is not known. Counted as committed, and the
      // commit is done again once the database answers (taking a hold that is already gone changes nothing).
      this.#commitRetry.add(res);
      this.#set(res, 'committed');
      throw isUnavailable(err) ? unavailable(err, this.location) : err;
    } finally {
      client.release(failure);
    }
  }

  /** Was the lease renewed recently enough that a statement sent now lands before it could expire? */
  #leaseFresh(): boolean {
    return Date.now() - this.#leaseAt < LEASE_MS - this.#timeoutMs - 1000;
  }

  refund(res: Reservation, now: Date = new Date()): Promise<QuotaState | undefined> {
    return this.#reservations.serial(res, () => this.#refund(res, now));
  }

  async #refund(res: Reservation, now: Date): Promise<QuotaState | undefined> {
    const state = this.#reservations.state(res);
    if (state === undefined) return undefined;
    const m = monthOf(now);
    let row: RefundAnswer;
    try {
      // A committed unit's refund marks its hold row under one owner, which every sending of it must name
      // and which must outlive them: the current one, kept busy until the refund is answered.
      if (!this.#ownerOf.has(res)) this.#ownerOf.set(res, await this.#take(1));
      const key = res.idempotency?.key;
      row = key
        ? await this.#refundKeyed(res, key, m)
        : await this.#refunds.add({
            hold: res.id,
            accountId: res.accountId,
            month: res.month,
            operation: res.operation,
            at: m,
            held: state === 'held',
            owner: this.#ownerFor(res),
          });
    } catch (err) {
      // The database could not take it now: retried by the background work until it can (a held unit
      // of a live instance is never reclaimed by anyone else).
      this.#retry.add(res);
      throw err;
    }
    this.#retry.delete(res);
    // Answered: no sending of it is left, so its mark (if it made one) is of no more use.
    if (state === 'committed') this.#markers.push({ owner: this.#ownerFor(res), hold: res.id });
    this.#set(res, undefined);
    return row && quotaStateOf(res.operation, row.lim, row.used, m, now);
  }

  /** A keyed reservation's refund (its key given back in the same statement). */
  async #refundKeyed(res: Reservation, key: string, m: string): Promise<RefundAnswer> {
    const held = this.#reservations.state(res) === 'held';
    const r = await this.#q<{ lim: number; used: number; after: number | null; same_month: boolean }>(
      REFUND_KEYED,
      [this.#ownerFor(res), res.accountId, res.month, res.operation, m, this.#defaults[res.operation], held, res.id, key],
      'optmark_refund_keyed',
    );
    const row = r.rows[0];
    // The state read in the statement predates its own update: show the unit given back.
    return row && { lim: row.lim, used: row.same_month && row.after !== null ? row.after : row.used };
  }

  async quotaState(accountId: number, op: Operation, now: Date = new Date()): Promise<QuotaState> {
    return this.#state(accountId, op, monthOf(now), now);
  }

  async pruneIdempotencyKeys(now: Date = new Date()): Promise<number> {
    return (await this.#q(PRUNE_KEYS, [now.getTime()])).rowCount ?? 0;
  }

  async reconcile(now: Date = new Date()): Promise<number> {
    const t = now.getTime();
    const owners = await this.#q<{ id: string; host: string; pid: number; started: string; expires_at: number }>(
      'SELECT id, host, pid, started, expires_at FROM owners',
    );
    const dead = owners.rows
      .filter((o) => isDead({ id: o.id, host: o.host, pid: o.pid, started: o.started, expiresAt: o.expires_at }, this.#owner, t))
      .map((o) => o.id);
    // Owners with hold rows that are not registered (an instance of before schema 4 took them for dead and
    // deleted their owner row, or their rows outlived it): every owner known here is a bound of the search.
    const known = new Set([...owners.rows.map((o) => o.id), this.#owner.id, ...this.#owners.keys()]);
    for (let found = await this.#orphans(known); found.length > 0; found = await this.#orphans(known)) {
      for (const owner of found) {
        known.add(owner);
        dead.push(owner);
      }
    }
    const oldHolds = await this.#q<{ owner: string }>('SELECT owner FROM holds WHERE owner NOT IN (SELECT id FROM owners)');
    for (const { owner } of oldHolds.rows) if (!known.has(owner)) dead.push(owner);
    let units = 0;
    for (const id of dead) units += (await this.#q<{ units: number }>(RELEASE_OWNER, [id])).rows[0]!.units;
    this.#reconciled += units;
    return units;
  }

  /** The first owner of hold rows in each gap between the `known` owners (ORPHAN_OWNERS). */
  async #orphans(known: ReadonlySet<string>): Promise<string[]> {
    const { lo, hi, last } = ownerGaps(known);
    return (await this.#q<{ owner: string }>(ORPHAN_OWNERS, [lo, hi, last])).rows.map((r) => r.owner);
  }

  // ── operator side ─────────────────────────────────────────────────────────────────────────────

  async bootstrapIfEmpty(): Promise<{ account: Account; key: string } | undefined> {
    return this.#tx(async (c) => {
      // Two instances starting on an empty database: the lock makes the second see the first's account.
      await c.query('LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE');
      const n = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM accounts');
      if (n.rows[0]!.n > 0) return undefined;
      const account = await this.#insertAccount(c, BOOTSTRAP_ACCOUNT, 'pro', new Date());
      const { key } = await this.#insertKey(c, account.id, new Date());
      return { account, key };
    });
  }

  async createAccount(name: string, plan: Plan, now: Date = new Date()): Promise<Account> {
    checkAccountName(name);
    checkPlan(plan);
    return this.#insertAccount(undefined, name, plan, now);
  }

  async #insertAccount(c: pg.PoolClient | undefined, name: string, plan: Plan, now: Date): Promise<Account> {
    const text = 'INSERT INTO accounts (name, plan, created_at) VALUES ($1, $2, $3) RETURNING id, name, plan, protect_limit, verify_limit, created_at';
    try {
      const r = c ? await c.query<AccountRow>(text, [name, plan, now]) : await this.#q<AccountRow>(text, [name, plan, now]);
      return this.#toAccount(r.rows[0]!);
    } catch (err) {
      if ((err as { code?: unknown }).code === '23505')
        throw new StoreError('duplicate_account', `an account named "${name}" already exists (names ignore case)`);
      throw err;
    }
  }

  async listAccounts(): Promise<Account[]> {
    const r = await this.#q<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a ORDER BY lower(a.name), a.name`);
    return r.rows.map((row) => this.#toAccount(row));
  }

  async getAccount(name: string): Promise<Account> {
    return this.#toAccount(await this.#row(name));
  }

  async setPlan(name: string, plan: Plan): Promise<Account> {
    checkPlan(plan);
    const r = await this.#q<AccountRow>(`UPDATE accounts a SET plan = $2 WHERE lower(a.name) = lower($1) RETURNING ${ACCOUNT_COLUMNS}`, [name, plan]);
    if (!r.rows[0]) throw unknownAccount(name);
    this.#forgetKeys();
    return this.#toAccount(r.rows[0]);
  }

  async setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Promise<Account> {
    checkLimits(limits);
    const r = await this.#q<AccountRow>(
      `UPDATE accounts a SET protect_limit = CASE WHEN $2 THEN $3::bigint ELSE a.protect_limit END,
                             verify_limit = CASE WHEN $4 THEN $5::bigint ELSE a.verify_limit END
        WHERE lower(a.name) = lower($1) RETURNING ${ACCOUNT_COLUMNS}`,
      [name, limits.protect !== undefined, limits.protect ?? null, limits.verify !== undefined, limits.verify ?? null],
    );
    if (!r.rows[0]) throw unknownAccount(name);
    this.#forgetKeys();
    return this.#toAccount(r.rows[0]);
  }

  async issueKey(accountName: string, now: Date = new Date()): Promise<{ key: string; prefix: string; id: number }> {
    const row = await this.#row(accountName);
    return this.#insertKey(undefined, row.id, now);
  }

  async #insertKey(c: pg.PoolClient | undefined, accountId: number, now: Date): Promise<{ key: string; prefix: string; id: number }> {
    const key = generateKey();
    const prefix = displayPrefix(key);
    const text = 'INSERT INTO api_keys (account_id, hash, prefix, created_at) VALUES ($1, $2, $3, $4) RETURNING id';
    const values = [accountId, hashKey(key), prefix, now];
    const r = c ? await c.query<{ id: number }>(text, values) : await this.#q<{ id: number }>(text, values);
    return { key, prefix, id: r.rows[0]!.id };
  }

  async listKeys(accountName: string): Promise<KeyInfo[]> {
    await this.#flushLastUsed();
    const row = await this.#row(accountName);
    const r = await this.#q<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.account_id = $1 ORDER BY k.id`, [
      row.id,
    ]);
    return r.rows.map(toKeyInfo);
  }

  async revokeKey(prefix: string, now: Date = new Date()): Promise<{ prefix: string; account: string; alreadyRevoked: boolean }> {
    const lookup = keyLookup(prefix.trim());
    let key: KeyRow;
    if (lookup.kind === 'whole') {
      const r = await this.#q<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = $1`, [hashKey(lookup.key)]);
      if (!r.rows[0]) throw new StoreError('unknown_key', 'no key matches that key');
      key = r.rows[0];
    } else {
      const r = await this.#q<KeyRow>(
        `SELECT ${KEY_COLUMNS} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.prefix >= $1 AND k.prefix < $2 ORDER BY k.id`,
        [lookup.prefix, `${lookup.prefix}~`],
      );
      key = pickByPrefix(
        r.rows.map((k) => ({ ...k, revoked: k.revoked_at !== null })),
        lookup.shown,
      );
    }
    const u = await this.#q('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, key.id]);
    this.#forgetKeys();
    return { prefix: key.prefix, account: key.account, alreadyRevoked: u.rowCount !== 1 };
  }

  async usage(accountName: string, month?: string, now: Date = new Date()): Promise<Usage> {
    const m = month === undefined ? monthOf(now) : parseMonth(month);
    const { id } = await this.#row(accountName);
    const held = { protect: 0, verify: 0 };
    const h = await this.#q<{ operation: Operation; n: number }>(
      `SELECT operation, sum(n)::bigint AS n FROM (
         SELECT operation, n FROM holds WHERE account_id = $1 AND month = $2
         UNION ALL SELECT operation, 1 FROM reservations WHERE account_id = $1 AND month = $2 AND NOT refunded
       ) h GROUP BY operation`,
      [id, m],
    );
    for (const r of h.rows) held[r.operation] = r.n;
    const [protect, verify] = await Promise.all([this.#state(id, 'protect', m, now), this.#state(id, 'verify', m, now)]);
    return { month: m, protect, verify, held };
  }

  // ── shared secrets ────────────────────────────────────────────────────────────────────────────

  async recordPublicKey(keyId: string, pem: string, now: Date = new Date()): Promise<boolean> {
    // Durable whatever the session's setting, and announced to every instance when the transaction commits.
    return this.#tx(async (c) => {
      await c.query('SET LOCAL synchronous_commit = on');
      const r = await c.query('INSERT INTO signing_keys (key_id, public_pem, recorded_at) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING', [
        keyId,
        pem,
        now,
      ]);
      if (r.rowCount === 1) await c.query('SELECT pg_notify($1, $2)', [KEYS_CHANNEL, keyId]);
      return r.rowCount === 1;
    });
  }

  async listPublicKeys(): Promise<StoredPublicKey[]> {
    const r = await this.#q<{ key_id: string; public_pem: string; recorded_at: Date }>(
      'SELECT key_id, public_pem, recorded_at FROM signing_keys ORDER BY recorded_at, key_id LIMIT 10000',
    );
    return r.rows.map((k) => ({ keyId: k.key_id, pem: k.public_pem, recordedAt: k.recorded_at.toISOString() }));
  }

  async sharedSecret(name: string, create: () => Buffer): Promise<Buffer> {
    await this.#tx(async (c) => {
      await c.query('SET LOCAL synchronous_commit = on');
      await c.query('INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, now()) ON CONFLICT (name) DO NOTHING', [name, create()]);
    });
    const r = await this.#q<{ value: Buffer }>('SELECT value FROM secrets WHERE name = $1', [name]);
    return r.rows[0]!.value;
  }

  /** LISTENs on its own connection (reconnecting after a failure); `listener` also runs after each reconnect. */
  async onPublicKeysChanged(listener: () => void): Promise<() => Promise<void>> {
    let stopped = false;
    let client: pg.Client | undefined;
    const connect = async (): Promise<void> => {
      if (stopped || this.#closed) return;
      const c = new pg.Client({ ...this.#config, query_timeout: undefined });
      client = c;
      this.#listeners.push(c);
      c.on('notification', () => listener());
      c.on('error', () => undefined);
      c.on('end', () => {
        this.#listeners = this.#listeners.filter((x) => x !== c);
        if (!stopped && !this.#closed) setTimeout(() => void connect(), 1000).unref();
      });
      try {
        await c.connect();
        await c.query(`LISTEN ${KEYS_CHANNEL}`);
        listener(); // anything recorded while not listening
      } catch {
        await c.end().catch(() => undefined);
      }
    };
    await connect();
    return async () => {
      stopped = true;
      await client?.end().catch(() => undefined);
    };
  }

  // ── migration ─────────────────────────────────────────────────────────────────────────────────

  async counts(): Promise<StoreCounts> {
    const r = await this.#q<StoreCounts>(
      `SELECT (SELECT count(*) FROM accounts) AS accounts, (SELECT count(*) FROM api_keys) AS keys,
              (SELECT count(*) FROM usage_counters) AS counters, (SELECT count(*) FROM dashboard_batches) AS batches,
              (SELECT count(*) FROM dashboard_records) AS records, (SELECT count(*) FROM signing_keys) AS "publicKeys",
              (SELECT count(*) FROM secrets) AS secrets`,
    );
    return r.rows[0]!;
  }

  async isEmpty(): Promise<boolean> {
    return isEmptyCounts(await this.counts());
  }

  async snapshot(months?: string[]): Promise<StoreSnapshot> {
    return this.#tx(async (c) => {
      await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      const a = await c.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a ORDER BY a.id`);
      const k = await c.query<{ account: string; hash: Buffer; prefix: string; created_at: Date; last_used_at: Date | null; revoked_at: Date | null }>(
        'SELECT a.name AS account, k.hash, k.prefix, k.created_at, k.last_used_at, k.revoked_at FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id',
      );
      const u = await c.query<{ account: string; month: string; operation: Operation; used: number }>(
        `SELECT a.name AS account, u.month, u.operation,
                greatest(0, u.used - coalesce((SELECT sum(n) FROM holds h WHERE h.account_id = u.account_id AND h.month = u.month AND h.operation = u.operation), 0)
                  - (SELECT count(*) FROM reservations r WHERE r.account_id = u.account_id AND r.month = u.month AND r.operation = u.operation AND NOT r.refunded))::bigint AS used
           FROM usage_counters u JOIN accounts a ON a.id = u.account_id WHERE $1::text[] IS NULL OR u.month = ANY($1) ORDER BY a.id, u.month, u.operation`,
        [months ?? null],
      );
      const b = await c.query<BatchRow & { account: string }>(
        'SELECT b.*, a.name AS account FROM dashboard_batches b JOIN accounts a ON a.id = b.account_id ORDER BY b.created_at, b.id',
      );
      const d = await c.query<RecordRow & { account: string }>(
        'SELECT d.*, a.name AS account FROM dashboard_records d JOIN accounts a ON a.id = d.account_id ORDER BY d.marked_at, d.id',
      );
      const p = await c.query<{ key_id: string; public_pem: string; recorded_at: Date }>(
        'SELECT key_id, public_pem, recorded_at FROM signing_keys ORDER BY recorded_at, key_id',
      );
      const x = await c.query<{ name: string; value: Buffer }>('SELECT name, value FROM secrets ORDER BY name');
      return {
        accounts: a.rows.map((r) => ({
          name: r.name,
          plan: r.plan,
          protectLimit: r.protect_limit,
          verifyLimit: r.verify_limit,
          createdAt: r.created_at.toISOString(),
        })),
        keys: k.rows.map((r) => ({
          account: r.account,
          hash: r.hash,
          prefix: r.prefix,
          createdAt: r.created_at.toISOString(),
          lastUsedAt: r.last_used_at?.toISOString() ?? null,
          revokedAt: r.revoked_at?.toISOString() ?? null,
        })),
        counters: u.rows,
        batches: b.rows.map((r) => ({ ...toBatch(r), account: r.account })),
        records: d.rows.map((r) => ({ ...toRecord(r), account: r.account })),
        publicKeys: p.rows.map((r) => ({ keyId: r.key_id, pem: r.public_pem, recordedAt: r.recorded_at.toISOString() })),
        secrets: x.rows,
      };
    });
  }

  async restore(s: StoreSnapshot): Promise<void> {
    await this.#tx(async (c) => {
      await c.query('SET LOCAL synchronous_commit = on');
      await c.query(
        'TRUNCATE dashboard_records, dashboard_batches, idempotency_keys, reservations, holds, usage_counters, api_keys, accounts RESTART IDENTITY',
      );
      // Rows go in as JSON arrays, a few thousand per statement; accounts are matched by name.
      await insertRows(
        c,
        `INSERT INTO accounts (name, plan, protect_limit, verify_limit, created_at)
           SELECT x.name, x.plan, x.protect_limit, x.verify_limit, x.created_at
             FROM json_to_recordset($1::json) AS x(n int, name text, plan text, protect_limit bigint, verify_limit bigint, created_at timestamptz) ORDER BY x.n`,
        s.accounts.map((a, n) => ({ n, name: a.name, plan: a.plan, protect_limit: a.protectLimit, verify_limit: a.verifyLimit, created_at: a.createdAt })),
      );
      const byName = 'JOIN accounts a ON lower(a.name) = lower(x.account)';
      await insertRows(
        c,
        `INSERT INTO api_keys (account_id, hash, prefix, created_at, last_used_at, revoked_at)
           SELECT a.id, decode(x.hash, 'hex'), x.prefix, x.created_at, x.last_used_at, x.revoked_at
             FROM json_to_recordset($1::json) AS x(n int, account text, hash text, prefix text, created_at timestamptz, last_used_at timestamptz, revoked_at timestamptz)
             ${byName} ORDER BY x.n`,
        s.keys.map((k, n) => ({
          n,
          account: k.account,
          hash: k.hash.toString('hex'),
          prefix: k.prefix,
          created_at: k.createdAt,
          last_used_at: k.lastUsedAt,
          revoked_at: k.revokedAt,
        })),
      );
      await insertRows(
        c,
        `INSERT INTO usage_counters (account_id, month, operation, used)
           SELECT a.id, x.month, x.operation, x.used FROM json_to_recordset($1::json) AS x(account text, month text, operation text, used bigint) ${byName}`,
        s.counters,
      );
      await insertRows(
        c,
        `INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, used, created_at)
           SELECT x.id, a.id, x."keyPrefix", x.size, x.provenance, x.fingerprint, x.used, x."createdAt"
             FROM json_to_recordset($1::json) AS x(account text, id text, "keyPrefix" text, size int, provenance boolean, fingerprint boolean, used int, "createdAt" text)
             ${byName}`,
        s.batches,
      );
      await insertRows(
        c,
        `INSERT INTO dashboard_records (id, account_id, ${RECORD_COLUMNS.slice(4)})
           SELECT x.id, a.id, x."batchId", x.sha256, x."originalName", x."producedName", x."mimeType", x.bytes, x.layers, x."keyPrefix",
                  x."provenanceKeyId", x."markedAt"
             FROM json_to_recordset($1::json) AS x(account text, id text, "batchId" text, sha256 text, "originalName" text, "producedName" text,
                  "mimeType" text, bytes bigint, layers text, "keyPrefix" text, "provenanceKeyId" text, "markedAt" text)
             ${byName}`,
        s.records.map((r) => ({ ...r, layers: r.layers.join(',') })),
      );
      let recorded = 0;
      for (const k of s.publicKeys) {
        const r = await c.query('INSERT INTO signing_keys (key_id, public_pem, recorded_at) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING', [
          k.keyId,
          k.pem,
          k.recordedAt,
        ]);
        recorded += r.rowCount ?? 0;
      }
      if (recorded > 0) await c.query('SELECT pg_notify($1, $2)', [KEYS_CHANNEL, 'restore']);
      for (const x of s.secrets) {
        await c.query(
          'INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, now()) ON CONFLICT (name) DO UPDATE SET value = excluded.value, created_at = excluded.created_at',
          [x.name, x.value],
        );
      }
    });
    this.#forgetKeys();
  }

  // ── lifecycle ─────────────────────────────────────────────────────────────────────────────────

  async startBackground(options: BackgroundOptions = {}): Promise<void> {
    if (this.#timers.length > 0) return;
    const report = (what: string) => (err: unknown) => options.onError?.(err instanceof Error ? err : new Error(String(err)), what);
    await (this.#registered ??= this.#register());
    const reconcile = async () => {
      try {
        for (const r of [...this.#retry]) await this.refund(r);
        for (const r of [...this.#commitRetry]) await this.#recommit(r);
        await this.#dropMarkers();
        const units = await this.reconcile();
        if (units > 0) options.onReconciled?.(units);
      } catch (err) {
        report('reconcile')(err);
      }
    };
    await reconcile();
    const every = (ms: number, fn: () => Promise<void>) => {
      let running = false;
      const t = setInterval(() => {
        if (running) return; // a slow database: never pile up
        running = true;
        void fn().finally(() => (running = false));
      }, ms);
      t.unref();
      this.#timers.push(t);
    };
    every(RECONCILE_INTERVAL_MS, reconcile);
    every(LEASE_RENEW_MS, () => this.#renew().catch(report('lease')));
    every(LAST_USED_FLUSH_MS, () => this.#flushLastUsed().catch(report('last-used')));
    every(IDEMPOTENCY_PRUNE_MS, () => this.pruneIdempotencyKeys().then(() => undefined, report('idempotency keys')));
  }

  async stopBackground(): Promise<void> {
    for (const t of this.#timers.splice(0)) clearInterval(t);
  }

  get stats(): StoreStats {
    return {
      engine: 'postgres',
      reconciledUnits: this.#reconciled,
      pool: { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount },
    };
  }

  get checkpointStats(): undefined {
    return undefined;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const t of this.#timers.splice(0)) clearInterval(t);
    try {
      await this.#flushLastUsed();
      // Whatever this instance still holds was never answered: give it back now rather than at expiry.
      for (const id of this.#owners.keys()) await this.#q(RELEASE_OWNER, [id]);
    } catch {
      // The database is gone: the lease expires and another instance gives the units back.
    } finally {
      await Promise.all(this.#listeners.map((c) => c.end().catch(() => undefined)));
      await this.#pool.end().catch(() => undefined);
    }
  }

  // ── helpers ───────────────────────────────────────────────────────────────────────────────────

  /** Deletes the marks of committed units whose refund was answered (see #markers). */
  async #dropMarkers(): Promise<void> {
    if (this.#markers.length === 0) return;
    const rows = this.#markers.splice(0);
    try {
      await this.#q(
        'DELETE FROM reservations r USING unnest($1::text[], $2::bigint[]) AS m(owner, id) WHERE r.owner = m.owner AND r.id = m.id AND r.refunded',
        [rows.map((m) => m.owner), rows.map((m) => m.hold)],
      );
    } catch (err) {
      this.#markers.push(...rows);
      throw err;
    }
  }

  /** A commit whose outcome was not known, done again (a commit that did run finds its hold row gone: nothing changes). */
  async #recommit(res: Reservation): Promise<void> {
    const query = this.#commitQuery(res, res.month, new Date());
    await this.#q(query.text, query.values, query.name);
    this.#commitRetry.delete(res);
    this.#done(res);
  }

  /** A pooled connection of its own that can take a statement now (503 store_unavailable otherwise). */
  async #connection(): Promise<pg.PoolClient> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      throw unavailable(err, this.location);
    }
    if ((client as unknown as { _queryable?: boolean })._queryable === false) {
      client.release(true);
      throw unavailable(new Error('the connection broke'), this.location);
    }
    return client;
  }

  /** Runs one batch statement on a connection of its own (see ./batch.ts); `onWritten` once it is sent. */
  async #batch<R extends pg.QueryResultRow>(name: string, text: string, values: unknown[], onWritten?: () => void): Promise<R[]> {
    const client = await this.#connection();
    let failure: Error | undefined;
    try {
      return await runOn<R>(client, { name, text, values }, onWritten);
    } catch (err) {
      failure = err instanceof Error ? err : new Error(String(err));
      throw isUnavailable(err) ? unavailable(err, this.location) : err;
    } finally {
      client.release(failure);
    }
  }

  /** $1..$3 of every batch statement. */
  #head(owner: string): unknown[] {
    return [owner, this.#defaults.protect, this.#defaults.verify];
  }

  /**
   * Reserves of one turn under the current owner (see #retire for a statement whose outcome is not
   * known); each unit granted stays counted in the owner's `busy` until its reservation is done.
   */
  async #reserveBatch(calls: ReserveCall[]): Promise<(ReserveAnswer | Error | typeof DEFER)[]> {
    const owner = await this.#take(calls.length);
    const sent = { written: false };
    const onWritten = () => void (sent.written = true);
    let out: (ReserveAnswer | Error | typeof DEFER)[];
    try {
      out = calls.length === 1 ? [await this.#reserveAlone(calls[0]!, owner, onWritten)] : await this.#reserveMany(calls, owner, onWritten);
    } catch (err) {
      if (sent.written && !isAnswered(err)) this.#retire(owner);
      this.#unbusy(owner, calls.length);
      throw err;
    }
    this.#unbusy(owner, out.filter((a) => a === DEFER || a instanceof Error || !a.granted).length);
    return out;
  }

  /** Per counter, the first min(k, limit - used) calls get a unit. */
  async #reserveMany(calls: ReserveCall[], owner: string, onWritten: () => void): Promise<(ReserveAnswer | Error | typeof DEFER)[]> {
    const { groups } = groupsOf(calls);
    const rows = await this.#batch<{ lim: number | null; before: number | null; granted: number | null; won: boolean | null }>(
      'optmark_reserve_batch',
      RESERVE_BATCH,
      [...this.#head(owner), ...groupArrays(groups, (g) => g.members.length), ...memberArrays(groups, (_, j) => j + 1)],
      onWritten,
    );
    const out = new Map<ReserveCall, ReserveAnswer | Error | typeof DEFER>();
    groups.forEach((g, i) => {
      const row = rows[i]!;
      if (row.lim === null) {
        for (const c of g.members) out.set(c, new StoreError('unknown_account', `no account with id ${c.accountId}`));
        return;
      }
      const granted = row.granted ?? 0;
      if (granted > 0 && !row.won) {
        // Another instance created the counter row in the same instant: counted in the next batch.
        for (const c of g.members) out.set(c, DEFER);
        return;
      }
      const before = row.before ?? 0;
      g.members.forEach((c, j) => {
        out.set(c, { granted: j < granted, lim: row.lim!, used: j < granted ? before + j + 1 : before + granted, owner });
      });
    });
    return calls.map((c) => out.get(c)!);
  }

  /** A reserve alone in its turn: the single-row statement. */
  async #reserveAlone(c: ReserveCall, owner: string, onWritten: () => void): Promise<ReserveAnswer | Error> {
    const [taken] = await this.#batch<{ used: number; lim: number }>(
      'optmark_reserve',
      RESERVE,
      [c.accountId, c.month, c.operation, this.#defaults[c.operation], owner, c.hold],
      onWritten,
    );
    if (taken) return { granted: true, lim: taken.lim, used: taken.used, owner };
    const state = await this.#state(c.accountId, c.operation, c.month, new Date()).catch((err: unknown) => err as Error);
    return state instanceof Error ? state : { granted: false, lim: state.limit, used: state.used, owner };
  }

  /** Commits of one turn: per counter, the first min(k, held) are taken off this instance's hold. */
  async #commitBatch(all: CommitCall[]): Promise<(CommitAnswer | typeof DEFER)[]> {
    // One owner per statement: the others' calls go in the next.
    const owner = all[0]!.owner;
    const calls = all.filter((c) => c.owner === owner);
    const { groups, later } = groupsOf(calls);
    // Sent before the answer only while the lease is fresh: a statement that lands after this
    // instance's holds were reclaimed would not count (see #leaseFresh).
    const early = calls.filter((c) => c.onSent && !later.has(c));
    const onWritten =
      early.length > 0 && this.#leaseFresh()
        ? () => {
            for (const c of early) {
              c.sent = true;
              try {
                c.onSent!();
              } catch (err) {
                c.failed = err; // thrown to its caller once the statement is answered; the others go on
              }
            }
          }
        : undefined;
    // A commit alone in its turn: the single-row statement (one group of one; the answer's shape is the same).
    const alone = calls.length === 1 && groups.length === 1;
    const g0 = groups[0]!;
    const rows = await this.#batch<{ released: number | string[]; lim: number; used: number }>(
      alone ? 'optmark_commit' : 'optmark_commit_batch',
      alone ? COMMIT : COMMIT_BATCH,
      alone
        ? [owner, g0.accountId, g0.month, g0.operation, g0.at, this.#defaults[g0.operation], g0.members[0]!.hold]
        : [...this.#head(owner), ...groupArrays(groups, (g) => g.at), groups.flatMap((g) => g.members.map((c) => c.hold))],
      onWritten,
    );
    // The single statement answers 1 or 0 (no row for an account gone); the batch, the hold ids released.
    const released = alone ? undefined : new Set((rows[0]?.released as string[] | undefined)?.map(Number));
    const out = new Map<CommitCall, CommitAnswer>();
    groups.forEach((g, i) => {
      const row = rows[i] ?? { released: 0, lim: 0, used: 0 };
      for (const c of g.members) out.set(c, { released: released ? released.has(c.hold) : row.released === 1, lim: row.lim, used: row.used });
    });
    return all.map((c) => out.get(c) ?? DEFER);
  }

  /** Refunds of one turn, replayed in arrival order on the counter and hold values they were applied to. */
  async #refundBatch(all: RefundCall[]): Promise<(RefundAnswer | typeof DEFER)[]> {
    const owner = all[0]!.owner;
    const calls = all.filter((c) => c.owner === owner);
    const { groups, later } = groupsOf(calls);
    const rows = await this.#batch<{ applied: string[]; used_before: number | null; lim: number | null; used_at: number }>(
      'optmark_refund_batch',
      REFUND_BATCH,
      [...this.#head(owner), ...groupArrays(groups, (g) => g.at), ...memberArrays(groups, (c) => c.held)],
    );
    const applied = new Set(rows[0]?.applied.map(Number));
    const out = new Map<RefundCall, RefundAnswer>();
    groups.forEach((g, i) => {
      const row = rows[i]!;
      let used = row.used_before;
      for (const c of g.members) {
        // Only a call that took its unit off (not given back before) lowers the counter.
        if (applied.has(c.hold) && used !== null && used > 0) used--;
        // The answer shows the counter after this call (the month it was taken from), else the month of now.
        const shown = g.at === g.month && used !== null ? used : row.used_at;
        out.set(c, row.lim === null ? undefined : { lim: row.lim, used: shown });
      }
    });
    return all.map((c) => (c.owner !== owner || later.has(c) ? DEFER : out.get(c)));
  }

  async #register(): Promise<void> {
    const o = this.#owner;
    const at = Date.now();
    await this.#q(
      'INSERT INTO owners (id, host, pid, started, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at',
      [o.id, o.host, o.pid, o.started, at + LEASE_MS],
    );
    // The lease time stands for every owner renewed together: a fresh owner beside retired ones leaves it.
    if ([...this.#owners.keys()].every((id) => id === o.id)) this.#leaseAt = at;
    if (!this.#owners.has(o.id)) this.#owners.set(o.id, { busy: 0, retired: false });
  }

  async #renew(): Promise<void> {
    // A missing row means another instance took this owner for dead and gave its units back: the
    // current one registers again; the reservations it held fail at commit (reservation_lost).
    const at = Date.now();
    const ids = [...this.#owners.keys()];
    const r = await this.#q<{ id: string }>('UPDATE owners SET expires_at = $1 WHERE id = ANY($2::text[]) RETURNING id', [at + LEASE_MS, ids]);
    const renewed = new Set(r.rows.map((row) => row.id));
    for (const id of ids) if (!renewed.has(id) && id !== this.#owner.id) this.#owners.delete(id);
    if (this.#owners.has(this.#owner.id) && !renewed.has(this.#owner.id)) await this.#register();
    this.#leaseAt = at;
  }

  async #flushLastUsed(): Promise<void> {
    if (this.#lastUsed.size === 0) return;
    const rows = this.#lastUsed.take();
    await this.#q(
      `UPDATE api_keys k SET last_used_at = v.at FROM unnest($1::int[], $2::timestamptz[]) AS v(id, at)
        WHERE k.id = v.id AND (k.last_used_at IS NULL OR k.last_used_at < v.at)`,
      [rows.map((r) => r.id), rows.map((r) => r.at)],
    );
  }

  async #row(name: string): Promise<AccountRow> {
    const r = await this.#q<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a WHERE lower(a.name) = lower($1)`, [name]);
    if (!r.rows[0]) throw unknownAccount(name);
    return r.rows[0];
  }

  async #state(accountId: number, op: Operation, month: string, now: Date): Promise<QuotaState> {
    const r = await this.#q<{ lim: number; used: number }>(
      `SELECT ${limitOf('$2', '$3')} AS lim,
              coalesce((SELECT used FROM usage_counters u WHERE u.account_id = a.id AND u.month = $4 AND u.operation = $2::text), 0) AS used
         FROM accounts a WHERE a.id = $1`,
      [accountId, op, this.#defaults[op], month],
      'optmark_state',
    );
    const row = r.rows[0];
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
      createdAt: row.created_at.toISOString(),
    };
  }
}

function toKeyInfo(row: KeyRow): KeyInfo {
  return {
    id: row.id,
    prefix: row.prefix,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
  };
}

/** Did PostgreSQL answer the statement (with an error: it was rolled back), as opposed to no answer at all? */
function isAnswered(err: unknown): boolean {
  const cause = err instanceof StoreError ? (err as { cause?: unknown }).cause : err;
  return typeof (cause as { severity?: unknown } | null)?.severity === 'string';
}

function unavailable(err: unknown, where: string): StoreError {
  const reason = err instanceof Error ? err.message : String(err);
  return new StoreError('store_unavailable', `the PostgreSQL store at ${where} is unavailable: ${reason || (err as { code?: string }).code || 'no answer'}`, {
    cause: err,
  });
}

/** Rows per INSERT of a restore. */
const RESTORE_CHUNK = 2000;

/** Runs `sql` (whose $1 is a JSON array of rows) over `rows`, a chunk at a time. */
async function insertRows(c: pg.PoolClient, sql: string, rows: readonly object[]): Promise<void> {
  for (let i = 0; i < rows.length; i += RESTORE_CHUNK) await c.query(sql, [JSON.stringify(rows.slice(i, i + RESTORE_CHUNK))]);
}
