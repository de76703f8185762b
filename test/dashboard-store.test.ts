// The dashboard's batches and records on both store engines (SQLite file, PostgreSQL): the slot counter
// that caps a batch under concurrency, expiry, giving a slot back, records scoped to their account,
// search by name (LIKE wildcards typed are characters) and by SHA-256 prefix, paging, and restore.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { MarkRecord, Store } from '../src/store/index.js';
import { ENGINES, suiteStoreHarness } from './helpers/stores.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

function record(batchId: string, name: string, markedAt: string, keyPrefix = 'om_live_AAAAAAAA'): MarkRecord {
  return {
    id: `r-${name}-${markedAt}`,
    batchId,
    sha256: sha(name),
    originalName: name,
    producedName: name,
    mimeType: 'image/jpeg',
    bytes: 1234,
    layers: ['fingerprint', 'provenance'],
    keyPrefix,
    provenanceKeyId: 'abcdef0123456789',
    markedAt,
  };
}

describe.each(ENGINES)('dashboard records on %s', (engine) => {
  const h = suiteStoreHarness(engine);

  async function accountWithKey(store: Store, name: string): Promise<{ id: number; keyId: number; prefix: string }> {
    await store.createAccount(name, 'pro');
    const k = await store.issueKey(name);
    const auth = await store.authenticate(`Bearer ${k.key}`);
    if (!auth.ok) throw new Error('no auth');
    return { id: auth.account.id, keyId: auth.keyId, prefix: k.prefix };
  }

  it('a batch takes at most its size, even when every image asks at once, and gives a failed slot back', async () => {
    const store = await h.open();
    const a = await accountWithKey(store, 'alice');
    expect(await store.dashboard.keyPrefix(a.keyId)).toBe(a.prefix);
    await expect(store.dashboard.openBatch(a.id, a.prefix, { size: 26, provenance: true, fingerprint: true })).rejects.toThrow(RangeError);
    const batch = await store.dashboard.openBatch(a.id, a.prefix, { size: 25, provenance: true, fingerprint: false });
    const results = await Promise.all(Array.from({ length: 40 }, () => store.dashboard.takeSlot(a.id, batch.id)));
    expect(results.filter((r) => r.ok)).toHaveLength(25);
    expect(results.filter((r) => !r.ok).map((r) => (r.ok ? '' : r.reason))).toEqual(Array(15).fill('full'));
    await store.dashboard.giveSlot(batch.id);
    expect((await store.dashboard.takeSlot(a.id, batch.id)).ok).toBe(true);
    expect(await store.dashboard.takeSlot(a.id, batch.id)).toEqual({ ok: false, reason: 'full' });
    // Another account cannot use it; an unknown id is unknown; an old batch has expired.
    const b = await accountWithKey(store, 'bob');
    expect(await store.dashboard.takeSlot(b.id, batch.id)).toEqual({ ok: false, reason: 'unknown' });
    expect(await store.dashboard.batch(b.id, batch.id)).toBeUndefined();
    const old = await store.dashboard.openBatch(a.id, a.prefix, { size: 1, provenance: false, fingerprint: false }, new Date(Date.now() - 25 * 3600 * 1000));
    expect(await store.dashboard.takeSlot(a.id, old.id)).toEqual({ ok: false, reason: 'expired' });
    expect(await store.dashboard.batch(a.id, batch.id)).toMatchObject({
      id: batch.id,
      size: 25,
      used: 25,
      provenance: true,
      fingerprint: false,
      keyPrefix: a.prefix,
    });
  });

  it('records: scoped to the account, newest first, searched by name or SHA-256 prefix, paged, matched by SHA-256', async () => {
    const store = await h.open();
    const a = await accountWithKey(store, 'carol');
    const b = await accountWithKey(store, 'dave');
    const batch = await store.dashboard.openBatch(a.id, a.prefix, { size: 3, provenance: true, fingerprint: true });
    const names = ['beach.jpg', '100%_done.png', 'portrait.webp'];
    for (const [i, n] of names.entries()) await store.dashboard.addRecord(a.id, record(batch.id, n, `2026-11-24T08:00:0${i}.000Z`));
    await store.dashboard.addRecord(b.id, record('other', 'beach.jpg', '2026-11-24T09:00:00.000Z'));

    const all = await store.dashboard.records(a.id);
    expect(all.map((r) => r.originalName)).toEqual([...names].reverse());
    expect(all[0]).toEqual(record(batch.id, 'portrait.webp', '2026-11-24T08:00:02.000Z'));
    expect((await store.dashboard.records(a.id, { q: 'BEACH' })).map((r) => r.originalName)).toEqual(['beach.jpg']); // names match ignoring case on both engines (ILIKE)
    expect((await store.dashboard.records(a.id, { q: 'beach' })).map((r) => r.originalName)).toEqual(['beach.jpg']);
    expect((await store.dashboard.records(a.id, { q: '%_' })).map((r) => r.originalName)).toEqual(['100%_done.png']);
    expect((await store.dashboard.records(a.id, { q: '%' })).map((r) => r.originalName)).toEqual(['100%_done.png']);
    expect((await store.dashboard.records(a.id, { q: sha('portrait.webp').slice(0, 8) })).map((r) => r.originalName)).toEqual(['portrait.webp']);
    const page = await store.dashboard.records(a.id, { limit: 2 });
    expect(page).toHaveLength(2);
    expect((await store.dashboard.records(a.id, { before: page[1]!.markedAt })).map((r) => r.originalName)).toEqual(['beach.jpg']);
    expect((await store.dashboard.batchRecords(a.id, batch.id)).map((r) => r.originalName)).toEqual(names);
    expect(await store.dashboard.batchRecords(b.id, batch.id)).toEqual([]);
    expect((await store.dashboard.recordBySha256(a.id, sha('beach.jpg')))?.batchId).toBe(batch.id);
    expect((await store.dashboard.recordBySha256(b.id, sha('beach.jpg')))?.batchId).toBe('other');
    expect(await store.dashboard.recordBySha256(b.id, sha('portrait.webp'))).toBeUndefined();
    await store.dashboard.removeRecord(all[0]!.id);
    expect(await store.dashboard.records(a.id)).toHaveLength(2);
  });

  it('pages by a (time, id) cursor: records of one millisecond are neither skipped nor repeated, at any page size', async () => {
    const store = await h.open();
    const a = await accountWithKey(store, 'frank');
    const batch = await store.dashboard.openBatch(a.id, a.prefix, { size: 9, provenance: false, fingerprint: false });
    const same = '2026-11-24T08:00:01.000Z';
    // Ids whose byte order differs from a natural-language collation's (case, punctuation).
    const ids = ['b0', 'B1', 'a-b', 'ab', 'a_c', 'Z', '0'];
    for (const id of ids) await store.dashboard.addRecord(a.id, { ...record(batch.id, `same-${id}.jpg`, same), id });
    await store.dashboard.addRecord(a.id, { ...record(batch.id, 'older.jpg', '2026-11-24T08:00:00.999Z'), id: 'zz' });
    await store.dashboard.addRecord(a.id, { ...record(batch.id, 'newer.jpg', '2026-11-24T08:00:01.001Z'), id: '00' });
    const all = (await store.dashboard.records(a.id)).map((r) => r.id);
    const byteOrder = [...ids].sort((x, y) => (x < y ? 1 : x > y ? -1 : 0));
    expect(all).toEqual(['00', ...byteOrder, 'zz']);
    for (const limit of [1, 2, 3, 4, 8]) {
      const seen: string[] = [];
      let after: { markedAt: string; id: string } | undefined;
      for (let pages = 0; pages < 20; pages++) {
        const page = await store.dashboard.records(a.id, { after, limit });
        seen.push(...page.map((r) => r.id));
        if (page.length < limit) break;
        after = page[page.length - 1]!;
      }
      expect(seen, `limit ${limit}`).toEqual(all);
    }
    // The cursor and a search together; `before` still means "strictly before this time".
    const found = await store.dashboard.records(a.id, { q: 'same-', after: { markedAt: same, id: byteOrder[2]! }, limit: 100 });
    expect(found.map((r) => r.id)).toEqual(byteOrder.slice(3));
    expect((await store.dashboard.records(a.id, { before: same })).map((r) => r.id)).toEqual(['zz']);
  });

  it('a snapshot carries the batches and records, and a restore puts them back with their accounts', async () => {
    const store = await h.open();
    const a = await accountWithKey(store, 'erin');
    const batch = await store.dashboard.openBatch(a.id, a.prefix, { size: 2, provenance: false, fingerprint: false });
    expect((await store.dashboard.takeSlot(a.id, batch.id)).ok).toBe(true);
    const marked = record(batch.id, 'x.jpg', '2026-11-24T08:00:00.000Z');
    await store.dashboard.addRecord(a.id, marked);
    const snapshot = await store.snapshot([]);
    expect(snapshot.records).toEqual([{ ...marked, account: 'erin' }]);
    expect(snapshot.batches).toEqual([{ ...batch, used: 1, account: 'erin' }]);
    const other = await h.open();
    await other.restore(snapshot);
    const restored = await other.getAccount('erin');
    expect(await other.dashboard.records(restored.id)).toEqual([marked]);
    expect(await other.dashboard.batch(restored.id, batch.id)).toEqual({ ...batch, used: 1 });
    // Replacing what is there: the same snapshot again leaves one copy, not two.
    await other.restore(snapshot);
    expect(await other.dashboard.records((await other.getAccount('erin')).id)).toEqual([marked]);
  });
});
