/**
 * The vault's S3 backend (issue #39 point 6) against a real S3 API server in its own process
 * (test/helpers/s3-server.ts), on both store engines: sealed objects with no plaintext or name in any
 * stored object or key, ranged reads across segments, content addressing, exact usage under concurrent
 * puts, tampering in the bucket detected, deletes that remove the object, the reconciler both ways,
 * paged listings, and two service instances sharing one bucket.
 */
import { randomBytes } from 'node:crypto';
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../src/store/index.js';
import { SEGMENT_BYTES, sealedSize } from '../src/vault/crypto.js';
import { vaultMasterKey } from '../src/vault/keys.js';
import { parseS3Url } from '../src/vault/s3.js';
import { ORPHAN_GRACE_MS, RESERVATION_MS, Vault } from '../src/vault/service.js';
import { isObjectKey } from '../src/vault/storage.js';
import { S3TestServer } from './helpers/s3-server.js';
import { ENGINES, suiteStoreHarness } from './helpers/stores.js';

const BUCKET = 'optmark-vault';

let s3: S3TestServer;
beforeAll(async () => {
  s3 = await S3TestServer.start([BUCKET]);
});
afterAll(() => s3?.stop());

async function bytesOf(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

const put = (vault: Vault, accountId: number, bytes: Buffer, name = 'x.jpg') => vault.put(accountId, { bytes, name, mimeType: 'image/jpeg', kind: 'original' });

describe('OPTMARK_VAULT_URL', () => {
  it('takes s3://bucket/prefix and refuses anything else', () => {
    expect(parseS3Url('s3://my-bucket/vault/prod/')).toEqual({ bucket: 'my-bucket', prefix: 'vault/prod' });
    expect(parseS3Url('s3://my.bucket')).toEqual({ bucket: 'my.bucket', prefix: '' });
    for (const bad of ['https://b/p', 's3:///p', 's3://B/p', 's3://ab/p', 's3://key:secret@bucket/p', 's3://bucket:9000/p', 'bucket/p'])
      expect(() => parseS3Url(bad), bad).toThrow(/s3:\/\/|bucket/);
  });
});

describe.each(ENGINES)('the vault on %s with the S3 backend', (engine) => {
  const h = suiteStoreHarness(engine);

  async function setup(limit = 10_000_000, now?: () => Date, pageSize?: number) {
    const dataDir = h.tempDir();
    const store: Store = await h.open(dataDir);
    const account = await store.createAccount(`acct-${randomBytes(3).toString('hex')}`, 'pro');
    // Each test a prefix of its own in the one bucket.
    const prefix = `t-${randomBytes(4).toString('hex')}/vault`;
    const storage = s3.storage(BUCKET, prefix, pageSize);
    const vault = new Vault({ rows: store.vault, storage, masterKey: await vaultMasterKey(dataDir, store), defaultLimitBytes: limit, now });
    await vault.setEnabled(account.id, true);
    const names = async () => (await s3.names(BUCKET)).filter((n) => n.startsWith(`${prefix}/`));
    return { dataDir, store, account, prefix, storage, vault, names };
  }

  it('stores sealed bytes under prefix/<opaque key>, nothing of the plaintext or name anywhere, and reads ranges across segments', async () => {
    const { vault, account, prefix, names } = await setup();
    const plain = randomBytes(3 * SEGMENT_BYTES + 1234);
    const { object, created } = await put(vault, account.id, plain, 'secret-holiday.jpg');
    expect(created).toBe(true);
    const second = await put(vault, account.id, randomBytes(999), 'private-party.jpg');
    expect((await names()).sort()).toEqual([`${prefix}/${object.storageKey}`, `${prefix}/${second.object.storageKey}`].sort());
    // Every object in the bucket, read back: sealed size, and neither bytes, names nor account in it or its key.
    for (const name of await s3.names(BUCKET)) {
      const stored = await s3.read(BUCKET, name);
      expect(name.includes('holiday') || name.includes('party') || name.includes(account.name)).toBe(false);
      expect(stored.includes(Buffer.from('holiday')) || stored.includes(Buffer.from('party')) || stored.includes(Buffer.from(account.name))).toBe(false);
      expect(stored.includes(plain.subarray(100, 132))).toBe(false);
      if (name === `${prefix}/${object.storageKey}`) expect(stored.length).toBe(sealedSize(plain.length));
    }
    expect((await bytesOf((await vault.read(account.id, object)).body)).equals(plain)).toBe(true);
    for (const [s, e] of [
      [0, 0],
      [SEGMENT_BYTES - 3, SEGMENT_BYTES + 3],
      [2 * SEGMENT_BYTES, 3 * SEGMENT_BYTES + 1233],
      [plain.length - 10, plain.length - 1],
      [777, 777 + 2 * SEGMENT_BYTES],
    ] as const) {
      const r = await vault.read(account.id, object, { start: s, end: e });
      expect((await bytesOf(r.body)).equals(plain.subarray(s, e + 1))).toBe(true);
    }
  });

  it('the same bytes twice are one object; delete removes it from the bucket; a missing object is vault_object_missing', async () => {
    const { vault, account, names, storage } = await setup();
    const a = randomBytes(5000);
    const first = await put(vault, account.id, a, 'a.jpg');
    const again = await put(vault, account.id, a, 'copy.jpg');
    expect(again.created).toBe(false);
    expect(again.object.id).toBe(first.object.id);
    expect(await names()).toHaveLength(1);
    expect(await storage.stat(first.object.storageKey)).toMatchObject({ bytes: sealedSize(5000) });
    expect(await vault.delete(account.id, first.object.id)).toBe(true);
    expect(await names()).toEqual([]);
    expect(await vault.state(account.id)).toMatchObject({ usedBytes: 0, objects: 0, reservedBytes: 0 });
    expect(await storage.stat(first.object.storageKey)).toBeUndefined();
    await expect(storage.get(first.object.storageKey)).rejects.toMatchObject({ code: 'vault_object_missing' });
    await storage.delete(first.object.storageKey);
  });

  it('20 concurrent puts against a limit of 7: exactly 7 objects in the bucket, usage exact', async () => {
    const { vault, account, names } = await setup(7 * 1000);
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => put(vault, account.id, randomBytes(1000))));
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason.code);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(7);
    expect(new Set(refused)).toEqual(new Set(['vault_quota_exceeded']));
    expect(await vault.state(account.id)).toMatchObject({ usedBytes: 7000, reservedBytes: 0, objects: 7 });
    expect(await names()).toHaveLength(7);
  });

  it('an object overwritten, swapped or cut in the bucket does not open', async () => {
    const { vault, account, prefix } = await setup();
    const a = await put(vault, account.id, randomBytes(2 * SEGMENT_BYTES + 5), 'a.jpg');
    const b = await put(vault, account.id, randomBytes(2 * SEGMENT_BYTES + 5), 'b.jpg');
    const nameA = `${prefix}/${a.object.storageKey}`;
    const original = await s3.read(BUCKET, nameA);
    const flipped = Buffer.from(original);
    flipped[original.length - 40] ^= 1;
    await s3.write(BUCKET, nameA, flipped);
    await expect(bytesOf((await vault.read(account.id, a.object)).body)).rejects.toMatchObject({ code: 'vault_object_corrupt' });
    await s3.write(BUCKET, nameA, await s3.read(BUCKET, `${prefix}/${b.object.storageKey}`));
    await expect(bytesOf((await vault.read(account.id, a.object)).body)).rejects.toMatchObject({ code: 'vault_object_corrupt' });
    await s3.write(BUCKET, nameA, original.subarray(0, 12 + SEGMENT_BYTES + 16));
    await expect(bytesOf((await vault.read(account.id, a.object)).body)).rejects.toThrow();
    // Put back, it opens again: what failed was the bytes, not the service.
    await s3.write(BUCKET, nameA, original);
    expect((await bytesOf((await vault.read(account.id, a.object)).body)).length).toBe(2 * SEGMENT_BYTES + 5);
  });

  it('the reconciler: young orphans kept, old ones removed, rows whose object is gone removed, foreign names left alone', async () => {
    let now = new Date();
    const { vault, account, store, prefix, names } = await setup(1_000_000, () => now);
    const kept = await put(vault, account.id, randomBytes(300), 'kept.jpg');
    const lost = await put(vault, account.id, randomBytes(200), 'lost.jpg');
    const r = await store.vault.reserve(account.id, 5000, 1_000_000, new Date(now.getTime() + RESERVATION_MS));
    expect(r.ok).toBe(true);
    const orphan = `${prefix}/ab/ab${'0'.repeat(30)}`;
    const foreign = [`${prefix}/README.txt`, `${prefix}/ab/not-a-key`, `elsewhere/ab/ab${'1'.repeat(30)}`];
    for (const n of [orphan, ...foreign]) await s3.write(BUCKET, n, Buffer.from('orphan'));
    await s3.client.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: `${prefix}/${lost.object.storageKey}` }));
    // Now: the orphan is young (its row may be about to be committed), the reservation still running.
    expect(await vault.reconcile()).toEqual({ expiredReservations: 0, orphanObjects: 0, missingObjects: 1 });
    expect(await names()).toContain(orphan);
    expect(await vault.state(account.id)).toMatchObject({ usedBytes: 300, reservedBytes: 5000, objects: 1 });
    now = new Date(Date.now() + ORPHAN_GRACE_MS + RESERVATION_MS + 60_000);
    expect(await vault.reconcile()).toEqual({ expiredReservations: 1, orphanObjects: 1, missingObjects: 0 });
    expect(await vault.state(account.id)).toMatchObject({ usedBytes: 300, reservedBytes: 0, objects: 1 });
    expect(await names()).toEqual([`${prefix}/${kept.object.storageKey}`, ...foreign.filter((n) => n.startsWith(prefix))].sort());
    expect(await s3.names(BUCKET)).toContain(foreign[2]);
  });

  it('lists past one page: 3 keys a page, 8 objects and 4 orphans, every one seen', async () => {
    let now = new Date();
    const { vault, account, storage, names } = await setup(1_000_000, () => now, 3);
    const made = await Promise.all(Array.from({ length: 8 }, () => put(vault, account.id, randomBytes(100))));
    const orphans = Array.from({ length: 4 }, () => storage.objectName(`${'ef'}/ef${randomBytes(15).toString('hex')}`));
    for (const n of orphans) await s3.write(BUCKET, n, Buffer.from('orphan'));
    const listed: string[] = [];
    for await (const o of storage.list()) {
      expect(isObjectKey(o.key)).toBe(true);
      expect(o.modifiedAt.getTime()).toBeGreaterThan(0);
      listed.push(o.key);
    }
    expect(listed.length).toBe(12);
    expect(new Set(listed)).toEqual(new Set([...made.map((m) => m.object.storageKey), ...orphans.map((n) => n.slice(n.length - 35))]));
    now = new Date(Date.now() + ORPHAN_GRACE_MS + 60_000);
    expect(await vault.reconcile()).toEqual({ expiredReservations: 0, orphanObjects: 4, missingObjects: 0 });
    expect(await names()).toHaveLength(8);
  });
});

