// `optmark store migrate`: a SQLite data directory copied into a real PostgreSQL (a database of its own per
// file, schemas per case), checked row by row on the target and through a server started on it; a target
// that is not empty refused with exit status 3 unless --force. And an instance that finds a PostgreSQL
// schema newer than it knows refuses to start, saying so.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, PG_SCHEMA_VERSION, type Store } from '../src/store/index.js';
import { optmarkHere } from './helpers/cli.js';
import { smallImage } from './helpers/images.js';
import { TestServer, api } from './helpers/server.js';
import { createTestDatabase } from './helpers/stores.js';

let db: { url: string; drop: () => Promise<void> };
const dirs: string[] = [];
const opened: Store[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  for (const s of opened.splice(0)) await s.close();
  await db?.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'optmark-migrate-'));
  dirs.push(d);
  return d;
}

/** The test database with a schema of its own. */
function target(schema: string): string {
  const u = new URL(db.url);
  u.searchParams.set('schema', schema);
  return u.href;
}

/** The CLI on a SQLite data directory (OPTMARK_DATABASE_URL emptied: a developer's own is not used). */
function cliOn(dir: string) {
  return (...args: string[]) => optmarkHere(args, { OPTMARK_DATA_DIR: dir, OPTMARK_DATABASE_URL: '' });
}

async function open(opts: { dataDir?: string; databaseUrl?: string }): Promise<Store> {
  const s = await openStore({ dataDir: opts.dataDir ?? tempDir(), databaseUrl: opts.databaseUrl, defaultProtectLimit: 100, defaultVerifyLimit: 200 });
  opened.push(s);
  return s;
}

async function take(store: Store, accountId: number, n: number, at?: Date): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await store.reserve(accountId, 'protect', at);
    if (!r.ok) throw new Error('refused');
    await store.commit(r.reservation, at);
  }
}

