/**
 * The vault reconciler in the log and the metrics (issue #39 point 4): a data directory left with an
 * expired reservation, a stored object no row names (older than the grace period, by its modification
 * time) and a row whose object is gone; a server started on it removes all three in its start-up pass,
 * logs `vault reconciled` and counts them in optmark_vault_reconciled_total{what}.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openStore } from '../src/store/index.js';
import { FolderStorage } from '../src/vault/folder.js';
import { vaultMasterKey } from '../src/vault/keys.js';
import { ORPHAN_GRACE_MS, RESERVATION_MS, Vault } from '../src/vault/service.js';
import { TempDirs } from './helpers/files.js';
import { request, TestServer, waitFor } from './helpers/server.js';

const temp = new TempDirs('optmark-vault-metrics-');
afterAll(() => temp.removeAll());

/** The value of one sample of the metrics text, undefined when it is absent. */
function sample(text: string, line: string): number | undefined {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe('the vault reconciler in the metrics', () => {
  it('counts an expired reservation, an orphan object and a missing object it removed', async () => {
    const dataDir = temp.make();
    const config = loadConfig({ OPTMARK_DATA_DIR: dataDir });
    const store = await openStore(config);
    const root = join(dataDir, 'vault');
    let orphan: string;
    try {
      const account = await store.createAccount('recon', 'pro');
      const vault = new Vault({ rows: store.vault, storage: new FolderStorage(root), masterKey: await vaultMasterKey(dataDir, store), defaultLimitBytes: 1e9 });
      await vault.setEnabled(account.id, true);
      // A row whose object is gone from storage.
      const { object } = await vault.put(account.id, { bytes: randomBytes(1000), name: 'gone.jpg', mimeType: 'image/jpeg', kind: 'original' });
      rmSync(join(root, object.storageKey));
      // A reservation of a process killed mid-write, past its expiry.
      const held = await store.vault.reserve(account.id, 500, 1e9, new Date(Date.now() - RESERVATION_MS));
      expect(held.ok).toBe(true);
      // A stored object no row names, older than the grace period.
      const hex = randomBytes(16).toString('hex');
      orphan = join(root, hex.slice(0, 2), hex);
      mkdirSync(join(root, hex.slice(0, 2)), { recursive: true });
      writeFileSync(orphan, randomBytes(300));
      const old = new Date(Date.now() - 2 * ORPHAN_GRACE_MS);
      utimesSync(orphan, old, old);
    } finally {
      await store.close();
    }

    const server = await TestServer.start({ dataDir, env: { OPTMARK_POOL_SIZE: '1' } });
    try {
      const line = (what: string) => `optmark_vault_reconciled_total{what="${what}"}`;
      // The start-up pass runs beside the start: wait for its counts.
      const text = await waitFor('the reconciler to count what it removed', async () => {
        const t = (await request(server, '/metrics')).body.toString('utf8');
        return sample(t, line('orphan_object')) === 1 ? t : undefined;
      });
      expect(text).toContain('# TYPE optmark_vault_reconciled_total counter');
      expect(sample(text, line('expired_reservation'))).toBe(1);
      expect(sample(text, line('missing_object'))).toBe(1);
      expect(existsSync(orphan)).toBe(false);
      expect(server.output).toMatch(/"msg":"vault reconciled/);
    } finally {
      await server.dispose();
    }
    const after = await openStore(config);
    try {
      const { id } = await after.getAccount('recon');
      expect(await after.vault.state(id)).toMatchObject({ usedBytes: 0, reservedBytes: 0, objects: 0 });
    } finally {
      await after.close();
    }
  });
});