describe('two instances on one PostgreSQL store sharing one bucket', () => {
  const h = suiteStoreHarness('postgres');

  it('an object put by one is read, listed and deleted by the other', async () => {
    const dataDir = h.tempDir();
    // Two connections to the same database and schema (two instances), and their own master-key files
    // left out: the shared key comes from the store.
    const [storeA, storeB] = [await h.open(dataDir), await h.open(dataDir)];
    const account = await storeA.createAccount(`shared-${randomBytes(3).toString('hex')}`, 'pro');
    const prefix = `shared-${randomBytes(4).toString('hex')}`;
    const make = async (store: Store, dir: string) =>
      new Vault({ rows: store.vault, storage: s3.storage(BUCKET, prefix), masterKey: await vaultMasterKey(dir, store), defaultLimitBytes: 1_000_000 });
    const a = await make(storeA, dataDir);
    const b = await make(storeB, h.tempDir());
    await a.setEnabled(account.id, true);
    const plain = randomBytes(SEGMENT_BYTES + 77);
    const { object } = await put(a, account.id, plain, 'one.jpg');
    const seen = await b.get(account.id, object.id);
    expect(seen).toMatchObject({ name: 'one.jpg', bytes: plain.length });
    expect((await bytesOf((await b.read(account.id, seen!)).body)).equals(plain)).toBe(true);
    expect(
      (await bytesOf((await b.read(account.id, seen!, { start: SEGMENT_BYTES - 1, end: SEGMENT_BYTES + 1 })).body)).equals(
        plain.subarray(SEGMENT_BYTES - 1, SEGMENT_BYTES + 2),
      ),
    ).toBe(true);
    expect(await b.reconcile()).toEqual({ expiredReservations: 0, orphanObjects: 0, missingObjects: 0 });
    expect(await b.delete(account.id, object.id)).toBe(true);
    expect((await s3.names(BUCKET)).filter((n) => n.startsWith(`${prefix}/`))).toEqual([]);
    expect(await a.get(account.id, object.id)).toBeUndefined();
  });
});
