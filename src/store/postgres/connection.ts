/**
 * The PostgreSQL engine's connections: the bounded pool, its settings, the schema migration at open, and
 * the one place a failure becomes StoreError `store_unavailable` (connection refused or lost, timeouts,
 * admin shutdown, too many connections: the API answers 503 with Retry-After).
 */
import pg from 'pg';
import { StoreError } from '../errors.js';
import { runOn } from './batch.js';
import { migrate } from './schema.js';
import { parseDatabaseUrl } from './url.js';

export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_TIMEOUT_MS = 5000;

// int8 (counters and limits up to 2^31, lease times in ms) as numbers: every value stays below 2^53.
const TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** SQLSTATE classes that mean "the database cannot answer now", not "the statement is wrong". */
export function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return true; // network errors (ECONNREFUSED...), pool and query timeouts
  if (/^E[A-Z]+$/.test(code)) return true;
  return /^(08|53|57|58|40|55)/.test(code);
}

/** Did PostgreSQL answer the statement (with an error: it was rolled back), as opposed to no answer at all? */
export function isAnswered(err: unknown): boolean {
  const cause = err instanceof StoreError ? (err as { cause?: unknown }).cause : err;
  return typeof (cause as { severity?: unknown } | null)?.severity === 'string';
}

export function unavailable(err: unknown, where: string): StoreError {
  const reason = err instanceof Error ? err.message : String(err);
  return new StoreError('store_unavailable', `the PostgreSQL store at ${where} is unavailable: ${reason || (err as { code?: string }).code || 'no answer'}`, {
    cause: err,
  });
}

/** `err` as the store throws it: store_unavailable when the database could not answer. */
function mapped(err: unknown, where: string): unknown {
  return !(err instanceof StoreError) && isUnavailable(err) ? unavailable(err, where) : err;
}

export interface ConnectionOptions {
  url: string;
  poolSize?: number | undefined;
  timeoutMs?: number | undefined;
  synchronousCommit?: boolean | undefined;
}

/** The engine's query function (its errors already mapped to store_unavailable). */
export type Query = <R extends pg.QueryResultRow>(text: string, values?: unknown[], name?: string) => Promise<pg.QueryResult<R>>;

export class PgConnection {
  readonly pool: pg.Pool;
  readonly config: pg.PoolConfig;
  /** The URL without its password. */
  readonly location: string;
  readonly timeoutMs: number;

  private constructor(pool: pg.Pool, config: pg.PoolConfig, location: string, timeoutMs: number) {
    this.pool = pool;
    this.config = config;
    this.location = location;
    this.timeoutMs = timeoutMs;
  }

  /** Connects, creates the schema named in the URL if needed, and migrates it (once across instances). */
  static async open(opts: ConnectionOptions): Promise<PgConnection> {
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
    return new PgConnection(pool, config, url.display, timeout);
  }

  /** One statement on a pooled connection. */
  readonly q: Query = async <R extends pg.QueryResultRow>(text: string, values: unknown[] = [], name?: string) => {
    try {
      return await this.pool.query<R>(name ? { name, text, values } : { text, values });
    } catch (err) {
      throw mapped(err, this.location);
    }
  };

  /** Runs `fn` in a transaction on one connection. */
  async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.connection();
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw mapped(err, this.location);
    } finally {
      client.release();
    }
  }

  /** A pooled connection of its own that can take a statement now (503 store_unavailable otherwise). */
  async connection(): Promise<pg.PoolClient> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw unavailable(err, this.location);
    }
    if ((client as unknown as { _queryable?: boolean })._queryable === false) {
      client.release(true);
      throw unavailable(new Error('the connection broke'), this.location);
    }
    return client;
  }

  /** Runs one statement on a connection of its own (see ./batch.ts runOn); `onWritten` once it is sent. */
  async send<R extends pg.QueryResultRow>(name: string, text: string, values: unknown[], onWritten?: () => void): Promise<R[]> {
    const client = await this.connection();
    let failure: Error | undefined;
    try {
      return await runOn<R>(client, { name, text, values }, onWritten);
    } catch (err) {
      failure = err instanceof Error ? err : new Error(String(err));
      throw mapped(err, this.location);
    } finally {
      client.release(failure);
    }
  }

  get stats(): { total: number; idle: number; waiting: number } {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount };
  }

  async end(): Promise<void> {
    await this.pool.end().catch(() => undefined);
  }
}
