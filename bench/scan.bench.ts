/**
 * `optmark scan` beside `optmark verify` of the same files from disk, with the same layers (the detector
 * on): 2,000 images served from loopback as a URL list, as a tar shard (over HTTP and from disk), and as
 * a git repository (git daemon), each scan's wall time divided by verify's (target: at most 1.25x). Then
 * the peak RSS of a scan of a 100,000-URL list (target: at most 300 MB), the URLs pointing at the same
 * small image. Rounds interleaved; the medians printed side by side.
 *
 *   npm run build && node dist/bench/scan.bench.js        (BENCH_QUICK=1: 400 images, 20,000 URLs, 1 round)
 *     --only urls,tar-http,tar-disk,git,rss    only these cases (verify always runs, as the ratio's base)
 *     --cli <path>                             another build's bin/optmark (a before/after comparison)
 *
 * Inputs: 40 distinct 640x480 JPEGs (noise, q90) copied up to the count, written once under
 * os.tmpdir()/optmark-bench-scan. Wall time is measured around each child process.
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import tar from 'tar-stream';
import { freePort } from './lib/proc.js';
import { QUICK } from './lib/report.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const CLI = resolve(flag('--cli') ?? join(ROOT, 'bin', 'optmark'));
const ONLY = flag('--only')?.split(',');
const CASES = ['urls', 'tar-http', 'tar-disk', 'git', 'rss'];
for (const c of ONLY ?? []) if (!CASES.includes(c)) throw new Error(`--only: ${c} is not one of ${CASES.join(', ')}`);
const picked = (c: string): boolean => ONLY === undefined || ONLY.includes(c);
const DIR = join(tmpdir(), 'optmark-bench-scan');
const COUNT = QUICK ? 400 : 2000;
const URLS = QUICK ? 20_000 : 100_000;
const ROUNDS = QUICK ? 1 : 3;
const DISTINCT = 40;
const GIT_ENV = {
  PATH: process.env.PATH,
  HOME: DIR,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'b',
  GIT_AUTHOR_EMAIL: 'b@example.org',
  GIT_COMMITTER_NAME: 'b',
  GIT_COMMITTER_EMAIL: 'b@example.org',
};

async function inputs(): Promise<{ folder: string; shard: string; repo: string }> {
  const folder = join(DIR, `images-${COUNT}`);
  const shard = join(DIR, `shard-${COUNT}.tar`);
  const repo = join(DIR, 'git', `repo-${COUNT}`);
  if (existsSync(join(folder, '.done')) && existsSync(shard) && existsSync(join(repo, '.done'))) return { folder, shard, repo };
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(folder, { recursive: true });
  const distinct: Buffer[] = [];
  for (let i = 0; i < DISTINCT; i++) {
    distinct.push(
      await sharp({ create: { width: 640, height: 480, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 100 + i, sigma: 30 } } })
        .jpeg({ quality: 90 })
        .toBuffer(),
    );
  }
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => void chunks.push(c as Buffer));
  const ended = new Promise<void>((r) => pack.on('end', () => r()));
  for (let i = 0; i < COUNT; i++) {
    const name = `${String(i).padStart(6, '0')}.jpg`;
    writeFileSync(join(folder, name), distinct[i % DISTINCT]!);
    pack.entry({ name }, distinct[i % DISTINCT]!);
  }
  pack.finalize();
  await ended;
  writeFileSync(shard, Buffer.concat(chunks));
  mkdirSync(repo, { recursive: true });
  const git = (...args: string[]): void => void spawnSync('git', args, { cwd: repo, env: GIT_ENV, stdio: 'ignore' });
  git('init', '-q', '--initial-branch=main');
  git('config', 'uploadpack.allowFilter', 'true');
  for (let i = 0; i < COUNT; i++) copyFileSync(join(folder, `${String(i).padStart(6, '0')}.jpg`), join(repo, `${String(i).padStart(6, '0')}.jpg`));
  git('add', '.');
  git('commit', '-q', '-m', 'bench');
  writeFileSync(join(repo, '.done'), '');
  writeFileSync(join(folder, '.done'), '');
  return { folder, shard, repo };
}

/** Runs `optmark ...args` to its end; wall time (ms) and peak RSS (KiB, GNU time's %M). */
function timed(args: string[], env: Record<string, string>): Promise<{ ms: number; rssKiB: number; status: number; stderr: string }> {
  const t0 = performance.now();
  const child = spawn('/usr/bin/time', ['-f', 'RSS %M', CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  return new Promise((res) =>
    child.on('close', (code) => {
      const ms = performance.now() - t0;
      const rss = /RSS (\d+)/.exec(stderr);
      res({ ms, rssKiB: rss ? Number(rss[1]) : Number.NaN, status: code ?? -1, stderr });
    }),
  );
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const { folder, shard } = await inputs();
  const dataDir = join(DIR, 'data');
  mkdirSync(dataDir, { recursive: true });
  const env = { OPTMARK_DATA_DIR: dataDir };
  const image = readFileSync(join(folder, '000000.jpg'));
  const shardBytes = readFileSync(shard);
  // Loopback HTTP: the images, the URL lists and the shard.
  const httpPort = await freePort();
  const base = `http://127.0.0.1:${httpPort}`;
  const list = Array.from({ length: COUNT }, (_, i) => `${base}/images/${String(i).padStart(6, '0')}.jpg`).join('\n');
  const bigList = Array.from({ length: URLS }, (_, i) => `${base}/images/${String(i % COUNT).padStart(6, '0')}.jpg?n=${i}`).join('\n');
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (path === '/list.txt') return void res.writeHead(200, { 'Content-Type': 'text/plain' }).end(list);
    if (path === '/big-list.txt') return void res.writeHead(200, { 'Content-Type': 'text/plain' }).end(bigList);
    if (path === '/shard.tar') return void res.writeHead(200, { 'Content-Type': 'application/x-tar' }).end(shardBytes);
    if (path === '/robots.txt' || path === '/ai.txt' || path === '/.well-known/tdmrep.json') return void res.writeHead(404).end();
    if (path.startsWith('/images/')) {
      const file = join(folder, path.slice('/images/'.length));
      return void res.writeHead(200, { 'Content-Type': 'image/jpeg' }).end(existsSync(file) ? readFileSync(file) : image);
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(httpPort, '127.0.0.1', r));
  const gitPort = await freePort();
  const daemon = spawn(
    'git',
    ['daemon', '--reuseaddr', `--base-path=${join(DIR, 'git')}`, '--export-all', '--listen=127.0.0.1', `--port=${gitPort}`, join(DIR, 'git')],
    // Its own process group, so the kill below reaches the daemon and its children (a live daemon keeps
    // the bench from exiting).
    { env: GIT_ENV, stdio: 'ignore', detached: true },
  );
  await new Promise((r) => setTimeout(r, 500));
  const allow = ['--allow-network', '127.0.0.0/8'];
  const contenders = (
    [
      ['urls', 'URL list (HTTP)', ['scan', `${base}/list.txt`, ...allow]],
      ['tar-http', 'tar shard (HTTP)', ['scan', `${base}/shard.tar`, ...allow]],
      ['tar-disk', 'tar shard (disk)', ['scan', shard]],
      ['git', 'git repository (git://)', ['scan', `git://127.0.0.1:${gitPort}/repo-${COUNT}`, ...allow]],
    ] as [string, string, string[]][]
  )
    .filter(([key]) => picked(key))
    .map(([, name, args]): [string, string[]] => [name, args]);
  const verifyMs: number[] = [];
  const scanMs = new Map<string, number[]>(contenders.map(([n]) => [n, []]));
  const failures = new Map<string, string>();
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const v = await timed(['verify', folder], env);
      verifyMs.push(v.ms);
      for (const [name, args] of contenders) {
        const r = await timed(args, env);
        if (r.status !== 0) failures.set(name, r.stderr.trim().split('\n').slice(-2).join(' '));
        scanMs.get(name)!.push(r.ms);
      }
    }
    const verify = median(verifyMs);
    console.log(`\noptmark scan beside optmark verify of the same ${COUNT} files (640x480 JPEG, detector on), median of ${ROUNDS}; ${CLI}`);
    console.log(`| source | scan (s) | verify (s) | scan / verify | target |`);
    console.log(`|---|---|---|---|---|`);
    for (const [name] of contenders) {
      const s = median(scanMs.get(name)!);
      const failed = failures.get(name);
      console.log(
        `| ${name} | ${(s / 1000).toFixed(2)} | ${(verify / 1000).toFixed(2)} | ${failed ? `failed: ${failed}` : `${(s / verify).toFixed(2)}x`} | <= 1.25x |`,
      );
    }
    if (!picked('rss')) return;
    const big = await timed(['scan', `${base}/big-list.txt`, ...allow, '--skip-fingerprint'], env);
    console.log(
      `\nscan of a ${URLS.toLocaleString('en')}-URL list: peak RSS ${(big.rssKiB / 1024).toFixed(0)} MB (target <= 300 MB)${big.status !== 0 ? `; failed: ${big.stderr.trim().split('\n').slice(-2).join(' ')}` : ''}`,
    );
  } finally {
    try {
      process.kill(-daemon.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    server.close();
  }
}

await main();
