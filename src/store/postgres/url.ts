/**
 * OPTMARK_DATABASE_URL, read without loading the PostgreSQL client (`pg` is loaded only when a store is
 * opened on PostgreSQL: a SQLite server or CLI command never pays for it).
 */
import { StoreError } from '../errors.js';

/** Connection settings from the URL: our own parameters (schema, pool) are taken out of it. */
export function parseDatabaseUrl(url: string): { connectionString: string; schema: string | undefined; pool: number | undefined; display: string } {
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
  u.searchParams.delete('schema');
  u.searchParams.delete('pool');
  const display = new URL(u.href);
  if (display.password) display.password = '***';
  return { connectionString: u.href, schema, pool, display: display.href };
}
