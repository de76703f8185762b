/**
 * One behaviour table, run on both engines: the places where the SQLite and PostgreSQL engines were
 * written twice and could answer differently (snapshot counters of chosen months with held, committed and
 * refunded units; usage's held units; a restore naming an account it does not hold; the dashboard's
 * search, its ties and its orders; a batch's four layers through open, read, snapshot and restore, and
 * a batch of a store from before the signal layers). Each row states the one answer both engines must give.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PG_SCHEMA_VERSION, SCHEMA_VERSION, type BatchSpec, type MarkRecord, type Store, type StoreSnapshot } from '../src/store/index.js';
import { ENGINES, suiteStoreHarness } from './helpers/stores.js';

const JAN = new Date('2026-01-15T10:00:00.000Z');
const FEB = new Date('2026-02-15T10:00:00.000Z');

/** Takes `n` units of protect at `at`; returns the reservations. */
async function take(store: Store, accountId: number, n: number, at: Date) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const r = await store.reserve(accountId, 'protect', at);
    if (!r.ok) throw new Error('refused');
    out.push(r.reservation);
  }
  return out;
}

function record(batchId: string, name: string, markedAt: string, sha = randomUUID().replace(/-/g, '').padEnd(64, '0')): MarkRecord {
  return {
    id: randomUUID(),
    batchId,
    sha256: sha,
    originalName: name,
    producedName: `${name}.marked`,
    mimeType: 'image/jpeg',
    bytes: 10,
    layers: ['iptc'],
    keyPrefix: 'om_live_abcd',
    provenanceKeyId: null,
    markedAt,
  };
}

