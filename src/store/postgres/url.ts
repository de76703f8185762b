/**
 * OPTMARK_DATABASE_URL, read without loading the PostgreSQL client (`pg` is loaded only when a store is
 * opened on PostgreSQL: a SQLite server or CLI command never pays for it).
 */
import { StoreError } from '../errors.js';

export interface DatabaseUrl {
  /** The URL for the `pg` client, without optmark's own parameters. */
  connectionString: string;
  schema: string | undefined;
  pool: number | undefined;
  /** `synchronous_commit=on`: the server's counter writes wait for the WAL flush too (off, the default: they do not). */
  synchronousCommit: boolean | undefined;
  /** The URL with its password hidden, for messages. */
  display: string;
}

/** Connection settings from the URL: our own parameters (schema, pool, synchronous_commit) are taken out of it. */
export function parseDatabaseUrl(url: string): DatabaseUrl {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new StoreError('invalid_database_url', 'OPTMARK_DATABASE_URL is not a URL (postgres://user:password@host:5432/database)');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new StoreError('invalid_database_url', `OPTMARK_DATABASE_URL must start with postgres://, got ${u.protocol}//`);
  }
  const schema = u.searchParams.get('schema') ?? undefined;
  if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new StoreError('invalid_database_url', `schema must be a lower-case SQL identifier, got ${JSON.stringify(schema)}`);
  }
  const poolArg = u.searchParams.get('pool');
  const pool = poolArg === null ? undefined : Number(poolArg);
  if (pool !== undefined && (!Number.isInteger(pool) || pool < 1 || pool > 1000))
    throw new StoreError('invalid_database_url', `pool must be 1..1000, got ${poolArg}`);
  const syncArg = u.searchParams.get('synchronous_commit');
  if (syncArg !== null && syncArg !== 'on' && syncArg !== 'off')
    throw new StoreError('invalid_database_url', `synchronous_commit must be on or off, got ${JSON.stringify(syncArg)}`);
  const synchronousCommit = syncArg === null ? undefined : syncArg === 'on';
  for (const ours of ['schema', 'pool', 'synchronous_commit']) u.searchParams.delete(ours);
  const display = new URL(u.href);
  if (display.password) display.password = '***';
  return { connectionString: u.href, schema, pool, synchronousCommit, display: display.href };
}
