/**
 * The Private Vault from the command line (issue #39 points 1 and 5): `optmark mark --vault ACCOUNT` keeps
 * each original and marked file, byte for byte and once per content, readable through the API of a server
 * started on the same data directory, with the original's perceptual hash; a vault that is off or an
 * unknown account refuses before anything is marked; past the limit a file is marked, counted failed and
 * nothing of it stays in the vault. `optmark vault rotate-key` re-wraps the data keys under a new master
 * key (SQLite and PostgreSQL), objects still read back, the old key opens nothing, and a rotation cut
 * short after its commit is refused at start and finished by running it again.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { read } from '../src/marking/engine.js';
import { openStore, type Store } from '../src/store/index.js';
import { unwrapKey } from '../src/vault/crypto.js';
import { FolderStorage } from '../src/vault/folder.js';
import { VAULT_MASTER_FILE, VAULT_MASTER_SECRET, vaultMasterKey } from '../src/vault/keys.js';
import { perceptualHash } from '../src/vault/phash.js';
import { keptHash } from '../src/vault/recognition.js';
import { Vault } from '../src/vault/service.js';
import { runBinary, TempDirs, tree, type Run } from './helpers/files.js';
import { request, TestServer } from './helpers/server.js';
import { createTestDatabase } from './helpers/stores.js';

const temp = new TempDirs('optmark-vault-cli-');
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
let photos: Buffer[];

function optmark(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return runBinary(args, { env: { OPTMARK_DATA_DIR: dataDir, OPTMARK_POOL_SIZE: '1', ...env } });
}

async function ok(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await optmark(dataDir, args, env);
  if (r.status !== 0) throw new Error(`optmark ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** The store and vault of a data directory, as the server opens them. */
async function openVault(dataDir: string, env: Record<string, string> = {}): Promise<{ store: Store; vault: Vault }> {
  const config = loadConfig({ OPTMARK_DATA_DIR: dataDir, ...env });
  const store = await openStore(config);
  const vault = new Vault({
    rows: store.vault,
    storage: new FolderStorage(join(dataDir, 'vault')),
    masterKey: await vaultMasterKey(dataDir, store),
    defaultLimitBytes: config.vaultLimitBytes,
  });
  return { store, vault };
}

/** A data directory with an account whose vault is on (or off). */
async function accountWithVault(name: string, on = true, env: Record<string, string> = {}): Promise<{ dataDir: string; id: number }> {
  const dataDir = temp.make();
  await ok(dataDir, ['account', 'create', name, '--plan', 'pro'], env);
  const { store, vault } = await openVault(dataDir, env);
  try {
    const { id } = await store.getAccount(name);
    await vault.setEnabled(id, on);
    return { dataDir, id };
  } finally {
    await store.close();
  }
}

async function readAll(vault: Vault, accountId: number, id: string): Promise<Buffer> {
  const object = (await vault.get(accountId, id))!;
  const parts: Buffer[] = [];
  for await (const c of (await vault.read(accountId, object)).body) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

/** One JSON line per file of a --report. */
const reportOf = (path: string) =>
  readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { input: string; output: string; status: string; code: string | null; sha256: string });

beforeAll(async () => {
  // Blurred noise: pictures with structure, so that PDQ keeps a hash for them (quality >= 50).
  const scene = (seed: number) =>
    sharp({ create: { width: 320 + seed * 16, height: 240, channels: 3, noise: { type: 'gaussian', mean: 90 + seed * 10, sigma: 60 } } }).blur(1.5);
  photos = [await scene(0).jpeg().toBuffer(), await scene(1).png().toBuffer(), await scene(2).webp().toBuffer()];
});
afterAll(() => temp.removeAll());

