/**
 * What the dashboard page adds to a batch, side by side in one run: a batch of 25 12 MP JPEGs with both
 * layers, (a) picked in the page in Debian's Chromium and protected there (upload, progress, base64
 * decode, thumbnails, result panels), and (b) the same requests sent straight to the dashboard endpoint
 * from Node with the same concurrency (open a batch, upload, parse the answer). Rounds alternate between
 * the two, on one server. Printed: each round's wall time, the medians, and the ratio page / direct
 * (the target: at most 1.20).
 *
 *   npm run build && node dist/bench/dashboard.js [--rounds 3] [--images 25] [--megapixels 12]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import sharp from 'sharp';
import { median as upperMedian } from '../src/capacity/report.js';
import { startOptmark } from '../src/capacity/servers.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    images: { type: 'string', default: '25' },
    megapixels: { type: 'string', default: '12' },
  },
});
const rounds = Number(values.rounds);
const count = Number(values.images);
const megapixels = Number(values.megapixels);
if (!(rounds >= 1) || !(count >= 1 && count <= 25) || !(megapixels > 0)) throw new Error('--rounds >= 1, --images 1..25, --megapixels > 0');

const ROOT = resolve(import.meta.dirname, '..', '..');
const NATURAL = join(ROOT, '..', 'shared', 'natural');
const CHROMIUM = '/usr/bin/chromium';

/** `count` different 12 MP JPEGs (the Kodak photos scaled up to 4:3 at the requested size). */
async function makeImages(dir: string): Promise<string[]> {
  const width = Math.round(Math.sqrt((megapixels * 1e6 * 4) / 3));
  const height = Math.round((width * 3) / 4);
  const photos = readdirSync(NATURAL)
    .filter((f) => f.endsWith('.png'))
    .sort();
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const path = join(dir, `photo-${String(i).padStart(2, '0')}.jpg`);
    await sharp(join(NATURAL, photos[i % photos.length]!))
      .resize(width, height, { fit: 'cover' })
      .jpeg({ quality: 90 })
      .toFile(path);
    out.push(path);
  }
  return out;
}

interface AccountInfo {
  limits: { concurrency: number };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-bench-dashboard-'));
  const server = await startOptmark({ inheritConfig: true, logLevel: 'warn' });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const files = await makeImages(dir);
    const bytes = files.map((f) => readFileSync(f));
    const base = server.target.url.origin;
    const key = server.target.key!;
    const headers = { Authorization: `Bearer ${key}` };
    const info = (await (await fetch(`${base}/api/v1/dashboard/account`, { headers })).json()) as AccountInfo;
    const lanes = info.limits.concurrency;
    const total = bytes.reduce((n, b) => n + b.length, 0);
    console.log(`${count} JPEGs of ${megapixels} MP (${(total / count / 1e6).toFixed(1)} MB each), both layers, ${lanes} uploads at a time`);

    /** The same work without the page: open a batch, send every image, parse every answer. */
    const direct = async (): Promise<number> => {
      const t0 = performance.now();
      const batch = (await (
        await fetch(`${base}/api/v1/dashboard/batches`, {
          method: 'POST',
          headers: { ...headers, 'Content-Type': 'application/json' },
          body: JSON.stringify({ size: count, provenance: true, fingerprint: true }),
        })
      ).json()) as { id: string };
      const queue = bytes.map((b, i) => ({ b, name: `photo-${i}.jpg` }));
      await Promise.all(
        Array.from({ length: lanes }, async () => {
          for (let item = queue.shift(); item; item = queue.shift()) {
            const form = new FormData();
            form.append('image', new Blob([item.b], { type: 'image/jpeg' }), item.name);
            const res = await fetch(`${base}/api/v1/dashboard/batches/${batch.id}/images`, { method: 'POST', headers, body: form });
            const answer = (await res.json()) as { imageBase64?: string; error?: string };
            if (res.status !== 200 || !answer.imageBase64) throw new Error(`direct: ${res.status} ${answer.error}`);
            Buffer.from(answer.imageBase64, 'base64'); // the client's decode, as the page does it
          }
        }),
      );
      return performance.now() - t0;
    };

    /** The page: signed in, files picked and layers ticked beforehand; timed from the click to the last result. */
    const page = async (): Promise<number> => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      try {
        const p = await context.newPage();
        await p.goto(`${base}/`, { waitUntil: 'networkidle' });
        await p.getByLabel('API key').fill(key);
        await p.getByLabel('API key').press('Enter');
        await p.locator('input[type=file]').first().setInputFiles(files);
        await p.getByLabel('Provenance').check();
        await p.getByLabel('Fingerprint').check();
        const t0 = performance.now();
        await p.getByRole('button', { name: 'Protect', exact: true }).click();
        // Every file settled (protected or failed). A function, not a string: the page's CSP forbids
        // evaluating strings. This file is compiled without the DOM library, hence the cast; it runs in the page.
        await p.waitForFunction(
          (n: number) =>
            (globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }).document.querySelectorAll(
              'li.file.done, li.file.failed',
            ).length >= n,
          count,
          { timeout: 600_000, polling: 50 },
        );
        const ms = performance.now() - t0;
        const failed = await p.locator('li.file.failed').allTextContents();
        if (failed.length) throw new Error(`page: ${failed.length} files failed: ${failed.slice(0, 3).join(' | ')}`);
        return ms;
      } finally {
        await context.close();
      }
    };

    // One untimed pass of each warms the workers, the page and the browser.
    console.log(`warm-up direct ${((await direct()) / 1000).toFixed(2)} s`);
    console.log(`warm-up page   ${((await page()) / 1000).toFixed(2)} s`);
    const times = { direct: [] as number[], page: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      // Alternate which goes first, so neither always runs on a machine the other just warmed.
      const order = r % 2 === 0 ? (['direct', 'page'] as const) : (['page', 'direct'] as const);
      for (const mode of order) {
        const ms = mode === 'direct' ? await direct() : await page();
        times[mode].push(ms);
        console.log(`round ${r + 1} ${mode.padEnd(6)} ${(ms / 1000).toFixed(2)} s`);
      }
    }
    const d = upperMedian(times.direct)!;
    const p = upperMedian(times.page)!;
    console.log(`median: direct ${(d / 1000).toFixed(2)} s, page ${(p / 1000).toFixed(2)} s; page / direct = ${(p / d).toFixed(3)} (target <= 1.20)`);
  } finally {
    await browser.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
