/**
 * What the dashboard page adds to a batch, side by side in one run: a batch of 25 12 MP JPEGs with both
 * layers, (a) picked in the page in Debian's Chromium and protected there (upload, progress, base64
 * decode, thumbnails, result panels), and (b) the same requests sent straight to the dashboard endpoint
 * from Node with the same concurrency (open a batch, upload, parse the answer). Rounds alternate between
 * the two, on one server. Printed: each round's wall time, the medians, and the ratio page / direct
 * (the issue's target: at most 1.20).
 *
 *   npm run build && node dist/bench/dashboard.js [--rounds 3] [--images 25] [--megapixels 12]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import sharp from 'sharp';
import { sourcePhotos } from './lib/photos.js';
import { median as upperMedian } from './load/report.js';
import { startOptmark } from './load/servers.js';
import { parseServerTiming } from '../src/http/timing.js';

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

const CHROMIUM = '/usr/bin/chromium';

/** `count` 12 MP JPEGs: the source photos (bench/lib/photos.ts) scaled to 4:3 at the requested size. */
async function makeImages(dir: string): Promise<string[]> {
  const width = Math.round(Math.sqrt((megapixels * 1e6 * 4) / 3));
  const height = Math.round((width * 3) / 4);
  const photos = (await sourcePhotos(count)).inputs;
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const path = join(dir, `photo-${String(i).padStart(2, '0')}.jpg`);
    await sharp(photos[i % photos.length]!)
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

/** CPU seconds every CPU of the machine has been busy so far (/proc/stat: all but idle and iowait). */
function machineBusySeconds(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0); // user nice system idle iowait irq softirq steal
  return (total - f[3]! - f[4]!) / 100;
}

/** CPU seconds so far by the browser's process type (browser, renderer, gpu-process, utility). */
function cpuByType(pids: number[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of pids) {
    let type = 'browser';
    try {
      type = /--type=([\w-]+)/.exec(readFileSync(`/proc/${pid}/cmdline`, 'utf8'))?.[1] ?? 'browser';
    } catch {
      continue;
    }
    out.set(type, (out.get(type) ?? 0) + cpuSeconds([pid]));
  }
  return out;
}

/** One image request as the client saw it (ms from the first request's start) and the server's phases (Server-Timing). */
interface Req {
  start: number;
  end: number;
  receive: number;
  queue: number;
  work: number;
}

/** One pass: its wall time, the CPU the server and the client (this process, or the browser) used, and its requests. */
interface Run {
  ms: number;
  serverCpu: number;
  clientCpu: number;
  reqs: Req[];
  /** The 1-minute load average when the pass ended. */
  load: number;
  /** CPU seconds the rest of the machine (other engineers' work) used during the pass. */
  othersCpu: number;
  /** The page only: the browser's CPU by process type. */
  byType?: string;
}

const loadAverage = (): number => Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);