describe('optmark mark --vault', () => {
  it('keeps each original and marked file once per content, readable through the API of a server on the same data dir', async () => {
    const { dataDir, id } = await accountWithVault('acme');
    const input = temp.folder({ 'harbour.jpg': photos[0]!, 'sub/dunes.png': photos[1]!, 'sub/forest.webp': photos[2]!, 'copy/harbour-again.jpg': photos[0]! });
    const out = join(temp.make(), 'out');
    const report = join(temp.make(), 'run.jsonl');
    const r = await optmark(dataDir, ['mark', input, '--out', out, '--vault', 'acme', '--report', report]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^done 4, skipped 0, failed 0 \(opt-out field, vault of acme\)$/m);
    // The copy's original and marked file are the first file's bytes: kept once.
    expect(r.stdout).toMatch(/^vault of acme: 6 objects kept \(\d+ bytes\), 1 file kept already$/m);

    const lines = reportOf(report);
    // By SHA-256: the kind, the bytes, and the file names that may have given the object its name.
    const expected = new Map<string, { kind: string; bytes: Buffer; names: string[] }>();
    const add = (kind: string, path: string): void => {
      const bytes = readFileSync(path);
      const e = expected.get(sha(bytes)) ?? { kind, bytes, names: [] };
      e.names.push(path.split('/').pop()!);
      expected.set(sha(bytes), e);
    };
    for (const l of lines) {
      expect(read(readFileSync(l.output)).optedOut).toBe(true);
      add('original', l.input);
      add('marked', l.output);
    }
    expect(expected.size).toBe(6);
    const used = [...expected.values()].reduce((n, e) => n + e.bytes.length, 0);

    // The server's Vault service on the same data dir: the rows, the perceptual hash, the bytes.
    const { store, vault } = await openVault(dataDir);
    try {
      const objects = await vault.list(id, { limit: 50 });
      expect(objects).toHaveLength(6);
      for (const o of objects) {
        const e = expected.get(o.sha256)!;
        expect(o, o.name).toMatchObject({ kind: e.kind, bytes: e.bytes.length, record: null });
        expect(e.names).toContain(o.name);
        expect((await readAll(vault, id, o.id)).equals(e.bytes)).toBe(true);
        expect(o.phash).toBe(o.kind === 'original' ? keptHash(await perceptualHash(e.bytes)) : null);
        if (o.kind === 'original') expect(o.phash).toMatch(/^[0-9a-f]{64}$/);
      }
      expect(await vault.state(id)).toMatchObject({ usedBytes: used, reservedBytes: 0, objects: 6 });
    } finally {
      await store.close();
    }

    // Again with --skip-existing: every output is up to date, every pair kept already, nothing counted twice.
    const again = await optmark(dataDir, ['mark', input, '--out', out, '--vault', 'acme', '--skip-existing']);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^vault of acme: 0 objects kept \(0 bytes\), 4 files kept already$/m);

    // Through the API of a server started on the data dir.
    const key = (await ok(dataDir, ['key', 'issue', 'acme'])).trim().split('\n').pop()!.trim();
    const server = await TestServer.start({ dataDir, env: { OPTMARK_POOL_SIZE: '1' } });
    try {
      const auth = { Authorization: `Bearer ${key}` };
      expect((await request(server, '/api/v1/vault', { headers: auth })).json).toMatchObject({ enabled: true, usedBytes: used, objects: 6 });
      const listed = (await request(server, '/api/v1/vault/objects', { headers: auth })).json.objects as { id: string; sha256: string }[];
      expect(listed.map((o) => o.sha256).sort()).toEqual([...expected.keys()].sort());
      for (const o of listed) {
        const got = await request(server, `/api/v1/vault/objects/${o.id}/content`, { headers: auth });
        expect(got.body.equals(expected.get(o.sha256)!.bytes)).toBe(true);
      }
    } finally {
      await server.dispose();
    }
  });

  it('in place: the original kept is the file as it was before marking', async () => {
    const { dataDir, id } = await accountWithVault('inplace');
    const input = temp.folder({ 'a.jpg': photos[0]!, 'notes.txt': 'not an image' });
    const r = await optmark(dataDir, ['mark', input, '--in-place', '--vault', 'inplace']);
    expect(r.status, r.stderr).toBe(0);
    const marked = readFileSync(join(input, 'a.jpg'));
    expect(marked.equals(photos[0]!)).toBe(false);
    const { store, vault } = await openVault(dataDir);
    try {
      const objects = await vault.list(id, { limit: 10 });
      const byKind = Object.fromEntries(objects.map((o) => [o.kind, o]));
      expect(byKind.original).toMatchObject({ name: 'a.jpg', sha256: sha(photos[0]!), mimeType: 'image/jpeg' });
      expect(byKind.marked).toMatchObject({ name: 'a.jpg', sha256: sha(marked), mimeType: 'image/jpeg' });
      expect((await readAll(vault, id, byKind.original!.id)).equals(photos[0]!)).toBe(true);
      expect(objects).toHaveLength(2);
    } finally {
      await store.close();
    }
  });

  it('refuses an unknown account (exit 2) and a vault that is off (exit 1), marking nothing', async () => {
    const { dataDir } = await accountWithVault('closed', false);
    const input = temp.folder({ 'a.jpg': photos[0]! });
    const out = join(temp.make(), 'out');
    const unknown = await optmark(dataDir, ['mark', input, '--out', out, '--vault', 'nobody']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('"nobody"');
    const off = await optmark(dataDir, ['mark', input, '--out', out, '--vault', 'closed']);
    expect(off.status).toBe(1);
    expect(off.stderr).toMatch(/Private Vault of account closed is off \(vault_disabled\); nothing was marked/);
    expect(existsSync(out) ? tree(out) : []).toEqual([]);
    expect(existsSync(join(dataDir, 'vault')) ? tree(join(dataDir, 'vault')) : []).toEqual([]);
  });

  it('past the limit: the file is marked and counted failed (exit 1), and nothing of it stays in the vault', async () => {
    const { dataDir, id } = await accountWithVault('tight');
    const big = await sharp({ create: { width: 200, height: 200, channels: 3, noise: { type: 'gaussian', mean: 128, sigma: 60 } } })
      .png()
      .toBuffer();
    const small = photos[0]!;
    const input = temp.folder({ 'big.png': big, 'small.jpg': small });
    // What the marked files weigh: a run without the vault (marking is deterministic).
    const probe = join(temp.make(), 'probe');
    await ok(dataDir, ['mark', join(input, 'big.png'), join(input, 'small.jpg'), '--out', probe]);
    const smallMarked = readFileSync(join(probe, 'small.jpg')).length;
    // The big original fits on its own, its pair does not; the small pair fits once the big one is gone.
    const limit = big.length + 1;
    expect(small.length + smallMarked).toBeLessThanOrEqual(limit);
    await ok(dataDir, ['account', 'set-limits', 'tight', '--vault', String(limit)]);

    const out = join(temp.make(), 'out');
    const report = join(temp.make(), 'run.jsonl');
    const r = await optmark(dataDir, [
      'mark',
      join(input, 'big.png'),
      join(input, 'small.jpg'),
      '--out',
      out,
      '--vault',
      'tight',
      '--jobs',
      '1',
      '--report',
      report,
    ]);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/^done 1, skipped 0, failed 1 /m);
    expect(r.stdout).toMatch(/failed\s+\S*big\.png: marked, but not kept in the vault of tight: .*\(vault_quota_exceeded\)/);
    const byName = Object.fromEntries(reportOf(report).map((l) => [l.input.split('/').pop(), l]));
    expect(byName['big.png']).toMatchObject({ status: 'failed', code: 'vault_quota_exceeded', output: join(out, 'big.png') });
    expect(byName['small.jpg']).toMatchObject({ status: 'done', code: null });
    // The marked file is written all the same.
    expect(read(readFileSync(join(out, 'big.png'))).optedOut).toBe(true);

    const { store, vault } = await openVault(dataDir);
    try {
      expect(await vault.state(id)).toMatchObject({ usedBytes: small.length + smallMarked, reservedBytes: 0, objects: 2 });
      expect((await vault.list(id, { limit: 10 })).map((o) => o.name).sort()).toEqual(['small.jpg', 'small.jpg']);
      expect(tree(join(dataDir, 'vault'))).toHaveLength(2);
    } finally {
      await store.close();
    }
  });
});

