/**
 * Both store engines for parameterised tests. PostgreSQL runs against the server at
 * OPTMARK_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): each test file gets
 * a freshly created database, dropped at the end, and each store opened in it a schema of its own (the
 * same data directory maps to the same schema, so close-and-reopen tests work as with SQLite files).
 * No PostgreSQL answering is a failure, never a skip: test/setup/postgres.ts starts a private cluster first.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';
import type { Relay } from './relay.js';

export const TEST_DATABASE_URL = process.env.OPTMARK_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh database on the test server; `drop()` removes it (and ends its connections). */
export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `optmark_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(
      `no PostgreSQL answers at ${TEST_DATABASE_URL} (${(err as Error).message}); start one or set OPTMARK_TEST_DATABASE_URL (the test command starts a private cluster when Debian's postgresql is installed)`,
    );
  }
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(TEST_DATABASE_URL);
  u.pathname = `/${name}`;
  return {
    url: u.href,
    drop: async () => {
      const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export type EngineName = 'sqlite' | 'postgres';
export const ENGINES: EngineName[] = ['sqlite', 'postgres'];

export interface Limits {
  protect: number;
  verify: number;
}

/** Opens stores of one engine and cleans up after each test and at the end of the file. */
export class StoreHarness {
  readonly engine: EngineName;
  #db: { url: string; drop: () => Promise<void> } | undefined;
  readonly #stores: Store[] = [];
  readonly #dirs: string[] = [];
  readonly #schemas = new Map<string, string>();
  readonly #schemaOf = new WeakMap<Store, string>();

  constructor(engine: EngineName) {
    this.engine = engine;
  }

  /** Call in beforeAll. */
  async setup(): Promise<void> {
    if (this.engine === 'postgres') this.#db = await createTestDatabase();
  }

  /** Call in afterAll. */
  async teardown(): Promise<void> {
    await this.closeAll();
    await this.#db?.drop();
  }

  /** Call in afterEach. */
  async closeAll(): Promise<void> {
    for (const s of this.#stores.splice(0)) await s.close();
    for (const d of this.#dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  }

  tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'optmark-store-'));
    this.#dirs.push(dir);
    return dir;
  }

  /** The database URL a store for `dataDir` uses (PostgreSQL: a schema per data directory). */
  urlFor(dataDir: string): string | undefined {
    if (!this.#db) return undefined;
    let schema = this.#schemas.get(dataDir);
    if (!schema) {
      schema = `s_${randomBytes(5).toString('hex')}`;
      this.#schemas.set(dataDir, schema);
    }
    const u = new URL(this.#db.url);
    u.searchParams.set('schema', schema);
    return u.href;
  }

  async open(
    dataDir = this.tempDir(),
    limits: Limits = { protect: 10_000, verify: 50_000 },
    extra: { authCacheMs?: number; storeTimeoutMs?: number; through?: Relay } = {},
  ): Promise<Store> {
    const { through, ...options } = extra;
    const url = this.urlFor(dataDir);
    const store = await openStore({
      dataDir,
      defaultProtectLimit: limits.protect,
      defaultVerifyLimit: limits.verify,
      // PostgreSQL through a relay the test controls (it can cut the store's connections).
      databaseUrl: url && through ? through.via(url) : url,
      ...options,
    });
    this.#stores.push(store);
    const schema = this.#schemas.get(dataDir);
    if (schema) this.#schemaOf.set(store, schema);
    return store;
  }

  /** Runs one statement on the store's database behind its back ($1, $2... placeholders). */
  async raw(store: Store, sql: string, params: unknown[] = []): Promise<unknown[]> {
    if (store.engine === 'sqlite') {
      const db = new Database(store.location);
      try {
        const stmt = db.prepare(sql.replace(/\$\d+/g, '?'));
        if (stmt.reader) return stmt.all(...params);
        stmt.run(...params);
        return [];
      } finally {
        db.close();
      }
    }
    const c = await this.client(store);
    try {
      return (await c.query(sql, params)).rows;
    } finally {
      await c.end();
    }
  }

  /** A connection of its own to a PostgreSQL store's database and schema (the caller ends it). */
  async client(store: Store): Promise<pg.Client> {
    const schema = this.#schemaOf.get(store);
    const c = new pg.Client({ connectionString: this.#db!.url, options: schema ? `-c search_path=${schema}` : undefined });
    await c.connect();
    return c;
  }
}

/** A harness for the enclosing describe block: set up before its tests, its stores closed after each, torn down at its end. */
export function suiteStoreHarness(engine: EngineName): StoreHarness {
  const h = new StoreHarness(engine);
  beforeAll(() => h.setup());
  afterEach(() => h.closeAll());
  afterAll(() => h.teardown());
  return h;
}

/**
 * What each schema version added, undone: a test that sets a store back to an older schema calls
 * `undoSchemaAfter(h, store, v)` to take away everything versions after `v` added (newest first), so the
 * store looks as that version left it. A new migration adds its undo here.
 */
const UNDO: Record<number, string[]> = {
  6: ['ALTER TABLE dashboard_batches DROP COLUMN tdmrep', 'ALTER TABLE dashboard_batches DROP COLUMN content_credentials'],
  7: ['DROP TABLE vault_reservations', 'DROP TABLE vault_objects', 'DROP TABLE vault_accounts'],
  8: ['DROP TABLE scan_items', 'DROP TABLE scan_chunks', 'DROP TABLE scans', 'DROP TABLE scan_days'],
};

export async function undoSchemaAfter(h: StoreHarness, store: Store, version: number): Promise<void> {
  const newest = Math.max(...Object.keys(UNDO).map(Number));
  for (let v = newest; v > version; v--) for (const sql of UNDO[v] ?? []) await h.raw(store, sql);
}