describe.each(ENGINES)('the same answers on %s', (engine) => {
  const h = suiteStoreHarness(engine);

  it('snapshot(months): committed units only, of the months asked, with held and refunded units left out', async () => {
    const store = await h.open();
    const { id } = await store.createAccount('acme', 'pro');
    // January: 3 committed, 1 of them refunded after its commit, 1 still held.
    const jan = await take(store, id, 4, JAN);
    for (const r of jan.slice(0, 3)) await store.commit(r, JAN);
    await store.refund(jan[0]!, JAN);
    // February: 2 committed, 1 refunded while held.
    const feb = await take(store, id, 3, FEB);
    for (const r of feb.slice(0, 2)) await store.commit(r, FEB);
    await store.refund(feb[2]!, FEB);
    const counters = (s: StoreSnapshot) => s.counters.map((c) => `${c.account} ${c.month} ${c.operation} ${c.used}`);
    expect(counters(await store.snapshot())).toEqual(['acme 2026-01 protect 2', 'acme 2026-02 protect 2']);
    expect(counters(await store.snapshot(['2026-02']))).toEqual(['acme 2026-02 protect 2']);
    expect(counters(await store.snapshot(['2026-01', '2025-12']))).toEqual(['acme 2026-01 protect 2']);
    expect(counters(await store.snapshot([]))).toEqual([]);
    // The month's counter still shows the held unit; usage says it is held.
    const usage = await store.usage('acme', '2026-01', JAN);
    expect([usage.protect.used, usage.held.protect]).toEqual([3, 1]);
    expect((await store.usage('acme', '2026-02', FEB)).held.protect).toBe(0);
  });

  it('snapshot(months) refuses a month that is not YYYY-MM', async () => {
    const store = await h.open();
    await expect(store.snapshot(['2026-1'])).rejects.toMatchObject({ code: 'invalid_month' });
  });

  it('restore refuses a snapshot whose rows name an account it does not hold, and changes nothing', async () => {
    const store = await h.open();
    await store.createAccount('kept', 'pro');
    const base: StoreSnapshot = {
      accounts: [{ name: 'acme', plan: 'pro', protectLimit: null, verifyLimit: null, createdAt: JAN.toISOString() }],
      keys: [],
      counters: [],
      batches: [],
      records: [],
      publicKeys: [],
      secrets: [],
    };
    const orphans: Array<[string, Partial<StoreSnapshot>]> = [
      [
        'a key',
        { keys: [{ account: 'ghost', hash: Buffer.alloc(32, 1), prefix: 'om_live_ghost', createdAt: JAN.toISOString(), lastUsedAt: null, revokedAt: null }] },
      ],
      ['a counter', { counters: [{ account: 'ghost', month: '2026-01', operation: 'protect', used: 5 }] }],
      [
        'a batch',
        {
          batches: [
            {
              account: 'ghost',
              id: randomUUID(),
              size: 1,
              provenance: false,
              fingerprint: false,
              used: 0,
              keyPrefix: 'om_live_x',
              createdAt: JAN.toISOString(),
            },
          ],
        },
      ],
      ['a record', { records: [{ ...record(randomUUID(), 'x.jpg', JAN.toISOString()), account: 'ghost' }] }],
    ];
    for (const [what, part] of orphans) {
      await expect(store.restore({ ...base, ...part }), what).rejects.toMatchObject({ code: 'unknown_account' });
      expect(
        (await store.listAccounts()).map((a) => a.name),
        what,
      ).toEqual(['kept']);
    }
  });

  it('the dashboard search ignores case the same way for every letter, and pages ties by id', async () => {
    const store = await h.open();
    const { id } = await store.createAccount('acme', 'pro');
    const batch = await store.dashboard.openBatch(id, 'om_live_abcd', { size: 5, provenance: false, fingerprint: false }, JAN);
    const at = JAN.toISOString();
    const sha = 'ab'.repeat(32);
    const rows = [record(batch.id, 'Été.jpg', at, sha), record(batch.id, 'ÉTÉ-2.jpg', at, sha), record(batch.id, 'winter.JPG', at)];
    for (const r of rows) await store.dashboard.addRecord(id, r);
    const names = async (q: string) => (await store.dashboard.records(id, { q })).map((r) => r.originalName).sort();
    expect(await names('été')).toEqual(['ÉTÉ-2.jpg', 'Été.jpg']);
    expect(await names('ÉTÉ')).toEqual(['ÉTÉ-2.jpg', 'Été.jpg']);
    expect(await names('WINTER.jpg')).toEqual(['winter.JPG']);
    // Two records of the same bytes and the same millisecond: the newest is the one with the larger id.
    const newest = [rows[0]!, rows[1]!].sort((a, b) => (a.id < b.id ? 1 : -1))[0]!;
    expect((await store.dashboard.recordBySha256(id, sha))?.id).toBe(newest.id);
  });

  it('a batch keeps each of its four layers (provenance, fingerprint, tdmrep, contentCredentials) through open, read, snapshot and restore', async () => {
    const store = await h.open();
    const { id } = await store.createAccount('acme', 'pro');
    const flags = ['provenance', 'fingerprint', 'tdmrep', 'contentCredentials'] as const;
    // Every combination of the four, and a spec that leaves out the signal layers (off).
    const specs: BatchSpec[] = Array.from(
      { length: 16 },
      (_, n) => ({ size: 1, ...Object.fromEntries(flags.map((f, i) => [f, (n & (1 << i)) !== 0])) }) as BatchSpec,
    );
    specs.push({ size: 2, provenance: true, fingerprint: true });
    const opened = [];
    for (const [i, spec] of specs.entries()) opened.push(await store.dashboard.openBatch(id, 'om_live_abcd', spec, new Date(JAN.getTime() + i * 1000)));
    const layersOf = (b: Record<(typeof flags)[number], boolean> | undefined) => b && flags.map((f) => (b[f] ? 1 : 0)).join('');
    const wanted = specs.map((s) => flags.map((f) => (s[f] ? 1 : 0)).join(''));
    expect(opened.map(layersOf)).toEqual(wanted);
    const read = await Promise.all(opened.map((b) => store.dashboard.batch(id, b.id)));
    expect(read.map(layersOf)).toEqual(wanted);
    const snapshot = await store.snapshot();
    expect(snapshot.batches.map(layersOf)).toEqual(wanted);
    const copy = await h.open();
    await copy.restore(snapshot);
    const acme = await copy.getAccount('acme');
    expect((await Promise.all(opened.map((b) => copy.dashboard.batch(acme.id, b.id)))).map(layersOf)).toEqual(wanted);
    // A snapshot written before the signal layers has neither field: its batches come back with them off.
    const old = { ...snapshot, batches: snapshot.batches.map(({ tdmrep: _t, contentCredentials: _c, ...b }) => b) } as StoreSnapshot;
    await copy.restore(old);
    expect(await copy.dashboard.batch(acme.id, opened[15]!.id)).toMatchObject({
      provenance: true,
      fingerprint: true,
      tdmrep: false,
      contentCredentials: false,
    });
  });

  it('a store from before the signal layers opens migrated: its batches have them off, new batches keep them', async () => {
    const dir = h.tempDir();
    const first = await h.open(dir);
    const { id } = await first.createAccount('acme', 'pro');
    await first.close();
    // The schema as the version before left it (migrations only ever add), and a batch it opened.
    // Version 7 (scans) goes too, so that the store is at version 5.
    for (const table of ['scan_items', 'scan_chunks', 'scans', 'scan_days']) await h.raw(first, `DROP TABLE ${table}`);
    for (const column of ['tdmrep', 'content_credentials']) await h.raw(first, `ALTER TABLE dashboard_batches DROP COLUMN ${column}`);
    await h.raw(first, engine === 'sqlite' ? 'PRAGMA user_version = 5' : 'DELETE FROM optmark_schema WHERE version >= 6');
    const oldId = randomUUID();
    await h.raw(
      first,
      'INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [oldId, id, 'om_live_abcd', 3, engine === 'sqlite' ? 1 : true, engine === 'sqlite' ? 0 : false, JAN.toISOString()],
    );
    const store = await h.open(dir);
    const version = engine === 'sqlite' ? 'PRAGMA user_version' : 'SELECT max(version) AS user_version FROM optmark_schema';
    const [row] = (await h.raw(store, version)) as Array<{ user_version: number | string }>;
    expect(Number(row!.user_version)).toBe(engine === 'sqlite' ? SCHEMA_VERSION : PG_SCHEMA_VERSION);
    expect(await store.dashboard.batch(id, oldId)).toMatchObject({ size: 3, provenance: true, fingerprint: false, tdmrep: false, contentCredentials: false });
    const fresh = await store.dashboard.openBatch(id, 'om_live_abcd', {
      size: 1,
      provenance: false,
      fingerprint: false,
      tdmrep: true,
      contentCredentials: true,
    });
    expect(await store.dashboard.batch(id, fresh.id)).toMatchObject({ tdmrep: true, contentCredentials: true });
  });
});