describe('optmark vault rotate-key', () => {
  async function storeTwo(dataDir: string, id: number, env: Record<string, string> = {}): Promise<{ id: string; bytes: Buffer }[]> {
    const { store, vault } = await openVault(dataDir, env);
    try {
      const kept = [];
      for (const bytes of [photos[1]!, randomBytes(200_000)]) {
        const { object } = await vault.put(id, { bytes, name: 'x', mimeType: 'image/png', kind: 'original' });
        kept.push({ id: object.id, bytes });
      }
      return kept;
    } finally {
      await store.close();
    }
  }

  async function expectReadable(dataDir: string, id: number, kept: { id: string; bytes: Buffer }[], env: Record<string, string> = {}) {
    const { store, vault } = await openVault(dataDir, env);
    try {
      for (const k of kept) expect((await readAll(vault, id, k.id)).equals(k.bytes)).toBe(true);
      return (await store.vault.wrappedKeys()).map((w) => w.wrapped);
    } finally {
      await store.close();
    }
  }

  it('re-wraps the data keys under a new key file (0600); objects read back; the old key opens nothing', async () => {
    const { dataDir, id } = await accountWithVault('rot');
    const kept = await storeTwo(dataDir, id);
    const keyFile = join(dataDir, VAULT_MASTER_FILE);
    const old = readFileSync(keyFile);

    const r = await optmark(dataDir, ['vault', 'rotate-key']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('re-wrapped the vault data keys of 1 accounts');
    const now = readFileSync(keyFile);
    expect(now.length).toBe(32);
    expect(now.equals(old)).toBe(false);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(existsSync(`${keyFile}.next`)).toBe(false);
    const wrapped = await expectReadable(dataDir, id, kept);
    expect(() => unwrapKey(old, wrapped[0]!)).toThrow(/does not open/);
    expect(unwrapKey(now, wrapped[0]!)).toHaveLength(32);

    // A key of the operator's: --new-key-file (32 bytes), and a file of another size refused as a usage error.
    const mine = join(temp.make(), 'new.key');
    const chosen = randomBytes(32);
    writeFileSync(mine, chosen);
    expect((await optmark(dataDir, ['vault', 'rotate-key', '--new-key-file', mine])).status).toBe(0);
    expect(readFileSync(keyFile).equals(chosen)).toBe(true);
    await expectReadable(dataDir, id, kept);
    writeFileSync(mine, randomBytes(31));
    const bad = await optmark(dataDir, ['vault', 'rotate-key', '--new-key-file', mine]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('31 bytes');
    expect(readFileSync(keyFile).equals(chosen)).toBe(true);
  });

  it('a rotation cut short after its commit: the start refuses and names the side key; running it again finishes it', async () => {
    const { dataDir, id } = await accountWithVault('cut');
    const kept = await storeTwo(dataDir, id);
    const keyFile = join(dataDir, VAULT_MASTER_FILE);
    const old = readFileSync(keyFile);
    const next = randomBytes(32);
    // The state a kill between the rows' commit and the key file's replacement leaves.
    writeFileSync(`${keyFile}.next`, next, { mode: 0o600 });
    const store = await openStore(loadConfig({ OPTMARK_DATA_DIR: dataDir }));
    try {
      const { wrapKey } = await import('../src/vault/crypto.js');
      await store.vault.rewrapKeys((w) => wrapKey(next, unwrapKey(old, w)));
      await expect(vaultMasterKey(dataDir, store)).rejects.toThrow(/vault-master\.key\.next opens them all.*rotate-key/);
    } finally {
      await store.close();
    }
    const r = await optmark(dataDir, ['vault', 'rotate-key']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('finished a rotation that was cut short');
    expect(readFileSync(keyFile).equals(next)).toBe(true);
    expect(existsSync(`${keyFile}.next`)).toBe(false);
    await expectReadable(dataDir, id, kept);
  });

  it('on PostgreSQL: the shared secret and the rows change in one transaction, the copy in the data dir follows', async () => {
    const db = await createTestDatabase();
    try {
      const env = { OPTMARK_DATABASE_URL: db.url };
      const { dataDir, id } = await accountWithVault('pgrot', true, env);
      const kept = await storeTwo(dataDir, id, env);
      const copy = join(dataDir, VAULT_MASTER_FILE);
      const old = readFileSync(copy);
      const r = await optmark(dataDir, ['vault', 'rotate-key'], env);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain(`shared secret ${VAULT_MASTER_SECRET}`);
      const store = await openStore(loadConfig({ OPTMARK_DATA_DIR: dataDir, ...env }));
      let shared: Buffer;
      try {
        shared = await store.sharedSecret(VAULT_MASTER_SECRET, () => Buffer.alloc(32));
      } finally {
        await store.close();
      }
      expect(shared.equals(old)).toBe(false);
      expect(readFileSync(copy).equals(shared)).toBe(true);
      expect(statSync(copy).mode & 0o777).toBe(0o600);
      const wrapped = await expectReadable(dataDir, id, kept, env);
      expect(() => unwrapKey(old, wrapped[0]!)).toThrow(/does not open/);
    } finally {
      await db.drop();
    }
  });
});
