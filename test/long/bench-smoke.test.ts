// The benchmark suite keeps working: a smoke run of the load test against a real server (1 MP image, two
// one-second steps, a scaled-down memory test) and of the micro-benchmark runner. Reports must exist,
// parse and carry their fields. Nothing here asserts a time: the figures of a smoke run mean nothing.
// (A few minutes on a busy machine, so it runs with `npm run test:long`; the quick parts are in
// test/bench-quick.test.ts.)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');
const RUNNER = join(ROOT, 'dist', 'bench', 'run.js');
let out = '';

/**
 * Runs a command without blocking this worker (spawnSync would starve vitest's own messages for the
 * minutes a smoke run takes on a busy machine, and vitest reports that as an error).
 */
function run(args: string[], options: { env?: NodeJS.ProcessEnv; timeout?: number } = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = options.timeout ? setTimeout(() => child.kill('SIGKILL'), options.timeout) : undefined;
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

beforeAll(() => {
  if (!existsSync(CLI) || !existsSync(RUNNER)) throw new Error('dist/ is missing: run `npm run build` first');
  out = mkdtempSync(join(tmpdir(), 'optmark-bench-smoke-'));
});
afterAll(() => rmSync(out, { recursive: true, force: true }));

interface Step {
  offeredRps: number;
  achievedRps: number;
  scheduled: number;
  ok: number;
  overloaded: number;
  notSent: number;
  cutOff: number;
  transportErrors: number;
  otherStatus: Record<string, number>;
  mbInPerS: number;
  mbOutPerS: number;
  latencyMs: { p50: number; p95: number; p99: number; max: number };
  phases?: { answers: number; middle: Record<string, number>; slowest: Record<string, number>; slowestCount: number };
  server: {
    cpuS: number | null;
    cpuMsPerRequest: number | null;
    peakRssMiB: number | null;
    waitMsPerRequest?: number;
    eventLoopWaitMsPerRequest?: number;
    threads: unknown[];
  };
  generator: { cpuMsPerRequest: number; waitMsPerRequest?: number };
  arrivals: string;
  warmupS: number;
  saturated: boolean;
  queueReference?: { demandMs: number; utilisation: number; p50: number; p99: number };
}

describe('bench load --smoke', () => {
  it('drives a real server and the naive server, and writes JSON, Markdown and SVG reports', async () => {
    // A temporary directory of its own, to see what the run leaves in it.
    const scratch = join(out, 'tmp');
    mkdirSync(scratch);
    const r = await run(
      [
        CLI,
        'bench',
        'load',
        '--smoke',
        '--mix',
        'protect=2,verify=1',
        '--memory',
        '--memory-uploads',
        '4',
        '--memory-mib',
        '1',
        '--memory-settle',
        '1',
        '--out',
        out,
      ],
      { timeout: 200_000, env: { ...process.env, OPTMARK_LOG_LEVEL: 'warn', TMPDIR: scratch } },
    );
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    // Nothing left in the temporary directory; the servers' logs are kept with the reports.
    expect(readdirSync(scratch).filter((n) => n.startsWith('optmark-bench-server-'))).toEqual([]);
    expect(readdirSync(join(out, 'logs')).sort()).toEqual(['naive.log', 'optmark-server.log', 'transport-baseline.log']);
    for (const f of ['load-report.json', 'load-report.md', 'load-latency.svg']) expect(existsSync(join(out, f)), f).toBe(true);

    const report = JSON.parse(readFileSync(join(out, 'load-report.json'), 'utf8'));
    expect(report).toMatchObject({ version: 1, settings: { smoke: true, headline: 'jpeg-1mp' }, server: { started: true } });
    expect(report.machine.cores).toBeGreaterThan(0);
    expect(report.server.readyz).toMatchObject({ status: 'ready' });
    expect(report.corpus).toHaveLength(1);
    expect(report.corpus[0].floors.protect_ms).toBeGreaterThan(0);
    expect(report.corpus[0].floors.decode_ms).toBeGreaterThan(0);

    const seen = report.scenarios.map((s: { scenario: string; target: string }) => `${s.target} ${s.scenario}`).sort();
    expect(seen).toEqual(['naive mix', 'naive protect', 'optmark mix', 'optmark protect', 'optmark verify']);
    // --mix protect=2,verify=1: the mix sends both operations of its one image, and says in what shares.
    expect(report.settings.mix).toEqual({ protect: 2, verify: 1 });
    const mixed = report.scenarios.find((s: { scenario: string; target: string }) => s.target === 'optmark' && s.scenario === 'mix');
    expect(mixed.requests).toEqual(['protect jpeg-1mp', 'verify jpeg-1mp']);
    expect(mixed.description).toContain('2 protect per 1 verify');
    for (const sc of report.scenarios) {
      expect(sc.steps).toHaveLength(2);
      expect(sc.summary).toHaveProperty('maxAchievedRps');
      for (const step of sc.steps as Step[]) {
        const others = Object.values(step.otherStatus).reduce((a, b) => a + b, 0);
        // Every scheduled request is accounted for exactly once.
        expect(step.ok + step.overloaded + step.notSent + step.cutOff + step.transportErrors + others).toBe(step.scheduled);
        expect(step.ok, `${sc.target} ${sc.scenario} @ ${step.offeredRps}`).toBeGreaterThan(0);
        for (const k of ['p50', 'p95', 'p99', 'max'] as const) expect(typeof step.latencyMs[k]).toBe('number');
        expect(step.mbInPerS).toBeGreaterThan(0);
        expect(step.mbOutPerS).toBeGreaterThan(0);
        expect(typeof step.generator.cpuMsPerRequest).toBe('number');
        expect(step.arrivals).toBe('poisson');
        expect(step.warmupS).toBe(0.5);
        // optmark's answers carry their phases (Server-Timing); the naive server's carry none.
        if (sc.target === 'optmark') {
          expect(step.phases!.answers).toBe(step.ok);
          expect(step.phases!.slowestCount).toBeGreaterThanOrEqual(1);
          expect(Object.keys(step.phases!.middle).sort()).toEqual(['outside', 'queue', 'read', 'receive', 'work']);
          expect(step.phases!.middle.work).toBeGreaterThan(0);
        } else expect(step.phases).toBeUndefined();
        if (process.platform === 'linux') {
          expect(typeof step.server.cpuS).toBe('number');
          expect(step.server.peakRssMiB).toBeGreaterThan(0);
          expect(Array.isArray(step.server.threads)).toBe(true);
          if (existsSync('/proc/self/schedstat')) {
            // Run-queue wait: the event loop's share is part of the whole process's.
            expect(step.server.waitMsPerRequest).toBeGreaterThanOrEqual(0);
            expect(step.server.eventLoopWaitMsPerRequest).toBeGreaterThanOrEqual(0);
            expect(step.server.eventLoopWaitMsPerRequest!).toBeLessThanOrEqual(step.server.waitMsPerRequest!);
            expect(step.generator.waitMsPerRequest).toBeGreaterThanOrEqual(0);
          }
          // The ideal queue at the step's rate and measured CPU: far below capacity at a few req/s.
          expect(step.queueReference!.utilisation).toBeLessThan(0.5);
          expect(step.queueReference!.p99).toBeGreaterThanOrEqual(step.queueReference!.p50);
          expect(step.queueReference!.p50).toBeGreaterThan(0);
        }
      }
      // The constant-rate pass: optmark's protect and verify only, evenly spaced, at the unsaturated
      // rates within 80% of the best achieved one.
      if (sc.target === 'optmark' && sc.scenario !== 'mix') {
        const best = Math.max(...(sc.steps as Step[]).map((s) => s.achievedRps));
        const expected = (sc.steps as Step[]).filter((s) => !s.saturated && s.offeredRps <= 0.8 * best).map((s) => s.offeredRps);
        expect((sc.constantRateSteps as Step[]).map((s) => s.offeredRps)).toEqual(expected);
        for (const step of sc.constantRateSteps as Step[]) {
          expect(step.arrivals).toBe('uniform');
          expect(step.ok + step.overloaded + step.notSent + step.cutOff + step.transportErrors).toBe(step.scheduled);
        }
        // The transport baseline beside optmark's constant-rate protect steps: one step per optmark step,
        // evenly spaced, at the same rates (--rates gives no calibration to scale by).
        if (sc.scenario === 'protect') {
          const tb = sc.transportBaseline as { workers: number; rateScale: number; steps: Step[] };
          expect(tb.workers).toBe(report.server.readyz.pool.threads);
          expect(tb.rateScale).toBe(1);
          expect(tb.steps.map((s) => s.offeredRps)).toEqual(expected);
          for (const step of tb.steps) {
            expect(step.arrivals).toBe('uniform');
            expect(step.ok, 'the baseline answers every request').toBe(step.scheduled);
          }
        } else expect(sc.transportBaseline).toBeUndefined();
      } else expect(sc.constantRateSteps).toBeUndefined();
    }
    expect(report.profile.length).toBeGreaterThan(0);

    const ids = report.targets.map((t: { id: string }) => t.id);
    expect(ids).toEqual(
      expect.arrayContaining(['protect-throughput', 'protect-cpu', 'tail-latency', 'verify-cpu', 'memory-peak', 'memory-answers', 'memory-settles']),
    );
    // A smoke run judges nothing.
    for (const t of report.targets) expect(t.met ?? null).toBeNull();

    expect(report.memory.waves).toHaveLength(2);
    for (const w of report.memory.waves) {
      expect(w.uploads).toBe(4);
      expect(w.ok + w.overloadedWithRetryAfter, JSON.stringify(w)).toBe(4);
    }
    expect(report.memory.peakRssMiB).toBeGreaterThan(0);

    const md = readFileSync(join(out, 'load-report.md'), 'utf8');
    for (const h of [
      '# optmark capacity report',
      '## Summary',
      '## Targets',
      '## Steps',
      '## Where the tail goes',
      '## Memory under pressure',
      'load-latency.svg',
    ])
      expect(md).toContain(h);
    const svg = readFileSync(join(out, 'load-latency.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('<path');
    expect(svg).toContain('SMOKE RUN'); // a smoke run's chart says it is one
  }, 240_000);

  it('interrupted (SIGINT), it stops its server and removes its temporary folder', async () => {
    const scratch = mkdtempSync(join(out, 'tmp-int-'));
    const child = spawn(
      process.execPath,
      [
        CLI,
        'bench',
        'load',
        '--smoke',
        '--scenarios',
        'protect',
        '--skip-naive',
        '--skip-profile',
        '--skip-constant-rate',
        '--rates',
        '1',
        '--duration',
        '600',
        '--out',
        join(out, 'int'),
      ],
      { cwd: ROOT, env: { ...process.env, OPTMARK_LOG_LEVEL: 'warn', TMPDIR: scratch }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    const exited = new Promise<number | null>((res) => child.on('close', (code) => res(code)));
    // Wait until the server is up (its folder exists); the 600 s step is then under way or about to be.
    for (let i = 0; i < 1200 && !/optmark serving on/.test(output) && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 100));
    const pid = Number(/optmark serving on \S+ \(pid (\d+)/.exec(output)?.[1]);
    expect(pid, output).toBeGreaterThan(0);
    expect(readdirSync(scratch).filter((n) => n.startsWith('optmark-bench-server-'))).toHaveLength(1);
    child.kill('SIGINT');
    expect(await exited, output).toBe(130);
    expect(readdirSync(scratch).filter((n) => n.startsWith('optmark-bench-server-'))).toEqual([]);
    expect(() => process.kill(pid, 0)).toThrow(); // the server is gone
  });
});

describe('npm run bench (runner)', () => {
  it('lists the micro-benchmarks and runs a filtered one as a child process', async () => {
    const list = spawnSync(process.execPath, [RUNNER, '--list'], { cwd: ROOT, encoding: 'utf8' });
    expect(list.status).toBe(0);
    expect(list.stdout.split('\n')).toEqual(expect.arrayContaining(['body', 'multipart', 'decode', 'quota']));
    const body = await run([RUNNER, 'body'], { timeout: 200_000, env: { ...process.env, BENCH_QUICK: '1' } });
    expect(body.status, `${body.stdout}\n${body.stderr}`).toBe(0);
    expect(body.stdout).toContain('floor: copy + sha256 + base64 + concat');
    expect(body.stdout).toMatch(/ok\s+body/);
    const none = spawnSync(process.execPath, [RUNNER, 'no-such-bench'], { cwd: ROOT, encoding: 'utf8' });
    expect(none.status).toBe(2);
  }, 240_000);
});

describe('bench/cold-start (side by side after a pause)', () => {
  it('drives the warm-start server and the release-everything baseline, and prints both rows and their ratios', async () => {
    const script = join(ROOT, 'dist', 'bench', 'cold-start.js');
    const r = await run([script, '--rounds', '1', '--idle', '2.5', '--burst', '6', '--first', '3', '--rate', '50', '--image', 'jpeg-1mp'], {
      timeout: 120_000,
    });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain('protect jpeg-1mp: 1 rounds of 6 requests at 50 req/s after 2.5 s idle; first 3 requests compared');
    expect(r.stdout).toMatch(/^\| warm start \(default\) \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ ms \|$/m);
    expect(r.stdout).toMatch(/^\| baseline: everything released \(OPTMARK_WARM_INFLIGHT_BYTES=0\) \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ ms \|$/m);
    expect(r.stdout).toMatch(/^warm start \/ baseline: first-request p50 [\d.]+x, max [\d.]+x, warm p50 [\d.]+x$/m);
    // An idle time the server's 2 s quiet timer cannot act in is refused, not measured.
    const short = spawnSync(process.execPath, [script, '--idle', '1'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
    expect(short.status).not.toBe(0);
    expect(short.stderr).toContain('--idle must exceed');
  }, 150_000);
});
