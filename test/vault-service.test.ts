/**
 * The vault's service on both store engines with the folder backend (issue #39 points 2, 4, 5): sealed
 * objects with no plaintext or name in storage, content addressing, exact usage under concurrent puts,
 * reservations given back on failure and after expiry, ranged reads across segments, tamper detection,
 * deletes that remove the bytes, and the reconciler both ways.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Store } from '../src/store/index.js';
import { SEGMENT_BYTES, sealedSize } from '../src/vault/crypto.js';
import { FolderStorage } from '../src/vault/folder.js';
import { vaultMasterKey } from '../src/vault/keys.js';
import { ORPHAN_GRACE_MS, RESERVATION_MS, Vault } from '../src/vault/service.js';
import { ENGINES, suiteStoreHarness } from './helpers/stores.js';

async function bytesOf(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else out.push(p);
  }
  return out;
}

describe.each(ENGINES)('the vault on %s with the folder backend', (engine) => {
  const h = suiteStoreHarness(engine);

  async function setup(limit = 10_000_000, now?: () => Date) {
    const dataDir = h.tempDir();
    const store: Store = await h.open(dataDir);
    const account = await store.createAccount(`acct-${randomBytes(3).toString('hex')}`, 'pro');
    const root = join(dataDir, 'vault');
    const vault = new Vault({
      rows: store.vault,
      storage: new FolderStorage(root),
      masterKey: await vaultMasterKey(dataDir, store),
      defaultLimitBytes: limit,
      now,
    });
    await vault.setEnabled(account.id, true);
    return { dataDir, store, account, root, vault };
  }

  it('stores sealed bytes under an opaque key and reads them back whole and by range', async () => {
    const { vault, account, root, dataDir } = await setup();
    const plain = randomBytes(3 * SEGMENT_BYTES + 1234);
    const { object, created } = await vault.put(account.id, { bytes: plain, name: 'secret-holiday.jpg', mimeType: 'image/jpeg', kind: 'original' });
    expect(created).toBe(true);
    expect(object).toMatchObject({ name: 'secret-holiday.jpg', bytes: plain.length, kind: 'original', record: null, mimeType: 'image/jpeg' });
    const files = filesUnder(root);
    expect(files).toHaveLength(1);
    const stored = readFileSync(files[0]!);
    expect(stored.length).toBe(sealedSize(plain.length));
    // Neither the bytes, nor the name, nor the account are in what is stored or its path.
    expect(stored.includes(plain.subarray(100, 132))).toBe(false);
    expect(
      files[0]!.includes('holiday') ||
        files[0]!.includes(account.name) ||
        stored.includes(Buffer.from('holiday')) ||
        stored.includes(Buffer.from(account.name)),
    ).toBe(false);
    expect(statSync(join(dataDir, 'vault-master.key')).mode & 0o777).toBe(0o600);

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

  it('the same bytes twice are one object, counted once; usage follows puts and deletes exactly', async () => {
    const { vault, account, root } = await setup();
    const a = randomBytes(5000);
    const first = await vault.put(account.id, { bytes: a, name: 'a.png', mimeType: 'image/png', kind: 'original' });
    const again = await vault.put(account.id, { bytes: a, name: 'copy.png', mimeType: 'image/png', kind: 'original' });
    expect(again.created).toBe(false);
    expect(again.object.id).toBe(first.object.id);
    expect((await vault.state(account.id)).usedBytes).toBe(5000);
    expect(filesUnder(root)).toHaveLength(1);
    expect(await vault.delete(account.id, first.object.id)).toBe(true);
    expect(await vault.state(account.id)).toMatchObject({ usedBytes: 0, objects: 0, reservedBytes: 0 });
    expect(filesUnder(root)).toHaveLength(0);
    expect(await vault.delete(account.id, first.object.id)).toBe(false);
  });

  it('20 concurrent puts against a limit of 7: exactly 7 stored, usage exact, the rest vault_quota_exceeded', async () => {
    const { vault, account, root } = await setup(7 * 1000);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () => vault.put(account.id, { bytes: randomBytes(1000), name: 'x.jpg', mimeType: 'image/jpeg', kind: 'original' })),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason.code);
    expect(ok).toHaveLength(7);
    expect(new Set(refused)).toEqual(new Set(['vault_quota_exceeded']));
    expect(await vault.state(account.id)).toMatchObject({ usedBytes: 7000, reservedBytes: 0, objects: 7 });
    expect(filesUnder(root)).toHaveLength(7);
  });

  it('off: vault_disabled and nothing stored; another account cannot see or delete an object', async () => {
    const { vault, account, store, root } = await setup();
    const other = await store.createAccount(`other-${randomBytes(3).toString('hex')}`, 'pro');
    await expect(vault.put(other.id, { bytes: randomBytes(10), name: 'n.jpg', mimeType: 'image/jpeg', kind: 'original' })).rejects.toMatchObject({
      code: 'vault_disabled',
    });
    const { object } = await vault.put(account.id, { bytes: randomBytes(10), name: 'n.jpg', mimeType: 'image/jpeg', kind: 'original' });
    expect(await vault.get(other.id, object.id)).toBeUndefined();
    expect(await vault.delete(other.id, object.id)).toBe(false);
    await vault.setEnabled(account.id, false);
    await expect(vault.put(account.id, { bytes: randomBytes(10), name: 'm.jpg', mimeType: 'image/jpeg', kind: 'original' })).rejects.toMatchObject({
      code: 'vault_disabled',
    });
    // Turning it off keeps what is stored.
    expect((await bytesOf((await vault.read(account.id, object)).body)).length).toBe(10);
    expect(filesUnder(root)).toHaveLength(1);
  });

  it('a write that fails gives its reservation back and leaves no row and no file', async () => {
    const { store, account, dataDir } = await setup(10_000);
    // Storage whose root is a file: every write fails in the backend itself (root ignores permissions).
    const blocked = join(dataDir, 'not-a-folder');
    writeFileSync(blocked, 'x');
    const failing = new Vault({
      rows: store.vault,
      storage: new FolderStorage(blocked),
      masterKey: await vaultMasterKey(dataDir, store),
      defaultLimitBytes: 10_000,
    });
    await expect(failing.put(account.id, { bytes: randomBytes(4000), name: 'f.jpg', mimeType: 'image/jpeg', kind: 'original' })).rejects.toMatchObject({
      code: 'ENOTDIR',
    });
    expect(await failing.state(account.id)).toMatchObject({ usedBytes: 0, reservedBytes: 0, objects: 0 });
    // The bytes it held are free again: the whole limit can be used.
    const ok = new Vault({
      rows: store.vault,
      storage: new FolderStorage(join(dataDir, 'vault')),
      masterKey: await vaultMasterKey(dataDir, store),
      defaultLimitBytes: 10_000,
    });
    await ok.put(account.id, { bytes: randomBytes(10_000), name: 'all.jpg', mimeType: 'image/jpeg', kind: 'original' });
    expect((await ok.state(account.id)).usedBytes).toBe(10_000);
  });

  it('tampered, swapped or cut stored bytes do not open', async () => {
    const { vault, account, root } = await setup();
    const a = await vault.put(account.id, { bytes: randomBytes(2 * SEGMENT_BYTES + 5), name: 'a.jpg', mimeType: 'image/jpeg', kind: 'original' });
    const b = await vault.put(account.id, { bytes: randomBytes(2 * SEGMENT_BYTES + 5), name: 'b.jpg', mimeType: 'image/jpeg', kind: 'original' });
    const pathOf = (key: string) => join(root, key);
    const original = readFileSync(pathOf(a.object.storageKey));
    const flipped = Buffer.from(original);
    flipped[original.length - 40] ^= 1;
    writeFileSync(pathOf(a.object.storageKey), flipped);
    await expect(bytesOf((await vault.read(account.id, a.object)).body)).rejects.toMatchObject({ code: 'vault_object_corrupt' });
    // b's bytes under a's key: every segment is bound to its object's key.
    writeFileSync(pathOf(a.object.storageKey), readFileSync(pathOf(b.object.storageKey)));
    await expect(bytesOf((await vault.read(account.id, a.object)).body)).rejects.toMatchObject({ code: 'vault_object_corrupt' });
    // Cut after a whole segment: the last one is missing.
    writeFileSync(pathOf(a.object.storageKey), original.subarray(0, 12 + SEGMENT_BYTES + 16));
    await expect(bytesOf((await vault.read(account.id, a.object)).body)).rejects.toThrow();
  });

  it('the reconciler: expired reservations dropped, old orphans removed, rows without bytes removed', async () => {
    let now = new Date('2026-12-02T10:00:00Z');
    const { vault, account, root, store } = await setup(1_000_000, () => now);
    const kept = await vault.put(account.id, { bytes: randomBytes(300), name: 'kept.jpg', mimeType: 'image/jpeg', kind: 'original' });
    const lost = await vault.put(account.id, { bytes: randomBytes(200), name: 'lost.jpg', mimeType: 'image/jpeg', kind: 'original' });
    // A reservation of a process that died mid-write.
    const r = await store.vault.reserve(account.id, 5000, 1_000_000, new Date(now.getTime() + RESERVATION_MS));
    expect(r.ok).toBe(true);
    expect((await vault.state(account.id)).reservedBytes).toBe(5000);
    // An orphan (bytes no row names), old and young.
    const oldOrphan = join(root, 'ab', `ab${'0'.repeat(30)}`);
    const youngOrphan = join(root, 'cd', `cd${'1'.repeat(30)}`);
    for (const p of [oldOrphan, youngOrphan]) {
      mkdirSync(join(p, '..'), { recursive: true });
      writeFileSync(p, 'orphan');
    }
    const past = new Date(now.getTime() - ORPHAN_GRACE_MS - 1000);
    utimesSync(oldOrphan, past, past);
    rmSync(join(root, lost.object.storageKey));
    now = new Date(now.getTime() + RESERVATION_MS + 1);
    const report = await vault.reconcile();
    expect(report).toEqual({ expiredReservations: 1, orphanObjects: 1, missingObjects: 1 });
    expect(await vault.state(account.id)).toMatchObject({ usedBytes: 300, reservedBytes: 0, objects: 1 });
    expect(
      filesUnder(root)
        .map((f) => f.slice(root.length + 1))
        .sort(),
    ).toEqual([kept.object.storageKey, `cd/cd${'1'.repeat(30)}`].sort());
  });
});
