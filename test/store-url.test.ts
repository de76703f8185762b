// OPTMARK_DATABASE_URL: optmark's own parameters (schema, pool, synchronous_commit) are read and taken
// out of the URL the PostgreSQL client gets; bad values are refused with invalid_database_url.
import { describe, expect, it } from 'vitest';
import { StoreError, parseDatabaseUrl } from '../src/store/index.js';

function refusal(url: string): string {
  try {
    parseDatabaseUrl(url);
  } catch (err) {
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).code).toBe('invalid_database_url');
    return (err as StoreError).message;
  }
  throw new Error(`${url} was accepted`);
}

describe('parseDatabaseUrl', () => {
  it('takes schema, pool and synchronous_commit out; keeps the rest; hides the password', () => {
    const u = parseDatabaseUrl('postgres://optmark:secret@db:5432/optmark?schema=tenant_a&pool=4&synchronous_commit=on&sslmode=require');
    expect(u).toEqual({
      connectionString: 'postgres://optmark:secret@db:5432/optmark?sslmode=require',
      schema: 'tenant_a',
      pool: 4,
      synchronousCommit: true,
      display: 'postgres://optmark:***@db:5432/optmark?sslmode=require',
    });
    expect(parseDatabaseUrl('postgres://db/optmark?synchronous_commit=off').synchronousCommit).toBe(false);
    expect(parseDatabaseUrl('postgresql://db/optmark')).toMatchObject({ schema: undefined, pool: undefined, synchronousCommit: undefined });
  });

  it('refuses what it cannot use, naming it', () => {
    expect(refusal('postgres://db/optmark?synchronous_commit=yes')).toBe('synchronous_commit must be on or off, got "yes"');
    expect(refusal('postgres://db/optmark?pool=0')).toBe('pool must be 1..1000, got 0');
    expect(refusal('postgres://db/optmark?schema=Bad-Name')).toMatch(/^schema must be a lower-case SQL identifier/);
    expect(refusal('mysql://db/optmark')).toBe('OPTMARK_DATABASE_URL must start with postgres://, got mysql://');
    expect(refusal('not a url')).toMatch(/is not a URL/);
  });
});
