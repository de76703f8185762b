/**
 * Server CPU per protect, two or more builds side by side: the figure a user sees of a change on the hot
 * path (a fast path earns its place at >= 15% here, issue #36.8). Each build's server runs at once on its
 * own port and data directory; wrk (8 connections) drives one at a time in interleaved rounds, and the
 * CPU of that server's process (all its threads: the workers too) is read from /proc around each round.
 * The upload is the perf check's: the first source photo resized to 4000x3000, JPEG quality 92.
 *
 *   node dist/bench/protect-cpu.js [seconds per round] [rounds] DIR...
 *
 * DIR is a build root: a folder with dist/ (a copy of `npm run build`'s) and native/ (a link to the
 * repository's native/, which the build loads its addons from). Prints each round's figures, then each
 * build's range and median, and the ratio of the medians to the first build's.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { sourcePhotos } from './lib/photos.js';

const TICK = 100; // USER_HZ on Linux

/** CPU (user + system) of a process and all its threads, in ms. */
function processCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICK;
}

interface Build {
  dir: string;
  port: number;
  env: NodeJS.ProcessEnv;
  proc: ChildProcess;
  key: string;
  perProtect: number[];
}

async function start(dir: string, port: number, work: string): Promise<Build> {
  const cli = join(dir, 'dist', 'src', 'cli.js');
  const env = {
    ...process.env,
    OPTMARK_DATA_DIR: join(work, `data-${port}`),
    OPTMARK_PORT: String(port),
    OPTMARK_HOST: '127.0.0.1',
    OPTMARK_BOOTSTRAP: 'off',
    OPTMARK_LOG_LEVEL: 'warn',
  };
  const proc = spawn(process.execPath, [cli, 'serve'], { env, stdio: 'ignore' });
  for (let i = 0; ; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (up) break;
    if (i > 300) throw new Error(`${dir}: the server did not become ready`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const run = (...args: string[]) => execFileSync(process.execPath, [cli, ...args], { env }).toString();
  run('account', 'create', 'bench', '--plan', 'pro');
  run('account', 'set-limits', 'bench', '--protect', '100000000');
  const key = run('key', 'issue', 'bench').trim().split('\n').pop()!.trim();
  return { dir, port, env, proc, key, perProtect: [] };
}

/** Drives `seconds` of protects with wrk; the number of 200s. */
function wrk(b: Build, seconds: number, script: string, body: string, boundary: string): number {
  const out = execFileSync('wrk', ['-t1', '-c8', `-d${seconds}s`, '--timeout', '30s', '-s', script, `http://127.0.0.1:${b.port}/api/v1/protect`], {
    env: { ...process.env, BODY: body, BOUNDARY: boundary, KEY: b.key },
  }).toString();
  const m = /RESULT (\d+) (\d+)/.exec(out);
  if (!m) throw new Error(`wrk: ${out.slice(-300)}`);
  if (Number(m[2]) > 0) throw new Error(`${b.dir}: ${m[2]} protects were not answered 200`);
  return Number(m[1]);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const seconds = Number(args[0] ?? 8);
  const rounds = Number(args[1] ?? 5);
  const dirs = args.slice(2).map((d) => resolve(d));
  if (dirs.length < 2) throw new Error('usage: protect-cpu.js SECONDS ROUNDS DIR DIR...');
  const work = mkdtempSync(join(tmpdir(), 'optmark-protect-cpu-'));
  const builds: Build[] = [];
  try {
    const photos = await sourcePhotos(1);
    const jpeg = await sharp(photos.inputs[0]!).resize(4000, 3000).jpeg({ quality: 92 }).toBuffer();
    const boundary = `protectCpu${process.pid}`;
    const body = join(work, 'body');
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`;
    writeFileSync(body, Buffer.concat([Buffer.from(head), jpeg, Buffer.from(`\r\n--${boundary}--\r\n`)]));
    const script = join(work, 'post.lua');
    writeFileSync(
      script,
      `wrk.method = "POST"
local f = assert(io.open(os.getenv("BODY"), "rb")); wrk.body = f:read("*a"); f:close()
wrk.headers["Content-Type"] = "multipart/form-data; boundary=" .. os.getenv("BOUNDARY")
wrk.headers["Authorization"] = "Bearer " .. os.getenv("KEY")
done = function(summary) io.write(string.format("RESULT %d %d\\n", summary.requests, summary.errors.status)) end
`,
    );
    const base = 20000 + Math.floor(Math.random() * 20000);
    for (const [i, dir] of dirs.entries()) builds.push(await start(dir, base + i, work));
    console.log(`protect of a ${(jpeg.length / 1e6).toFixed(2)} MB 12 MP JPEG (${photos.source}), wrk 8 connections, ${rounds} rounds of ${seconds} s`);
    for (const b of builds) wrk(b, 2, script, body, boundary); // warm-up
    for (let r = 0; r < rounds; r++) {
      // The order turns each round, so that no build always runs right after the same one.
      const order = builds.map((_, i) => builds[(i + r) % builds.length]!);
      for (const b of order) {
        const c0 = processCpuMs(b.proc.pid!);
        const n = wrk(b, seconds, script, body, boundary);
        b.perProtect.push((processCpuMs(b.proc.pid!) - c0) / n);
      }
      console.log(`round ${r + 1}: ${builds.map((b) => `${b.perProtect.at(-1)!.toFixed(2)} ms`).join('  ')}`);
    }
    const first = median(builds[0]!.perProtect);
    for (const b of builds) {
      const m = median(b.perProtect);
      const lo = Math.min(...b.perProtect);
      const hi = Math.max(...b.perProtect);
      console.log(`${b.dir}: CPU per protect median ${m.toFixed(2)} ms (${lo.toFixed(2)}-${hi.toFixed(2)}), ${(m / first).toFixed(3)}x the first`);
    }
  } finally {
    for (const b of builds) b.proc.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
