/**
 * What the Private Vault costs, side by side in one run (issue #39 point 9):
 *
 *  (a) a dashboard batch of JPEGs sent straight to the dashboard endpoint (as bench/dashboard.ts's direct
 *      pass) with `?vault=keep` beside the same batch without it, on one server, rounds alternating;
 *      printed: the medians and the ratio on / off (target: at most 1.15);
 *  (b) the folder backend writing and reading the same bytes (sealed, fsynced, renamed; opened) beside a
 *      plain copy of them (writeFile + fsync; readFile); printed: MB/s and the ratios (target: within 1.5).
 *
 *   npm run build && node dist/bench/vault.bench.js [--rounds 3] [--images 25] [--megapixels 12]
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { FolderStorage } from '../src/vault/folder.js';
import { Vault } from '../src/vault/service.js';
import type { VaultObjectRow, VaultRows } from '../src/vault/rows.js';
import { SqliteStore } from '../src/store/index.js';
import { sourcePhotos } from './lib/photos.js';
import { startOptmark } from './load/servers.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, images: { type: 'string', default: '25' }, megapixels: { type: 'string', default: '12' } },
});
const rounds = Number(values.rounds);
const count = Number(values.images);
const megapixels = Number(values.megapixels);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function images(): Promise<Buffer[]> {
  const width = Math.round(Math.sqrt((megapixels * 1e6 * 4) / 3));
  const height = Math.round((width * 3) / 4);
  const photos = (await sourcePhotos(count)).inputs;
  return Promise.all(photos.map((p) => sharp(p).resize(width, height, { fit: 'cover' }).jpeg({ quality: 90 }).toBuffer()));
}

async function batchPass(base: string, key: string, bytes: Buffer[], keep: boolean, lanes: number): Promise<number> {
  const headers = { Authorization: `Bearer ${key}` };
  const t0 = performance.now();
  const batch = (await (
    await fetch(`${base}/api/v1/dashboard/batches`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ size: bytes.length }),
    })
  ).json()) as { id: string };
  const queue = bytes.map((b, i) => ({ b, name: `photo-${i}.jpg` }));
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      for (let item = queue.shift(); item; item = queue.shift()) {
        const form = new FormData();
        form.append('image', new Blob([item.b], { type: 'image/jpeg' }), item.name);
        const res = await fetch(`${base}/api/v1/dashboard/batches/${batch.id}/images${keep ? '?vault=keep' : ''}`, { method: 'POST', headers, body: form });
        const answer = (await res.json()) as { imageBase64?: string; error?: string };
        if (res.status !== 200 || !answer.imageBase64) throw new Error(`${keep ? 'vault' : 'plain'}: ${res.status} ${answer.error}`);
      }
    }),
  );
  return performance.now() - t0;
}

async function batchCost(): Promise<void> {
  const server = await startOptmark({ inheritConfig: true, logLevel: 'warn', env: { OPTMARK_TASK_TIMEOUT_MS: '600000' } });
  try {
    const base = server.target.url.origin;
    const key = server.target.key!;
    const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
    await fetch(`${base}/api/v1/vault`, { method: 'PUT', headers, body: '{"enabled": true}' });
    const lanes = ((await (await fetch(`${base}/api/v1/dashboard/account`, { headers })).json()) as { limits: { concurrency: number } }).limits.concurrency;
    const bytes = await images();
    console.log(`(a) a dashboard batch of ${count} JPEGs of ${megapixels} MP, ${lanes} uploads at a time, vault on (?vault=keep) beside off`);
    const on: number[] = [];
    const off: number[] = [];
    for (let r = 0; r < rounds; r++) {
      // Fresh bytes each round (a re-encode of one pixel row), so the vault stores rather than deduplicates.
      const round = await Promise.all(
        bytes.map((b) =>
          sharp(b)
            .jpeg({ quality: 89 - r })
            .toBuffer(),
        ),
      );
      const pair = r % 2 === 0 ? [false, true] : [true, false];
      for (const keep of pair) (keep ? on : off).push(await batchPass(base, key, round, keep, lanes));
      console.log(`  round ${r + 1}: off ${off.at(-1)!.toFixed(0)} ms, on ${on.at(-1)!.toFixed(0)} ms`);
    }
    console.log(
      `  median off ${median(off).toFixed(0)} ms, on ${median(on).toFixed(0)} ms: ratio on/off ${(median(on) / median(off)).toFixed(3)} (target <= 1.15)`,
    );
  } finally {
    await server.stop();
  }
}

async function storageCost(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-bench-vault-'));
  try {
    const store = SqliteStore.open({ dataDir: dir, defaultProtectLimit: 1, defaultVerifyLimit: 1 });
    const account = await (await store).createAccount('bench', 'pro');
    const rows: VaultRows = (await store).vault;
    const vault = new Vault({ rows, storage: new FolderStorage(join(dir, 'vault')), masterKey: randomBytes(32), defaultLimitBytes: 1e15 });
    await vault.setEnabled(account.id, true);
    const files = Array.from({ length: 40 }, () => randomBytes(8 * 1024 * 1024));
    const total = files.reduce((n, f) => n + f.length, 0);
    const plainDir = join(dir, 'plain');
    mkdirSync(plainDir);
    const rate = (ms: number) => `${(total / 1e6 / (ms / 1000)).toFixed(0)} MB/s`;
    const w: { plain: number[]; vault: number[] } = { plain: [], vault: [] };
    const rd: { plain: number[]; vault: number[] } = { plain: [], vault: [] };
    for (let r = 0; r < rounds; r++) {
      let t = performance.now();
      for (const [i, f] of files.entries()) {
        const fh = await open(join(plainDir, `${r}-${i}`), 'w');
        await fh.writeFile(f);
        await fh.sync();
        await fh.close();
      }
      w.plain.push(performance.now() - t);
      t = performance.now();
      const objects: VaultObjectRow[] = [];
      for (const f of files) {
        f[0] = r; // new bytes each round: stored, not deduplicated
        objects.push((await vault.put(account.id, { bytes: f, name: 'f.jpg', mimeType: 'image/jpeg', kind: 'original' })).object);
      }
      w.vault.push(performance.now() - t);
      t = performance.now();
      for (let i = 0; i < files.length; i++) await readFile(join(plainDir, `${r}-${i}`));
      rd.plain.push(performance.now() - t);
      t = performance.now();
      for (const o of objects) for await (const _ of (await vault.read(account.id, o)).body);
      rd.vault.push(performance.now() - t);
    }
    console.log(`(b) the folder backend, ${files.length} files of 8 MiB (${(total / 1e6).toFixed(0)} MB) a round, beside a plain copy`);
    console.log(
      `  write: plain ${rate(median(w.plain))}, vault ${rate(median(w.vault))}: ratio ${(median(w.vault) / median(w.plain)).toFixed(2)} (target <= 1.5)`,
    );
    console.log(
      `  read:  plain ${rate(median(rd.plain))}, vault ${rate(median(rd.vault))}: ratio ${(median(rd.vault) / median(rd.plain)).toFixed(2)} (target <= 1.5)`,
    );
    await (await store).close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await storageCost();
await batchCost();