describe('optmark store migrate', () => {
  it('copies a SQLite store into PostgreSQL: accounts, key hashes, counters, dashboard records, public keys, the fingerprint key', async () => {
    const dir = tempDir();
    const cli = cliOn(dir);
    expect((await cli('account', 'create', 'acme', '--plan', 'pro')).status).toBe(0);
    expect((await cli('account', 'set-limits', 'acme', '--protect', '40')).status).toBe(0);
    expect((await cli('account', 'create', 'Other', '--plan', 'free')).status).toBe(0);
    const key = (await cli('key', 'issue', 'acme')).stdout.trim();
    const revoked = (await cli('key', 'issue', 'acme')).stdout.trim();
    expect((await cli('key', 'revoke', revoked.slice(0, 16))).status).toBe(0);
    const rotated = await cli('signing-key', 'rotate');
    const keyId = /signing key ([0-9a-f]{16})/.exec(rotated.stdout)?.[1];
    expect(keyId, rotated.stderr).toBeDefined();
    const fingerprint = randomBytes(32);
    writeFileSync(join(dir, 'fingerprint.key'), fingerprint, { mode: 0o600 });
    // Counters of this month and of January, and a dashboard batch with one record, through the store.
    const sqlite = await open({ dataDir: dir });
    const acme = await sqlite.getAccount('acme');
    await take(sqlite, acme.id, 3);
    await take(sqlite, acme.id, 1, new Date('2026-01-15T12:00:00Z'));
    const batch = await sqlite.dashboard.openBatch(acme.id, key.slice(0, 16), {
      size: 2,
      provenance: true,
      fingerprint: false,
      tdmrep: true,
      contentCredentials: false,
    });
    expect((await sqlite.dashboard.takeSlot(acme.id, batch.id)).ok).toBe(true);
    const record = {
      id: randomUUID(),
      batchId: batch.id,
      sha256: 'ab'.repeat(32),
      originalName: 'été 1.jpg',
      producedName: 'été 1.jpg',
      mimeType: 'image/jpeg',
      bytes: 123_456,
      layers: ['iptc', 'provenance'],
      keyPrefix: key.slice(0, 16),
      provenanceKeyId: keyId!,
      markedAt: new Date().toISOString(),
    };
    await sqlite.dashboard.addRecord(acme.id, record);
    const keysBefore = await sqlite.listKeys('acme');
    await sqlite.close();

    const url = target('copied');
    const r = await cli('store', 'migrate', '--to', url);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('2 accounts');
    expect(r.stdout).toContain('2 keys (1 revoked)');
    expect(r.stdout).toContain('1 public signing key');
    expect(r.stdout).toContain('fingerprint key: copied');

    const pgs = await open({ databaseUrl: url });
    expect((await pgs.listAccounts()).map((a) => [a.name, a.plan, a.protectLimit, a.verifyLimit]).sort()).toEqual([
      ['Other', 'free', 100, 200],
      ['acme', 'pro', 40, 200],
    ]);
    expect(await pgs.listKeys('acme')).toEqual(keysBefore.map((k) => ({ ...k, id: expect.any(Number) })));
    expect((await pgs.authenticate(`Bearer ${key}`)).ok).toBe(true);
    expect(await pgs.authenticate(`Bearer ${revoked}`)).toMatchObject({ ok: false, code: 'invalid_api_key' });
    const pgAcme = await pgs.getAccount('acme');
    expect((await pgs.usage('acme')).protect).toMatchObject({ used: 3, limit: 40 });
    expect((await pgs.usage('acme', '2026-01')).protect.used).toBe(1);
    expect(await pgs.dashboard.records(pgAcme.id)).toEqual([record]);
    expect(await pgs.dashboard.batch(pgAcme.id, batch.id)).toEqual({ ...batch, used: 1 });
    expect((await pgs.listPublicKeys()).map((k) => k.keyId)).toEqual([keyId]);
    expect(await pgs.sharedSecret('fingerprint', () => randomBytes(32))).toEqual(fingerprint);
    // The copied counter goes on from where it was.
    const next = await pgs.reserve(pgAcme.id, 'protect');
    expect(next.ok && next.state.used).toBe(4);
    if (next.ok) await pgs.refund(next.reservation);

    // A server on PostgreSQL, with a data directory of its own, takes the key issued on SQLite, refuses the
    // revoked one, counts on the copied counter, and embeds with the copied fingerprint key.
    const server = await TestServer.start({ env: { OPTMARK_DATABASE_URL: url, OPTMARK_POOL_SIZE: '1', OPTMARK_FINGERPRINT_DETECT: 'off' } });
    try {
      const ok = await api(server, 'protect', key, await smallImage('jpeg'));
      expect(ok.status, ok.body.toString().slice(0, 200)).toBe(200);
      expect(ok.headers.ratelimit).toMatch(/;r=36;/);
      expect((await api(server, 'verify', revoked, await smallImage('jpeg'))).status).toBe(401);
      expect(readFileSync(join(server.dataDir, 'fingerprint-shared.key'))).toEqual(fingerprint);
    } finally {
      await server.dispose();
    }
    expect((await pgs.usage('acme')).protect.used).toBe(4);
  });

  it('refuses a target that is not empty (exit status 3, nothing copied) and replaces it with --force', async () => {
    const url = target('occupied');
    const first = tempDir();
    await cliOn(first)('account', 'create', 'first', '--plan', 'pro');
    expect((await cliOn(first)('store', 'migrate', '--to', url)).status).toBe(0);

    const second = tempDir();
    const cli = cliOn(second);
    await cli('account', 'create', 'second', '--plan', 'lifetime');
    const key = (await cli('key', 'issue', 'second')).stdout.trim();
    const refused = await cli('store', 'migrate', '--to', url);
    expect(refused.status).toBe(3);
    expect(refused.stderr).toContain('is not empty (1 account)');
    expect(refused.stderr).toContain('nothing was copied');
    expect(refused.stderr).toContain('--force');
    const pgs = await open({ databaseUrl: url });
    expect((await pgs.listAccounts()).map((a) => a.name)).toEqual(['first']);

    const forced = await cli('store', 'migrate', '--to', url, '--force');
    expect(forced.status, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('its previous content replaced');
    expect((await pgs.listAccounts()).map((a) => [a.name, a.plan])).toEqual([['second', 'lifetime']]);
    expect((await pgs.authenticate(`Bearer ${key}`)).ok).toBe(true);
    expect(await pgs.counts()).toMatchObject({ accounts: 1, keys: 1, counters: 0, batches: 0, records: 0 });
  });

  it('refuses what it cannot do with a sentence: a target that is not PostgreSQL, the configured store itself, no store at all', async () => {
    const dir = tempDir();
    await cliOn(dir)('account', 'create', 'acme', '--plan', 'pro');
    const bad = await cliOn(dir)('store', 'migrate', '--to', 'mysql://localhost/x');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--to: the target must start with postgres://');
    const url = target('self');
    const self = await optmarkHere(['store', 'migrate', '--to', url], { OPTMARK_DATA_DIR: dir, OPTMARK_DATABASE_URL: url });
    expect(self.status).toBe(2);
    expect(self.stderr).toContain('is the configured store itself');
    const none = await cliOn(join(dir, 'nothing-here'))('store', 'migrate', '--to', url);
    expect(none.status).toBe(1);
    expect(none.stderr).toContain('there is no store to copy');
    const missing = await cliOn(dir)('store', 'migrate');
    expect(missing.status).toBe(2);
  });
});

describe('an instance on a PostgreSQL schema newer than it knows', () => {
  it('refuses to start, saying so', async () => {
    const url = target('newer');
    await (await open({ databaseUrl: url })).close();
    const c = new pg.Client({ connectionString: db.url, options: '-c search_path=newer' });
    await c.connect();
    await c.query('INSERT INTO optmark_schema (version) VALUES ($1)', [PG_SCHEMA_VERSION + 1]);
    await c.end();
    const { code, output } = await TestServer.spawnOnce({ OPTMARK_DATABASE_URL: url });
    expect(code).not.toBe(0);
    expect(output).toContain(`the PostgreSQL schema is at version ${PG_SCHEMA_VERSION + 1}, newer than this optmark understands (${PG_SCHEMA_VERSION})`);
  });
});
