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

/** Processes under `root` (itself excluded), from /proc. */
function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [child, pp] of parent) {
      if (pp !== p) continue;
      out.push(child);
      walk(child);
    }
  };
  walk(root);
  return out;
}

/** CPU seconds (user + system, every thread) the processes have used so far. */
function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime (fields 14 and 15 of stat)
    } catch {
      // gone meanwhile
    }
  }
  return ticks / 100; // USER_HZ
}

/** One pass: its wall time, and the CPU the server and the client (this process, or the browser) used. */
interface Run {
  ms: number;
  serverCpu: number;
  clientCpu: number;
}

interface AccountInfo {
  limits: { concurrency: number };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-bench-dashboard-'));
  // A generous task time limit: this measures throughput, and a loaded machine must not turn slow tasks into
  // failures (OPTMARK_TASK_TIMEOUT_MS in the environment still wins).
  const server = await startOptmark({
    inheritConfig: true,
    logLevel: 'warn',
    env: { OPTMARK_TASK_TIMEOUT_MS: process.env.OPTMARK_TASK_TIMEOUT_MS ?? '600000' },
  });
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

    const serverPid = server.target.pid!;
    /** The browser's processes: every process under this one but the server's. */
    const browserPids = () => {
      const server = new Set([serverPid, ...descendants(serverPid)]);
      return descendants(process.pid).filter((p) => !server.has(p));
    };

    /** The same work without the page: open a batch, send every image, parse every answer. */
    const direct = async (): Promise<Run> => {
      const cpu0 = { server: cpuSeconds([serverPid]), client: cpuSeconds([process.pid]) };
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
      const ms = performance.now() - t0;
      return { ms, serverCpu: cpuSeconds([serverPid]) - cpu0.server, clientCpu: cpuSeconds([process.pid]) - cpu0.client };
    };

    /** The page: signed in, files picked and layers ticked beforehand; timed from the click to the last result. */
    const page = async (): Promise<Run> => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      try {
        const p = await context.newPage();
        await p.goto(`${base}/`, { waitUntil: 'load', timeout: 120_000 });
        await p.getByLabel('API key').fill(key, { timeout: 120_000 });
        await p.getByLabel('API key').press('Enter');
        await p.locator('input[type=file]').first().setInputFiles(files, { timeout: 120_000 });
        await p.getByLabel('Provenance').check();
        await p.getByLabel('Fingerprint').check();
        const pids = browserPids();
        const cpu0 = { server: cpuSeconds([serverPid]), client: cpuSeconds(pids) };
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
        // Processes the browser started meanwhile count from zero; those it ended are lost (few, small).
        const run = { ms, serverCpu: cpuSeconds([serverPid]) - cpu0.server, clientCpu: cpuSeconds([...new Set([...pids, ...browserPids()])]) - cpu0.client };
        const failed = await p.locator('li.file.failed').allTextContents();
        if (failed.length) throw new Error(`page: ${failed.length} files failed: ${failed.slice(0, 3).join(' | ')}`);
        return run;
      } finally {
        await context.close();
      }
    };

    const show = (r: Run) => `${(r.ms / 1000).toFixed(2)} s (CPU: server ${r.serverCpu.toFixed(1)} s, client ${r.clientCpu.toFixed(1)} s)`;
    // One untimed pass of each warms the workers, the page and the browser.
    console.log(`warm-up direct ${show(await direct())}`);
    console.log(`warm-up page   ${show(await page())}`);
    const runs = { direct: [] as Run[], page: [] as Run[] };
    for (let r = 0; r < rounds; r++) {
      // Alternate which goes first, so neither always runs on a machine the other just warmed.
      const order = r % 2 === 0 ? (['direct', 'page'] as const) : (['page', 'direct'] as const);
      for (const mode of order) {
        const run = mode === 'direct' ? await direct() : await page();
        runs[mode].push(run);
        console.log(`round ${r + 1} ${mode.padEnd(6)} ${show(run)}`);
      }
    }
    const med = (mode: 'direct' | 'page', f: (r: Run) => number) => upperMedian(runs[mode].map(f))!;
    const d = med('direct', (r) => r.ms);
    const p = med('page', (r) => r.ms);
    console.log(
      `wall time, median: direct ${(d / 1000).toFixed(2)} s, page ${(p / 1000).toFixed(2)} s; page / direct = ${(p / d).toFixed(3)} (target <= 1.20)`,
    );
    const ratios = runs.page.map((r, i) => r.ms / runs.direct[i]!.ms);
    console.log(`  per round page / direct: ${ratios.map((x) => x.toFixed(3)).join(', ')}`);
    const cpu = (r: Run) => r.serverCpu + r.clientCpu;
    console.log(
      `CPU, median: direct ${med('direct', cpu).toFixed(1)} s (client ${med('direct', (r) => r.clientCpu).toFixed(1)} s), ` +
        `page ${med('page', cpu).toFixed(1)} s (browser ${med('page', (r) => r.clientCpu).toFixed(1)} s); page / direct = ${(med('page', cpu) / med('direct', cpu)).toFixed(3)}`,
    );
  } finally {
    await browser.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