/** Requests with their times made relative to the first start. */
function relative(reqs: Req[]): Req[] {
  const t0 = Math.min(...reqs.map((r) => r.start));
  return reqs.map((r) => ({ ...r, start: r.start - t0, end: r.end - t0 }));
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
      const cpu0 = { server: cpuSeconds([serverPid]), client: cpuSeconds([process.pid]), machine: machineBusySeconds() };
      const t0 = performance.now();
      const batch = (await (
        await fetch(`${base}/api/v1/dashboard/batches`, {
          method: 'POST',
          headers: { ...headers, 'Content-Type': 'application/json' },
          body: JSON.stringify({ size: count, provenance: true, fingerprint: true }),
        })
      ).json()) as { id: string };
      const queue = bytes.map((b, i) => ({ b, name: `photo-${i}.jpg` }));
      const reqs: Req[] = [];
      await Promise.all(
        Array.from({ length: lanes }, async () => {
          for (let item = queue.shift(); item; item = queue.shift()) {
            const start = performance.now();
            const form = new FormData();
            form.append('image', new Blob([item.b], { type: 'image/jpeg' }), item.name);
            const res = await fetch(`${base}/api/v1/dashboard/batches/${batch.id}/images`, { method: 'POST', headers, body: form });
            const answer = (await res.json()) as { imageBase64?: string; error?: string };
            if (res.status !== 200 || !answer.imageBase64) throw new Error(`direct: ${res.status} ${answer.error}`);
            Buffer.from(answer.imageBase64, 'base64'); // the client's decode, as the page does it
            const t = parseServerTiming(res.headers.get('server-timing') ?? '');
            reqs.push({ start, end: performance.now(), receive: t.receive ?? 0, queue: t.queue ?? 0, work: t.work ?? 0 });
          }
        }),
      );
      const ms = performance.now() - t0;
      const serverCpu = cpuSeconds([serverPid]) - cpu0.server;
      const clientCpu = cpuSeconds([process.pid]) - cpu0.client;
      const othersCpu = machineBusySeconds() - cpu0.machine - serverCpu - clientCpu;
      return { ms, serverCpu, clientCpu, reqs: relative(reqs), load: loadAverage(), othersCpu };
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
        const types0 = cpuByType(pids);
        const cpu0 = { server: cpuSeconds([serverPid]), client: cpuSeconds(pids), machine: machineBusySeconds() };
        const self0 = cpuSeconds([process.pid]); // this process drives the page meanwhile: not "others"
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
        const all = [...new Set([...pids, ...browserPids()])];
        const cpu = { serverCpu: cpuSeconds([serverPid]) - cpu0.server, clientCpu: cpuSeconds(all) - cpu0.client };
        const othersCpu = machineBusySeconds() - cpu0.machine - cpu.serverCpu - cpu.clientCpu - (cpuSeconds([process.pid]) - self0);
        const byType = [...cpuByType(all)].map(([t, c]) => `${t} ${(c - (types0.get(t) ?? 0)).toFixed(1)}`).join(', ');
        // The page's image requests from its Resource Timing entries (same origin: Server-Timing is readable).
        type Entry = { name: string; startTime: number; responseEnd: number; serverTiming: { name: string; duration: number }[] };
        const entries = await p.evaluate(() =>
          (globalThis as unknown as { performance: { getEntriesByType(t: string): Entry[] } }).performance
            .getEntriesByType('resource')
            .filter((e) => e.name.endsWith('/images'))
            .map((e) => ({ start: e.startTime, end: e.responseEnd, timing: e.serverTiming.map((t) => [t.name, t.duration] as const) })),
        );
        const reqs = entries.map((e) => {
          const t = Object.fromEntries(e.timing);
          return { start: e.start, end: e.end, receive: t.receive ?? 0, queue: t.queue ?? 0, work: t.work ?? 0 };
        });
        const run: Run = { ms, ...cpu, reqs: relative(reqs), load: loadAverage(), othersCpu, byType };
        const failed = await p.locator('li.file.failed').allTextContents();
        if (failed.length) throw new Error(`page: ${failed.length} files failed: ${failed.slice(0, 3).join(' | ')}`);
        return run;
      } finally {
        await context.close();
      }
    };

    const workers = Math.max(1, lanes - 1); // the page runs one upload more than the pool has workers
    const ms = (x: number | undefined) => `${Math.round(x ?? 0)} ms`;
    /**
     * A pass in one line: wall, CPU, how busy the workers were (their reported work over wall x workers),
     * the median upload (receive), wait for a worker (queue) and work per image, and the client's gaps: from
     * the first request's start to the last one's end against the pass's wall time.
     */
    const show = (r: Run) => {
      const work = r.reqs.reduce((n, q) => n + q.work, 0);
      const span = Math.max(...r.reqs.map((q) => q.end));
      return (
        `${(r.ms / 1000).toFixed(2)} s (CPU: server ${r.serverCpu.toFixed(1)} s, client ${r.clientCpu.toFixed(1)} s; ` +
        `workers busy ${((100 * work) / (r.ms * workers)).toFixed(0)}%, per image: receive ${ms(upperMedian(r.reqs.map((q) => q.receive)))}, ` +
        `queue ${ms(upperMedian(r.reqs.map((q) => q.queue)))}, work ${ms(upperMedian(r.reqs.map((q) => q.work)))}; ` +
        `requests span ${(span / 1000).toFixed(2)} s; load ${r.load.toFixed(1)}, other processes ${r.othersCpu.toFixed(1)} CPU s` +
        `${r.byType ? `; browser: ${r.byType}` : ''})`
      );
    };
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
    const sorted = [...ratios].sort((a, b) => a - b);
    console.log(`  per round page / direct: ${ratios.map((x) => x.toFixed(3)).join(', ')}`);
    console.log(
      `  distribution: min ${sorted[0]!.toFixed(3)}, median ${upperMedian(ratios)!.toFixed(3)}, max ${sorted[sorted.length - 1]!.toFixed(3)}; ` +
        `load average ${Math.min(...runs.page.map((r) => r.load)).toFixed(1)}-${Math.max(...runs.page.map((r) => r.load)).toFixed(1)}`,
    );
    // The machine is shared: every pass runs with other work on the same cores, and that work changes from
    // one pass to the next. Both passes are CPU-bound (workers busy ~100%), so the wall time a pass would have
    // taken alone is estimated as its wall time x its share of the CPU the machine spent meanwhile.
    const alone = (r: Run) => r.ms * ((r.serverCpu + r.clientCpu) / (r.serverCpu + r.clientCpu + Math.max(0, r.othersCpu)));
    const adjusted = runs.page.map((r, i) => alone(r) / alone(runs.direct[i]!));
    console.log(
      `  estimate without the other processes (wall x share of the machine's CPU): per round ${adjusted.map((x) => x.toFixed(3)).join(', ')}; ` +
        `median ${upperMedian(adjusted)!.toFixed(3)}`,
    );
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
