/**
 * `optmark bench load`: the capacity test. Starts the real server (or targets --url), drives it
 * open-loop at stepped request rates up to saturation for protect, verify and a mix, does the same to a
 * naive single-thread server on the same inputs, optionally runs the memory-pressure test, and writes
 * JSON, Markdown and an SVG chart of latency against throughput.
 */
import { spawn, spawnSync } from 'node:child_process';
import { makeDirs } from '../../src/datadir.js';
import { cpus, freemem, loadavg, release, totalmem, availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, closedLoop, type Target } from './client.js';
import { folderCorpus, generatedCorpus, mixText, prepare, weightedOrder, type CorpusImage, type MixWeights, type PreparedRequest } from './corpus.js';
import { medianFloors, type Floors } from './floor.js';
import { memoryTest, type MemoryResult } from './memory.js';
import { processCpu } from './proc.js';
import { TAIL_BAND, evaluateTargets, writeReports, type LoadReport, type ProfileRow, type ScenarioResult } from './report.js';
import { readyz, startNaive, startOptmark, startTransportBaseline, type Running } from './servers.js';
import { measureStep, latency, type StepResult } from './step.js';

export interface LoadOptions {
  /** Target a running server instead of starting one. */
  url: string | undefined;
  /** More instances of the same deployment beside `url` (the load is spread over all of them). */
  moreUrls?: string[];
  /** Bearer key for --url. */
  key: string | undefined;
  /** Process id of the --url server, when it runs on this machine (for CPU and memory). */
  pid: number | undefined;
  /** Folder of the user's images instead of the generated corpus. */
  images: string | undefined;
  /** Corpus image that the protect and verify scenarios send (default jpeg-12mp, or the folder's first). */
  image: string | undefined;
  scenarios: Array<'protect' | 'verify' | 'mix'>;
  /** How often the mix sends each operation per image: protect-only pipelines, verify-first ones, ... */
  mix: MixWeights;
  /** Explicit offered rates (req/s); otherwise a ladder from a closed-loop calibration. */
  rates: number[] | undefined;
  durationS: number;
  /** Seconds of unrecorded load at each step's rate before its measured window. */
  warmupS: number;
  /**
   * With Poisson arrivals, also run the protect and verify steps below 80% of the best achieved rate
   * again with evenly spaced arrivals: the tail-latency target is judged there (see report.ts).
   */
  constantRate: boolean;
  /** Run the transport baseline (transport.ts) beside optmark's constant-rate protect steps. */
  transportBaseline: boolean;
  p99TargetMs: number;
  naive: boolean;
  memory: boolean;
  memoryUploads: number;
  memoryBytes: number;
  /** Seconds of idle watched after the memory test. */
  memorySettleS: number;
  out: string;
  smoke: boolean;
  maxOutstanding: number;
  arrivals: 'poisson' | 'uniform';
  maxSteps: number;
  profile: boolean;
  /** Server log level (default: the server's own default, info). */
  logLevel: string | undefined;
  /** The command line, for the report. */
  command: string;
}

export const DEFAULTS: Omit<LoadOptions, 'command'> = {
  url: undefined,
  key: undefined,
  pid: undefined,
  images: undefined,
  image: undefined,
  scenarios: ['protect', 'verify', 'mix'],
  mix: { protect: 1, verify: 1 },
  rates: undefined,
  durationS: 10,
  warmupS: 2,
  constantRate: true,
  transportBaseline: true,
  p99TargetMs: 500,
  naive: true,
  memory: false,
  memoryUploads: 64,
  memoryBytes: 25 * 1024 * 1024,
  memorySettleS: 30,
  out: './bench-results',
  smoke: false,
  maxOutstanding: 128,
  arrivals: 'poisson',
  maxSteps: 10,
  profile: true,
  logLevel: undefined,
};

/** Multiples of the closed-loop calibration rate the ladder steps through (it stops after two saturated steps in a row). */
const LADDER = [0.3, 0.55, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5];
const UPLOAD_LIMIT = 25 * 1024 * 1024;
const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));

const log = (s: string): void => {
  process.stdout.write(`${s}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** Two significant digits, at least 0.1. */
const round2 = (x: number): number => Math.max(0.1, Number(x.toPrecision(2)));

/** The floors of one file: the median of `runs` child processes, each measuring on its own (see medianFloors). */
async function floorsOf(path: string, runs: number): Promise<Floors | undefined> {
  const measured: Floors[] = [];
  for (let i = 0; i < runs; i++) {
    const f = await floorsOnce(path);
    if (f) measured.push(f);
  }
  return medianFloors(measured);
}

/** The floors of one file, measured in a child process of its own. */
function floorsOnce(path: string): Promise<Floors | undefined> {
  return new Promise((resolveFloors) => {
    const child = spawn(process.execPath, [FLOOR, path], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('close', (code) => {
      try {
        resolveFloors(code === 0 ? (JSON.parse(out) as Floors) : undefined);
      } catch {
        resolveFloors(undefined);
      }
    });
  });
}

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The checkout the server was built from: commit, and whether src/ or workers/ had uncommitted changes. */
function revision(): string | undefined {
  const git = (...args: string[]): string | undefined => {
    const r = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : undefined;
  };
  const head = git('rev-parse', '--short=12', 'HEAD');
  if (!head) return undefined;
  const dirty = git('status', '--porcelain', '--', 'src', 'workers', 'native');
  return dirty ? `${head} + uncommitted changes in ${dirty.split('\n').length} files of src/, workers/ or native/` : head;
}

function machine(): LoadReport['machine'] {
  const c = cpus();
  return {
    cpuModel: c[0]?.model ?? 'unknown',
    cores: availableParallelism(),
    memoryGiB: totalmem() / 1024 ** 3,
    freeMemoryGiB: freemem() / 1024 ** 3,
    kernel: `${process.platform} ${release()}`,
    node: process.version,
    loadAverageAtStart: loadavg(),
    loadAverageAtEnd: [],
  };
}

interface Scenario {
  name: 'protect' | 'verify' | 'mix';
  description: string;
  requests: PreparedRequest[];
  pick: (i: number) => number;
}

function scenarios(opts: LoadOptions, corpus: CorpusImage[], headline: CorpusImage): Scenario[] {
  const all: Record<Scenario['name'], () => Scenario> = {
    protect: () => ({ name: 'protect', description: `POST /api/v1/protect, ${headline.name}`, requests: [prepare('protect', headline)], pick: () => 0 }),
    verify: () => ({ name: 'verify', description: `POST /api/v1/verify, ${headline.name}`, requests: [prepare('verify', headline)], pick: () => 0 }),
    mix: () => {
      const ops = (['protect', 'verify'] as const).filter((op) => opts.mix[op] > 0);
      const requests = corpus.flatMap((img) => ops.map((op) => prepare(op, img)));
      return {
        name: 'mix',
        description: `every corpus image (${corpus.map((c) => c.name).join(', ')}) equally often, ${mixText(opts.mix)}, seeded shuffled order`,
        requests,
        pick: weightedOrder(
          requests.map((r) => opts.mix[r.operation]),
          11,
        ),
      };
    },
  };
  return opts.scenarios.map((s) => all[s]());
}

/** Unloaded cost per image and operation: one request at a time, server CPU from /proc. */
async function profile(
  target: Target,
  corpus: CorpusImage[],
  operations: Array<'protect' | 'verify'>,
  floors: Map<string, Floors | undefined>,
  smoke: boolean,
): Promise<ProfileRow[]> {
  const rows: ProfileRow[] = [];
  const client = new Client(target, 1);
  try {
    for (const img of corpus) {
      for (const operation of operations) {
        const req = prepare(operation, img);
        // A few first to warm up and to size the run: enough requests for about 2.5 s of work.
        const warm = await closedLoop(client, [req], () => 0, smoke ? 1 : 3, 1, 120_000);
        const each = latency(warm.outcomes.map((o) => o.latencyMs))?.p50 ?? 100;
        const n = smoke ? 2 : Math.min(300, Math.max(5, Math.ceil(2500 / each)));
        const c0 = target.pid !== undefined ? processCpu(target.pid) : undefined;
        const run = await closedLoop(client, [req], () => 0, n, 1, 120_000);
        const c1 = target.pid !== undefined ? processCpu(target.pid) : undefined;
        const ok = run.outcomes.filter((o) => o.status >= 200 && o.status < 300);
        const statuses = [...new Set(run.outcomes.map((o) => o.status))].sort();
        const floor = floors.get(img.name);
        const cpuMs = c0 !== undefined && c1 !== undefined ? ((c1 - c0) * 1000) / n : undefined;
        const floorMs = operation === 'protect' || target.name === 'naive' ? floor?.protect_ms : floor?.decode_ms;
        rows.push({
          target: target.name,
          operation,
          image: img.name,
          imageBytes: img.bytes.length,
          requests: n,
          ok: ok.length,
          statuses,
          latencyMsP50: latency(ok.map((o) => o.latencyMs))?.p50,
          serverCpuMsPerRequest: cpuMs,
          floorMs,
          floorKind: operation === 'protect' || target.name === 'naive' ? 'protect floor' : 'bare decode',
          cpuOverFloor: cpuMs !== undefined && floorMs ? cpuMs / floorMs : undefined,
        });
        const last = rows[rows.length - 1]!;
        log(
          `profile ${target.name} ${operation} ${img.name}: ${n} requests, p50 ${last.latencyMsP50?.toFixed(1) ?? '-'} ms, server CPU ${cpuMs?.toFixed(1) ?? 'n/a'} ms/request` +
            (last.cpuOverFloor ? ` (${last.cpuOverFloor.toFixed(2)}x ${last.floorKind} ${floorMs!.toFixed(1)} ms)` : '') +
            (ok.length < n ? `; statuses ${statuses.join(',')}` : ''),
        );
      }
    }
  } finally {
    client.close();
  }
  return rows;
}

/** One server's run of a scenario while it is in progress. */
interface Lane {
  target: Target;
  client: Client;
  threads: number;
  rates: number[];
  calibration: number | undefined;
  steps: StepResult[];
  /** The constant-rate pass, when one ran. */
  constantRate?: StepResult[];
  done: boolean;
}

/** One step of a lane: a pause, then the warm-up and the measured window at `rate`. */
async function runStep(lane: Lane, sc: Scenario, opts: LoadOptions, rate: number, arrivals: 'poisson' | 'uniform', seed: number): Promise<StepResult> {
  await sleep(opts.smoke ? 200 : 1500);
  return measureStep(lane.client, sc.requests, sc.pick, {
    rate,
    durationMs: opts.durationS * 1000,
    warmupMs: opts.warmupS * 1000,
    arrivals,
    drainMs: opts.smoke ? 20_000 : 30_000,
    seed,
    timeoutMs: 120_000,
  });
}

function logStep(what: string, rate: number, step: StepResult): void {
  const l = step.latencyMs;
  const q = step.queueReference;
  log(
    `${what} @ ${rate} req/s: achieved ${step.achievedRps.toFixed(1)}, p50/p99 ${l ? `${l.p50.toFixed(0)}/${l.p99.toFixed(0)}` : '-'} ms` +
      (l && q ? ` (${(l.p99 / l.p50).toFixed(1)}x; ideal queue ${(q.p99 / q.p50).toFixed(1)}x)` : '') +
      `, 503 ${(step.overloadRate * 100).toFixed(1)}%, errors ${(step.errorRate * 100).toFixed(1)}%, ` +
      `server CPU ${step.server.cpuMsPerRequest?.toFixed(1) ?? 'n/a'} ms/req (kernel ${step.server.sysMsPerRequest?.toFixed(1) ?? 'n/a'}), ` +
      `${step.server.cores?.toFixed(2) ?? 'n/a'} cores` +
      (step.server.eventLoopWaitMsPerRequest !== undefined ? `, event loop waited ${step.server.eventLoopWaitMsPerRequest.toFixed(2)} ms/req for a core` : '') +
      `, peak RSS ${step.server.peakRssMiB?.toFixed(0) ?? 'n/a'} MiB` +
      (step.otherCores !== undefined ? `, other processes ${step.otherCores.toFixed(2)} cores` : '') +
      (step.saturated ? '  [saturated]' : ''),
  );
}

/**
 * The transport baseline's lane for the constant-rate pass. Its capacity and optmark's are measured
 * back to back, twice each, alternating (closed loop, the same requests in flight as the calibration):
 * each baseline step is then offered the share of the baseline's capacity that optmark's step is of
 * optmark's. With --rates it gets the same rates as optmark.
 */
async function baselineLane(
  baseline: { target: Target; threads: number },
  optmark: Lane,
  sc: Scenario,
  opts: LoadOptions,
): Promise<{ lane: Lane; transportBaseline: NonNullable<ScenarioResult['transportBaseline']> }> {
  const lane: Lane = { ...baseline, client: new Client(baseline.target, opts.maxOutstanding), rates: [], calibration: undefined, steps: [], done: false };
  await closedLoop(lane.client, sc.requests, sc.pick, Math.max(4, sc.requests.length), 2, 120_000);
  let optmarkRps: number | undefined;
  if (!opts.rates) {
    const conc = Math.max(2, 2 * optmark.threads);
    const n = opts.smoke ? 8 : 150;
    // Seconds each took for its 2n requests.
    const seconds = { optmark: 0, baseline: 0 };
    for (let i = 0; i < 2; i++) {
      for (const [who, client] of [
        ['optmark', optmark.client],
        ['baseline', lane.client],
      ] as const) {
        seconds[who] += n / (await closedLoop(client, sc.requests, sc.pick, n, conc, 120_000)).perSecond;
      }
    }
    optmarkRps = (2 * n) / seconds.optmark;
    lane.calibration = (2 * n) / seconds.baseline;
    log(
      `transport baseline ${sc.name}: closed loop with ${conc} in flight gives ${lane.calibration.toFixed(1)} req/s, optmark's right before and after ${optmarkRps.toFixed(1)}`,
    );
  }
  const rateScale = lane.calibration !== undefined && optmarkRps ? lane.calibration / optmarkRps : 1;
  return { lane, transportBaseline: { workers: baseline.threads, calibrationRps: lane.calibration, optmarkCalibrationRps: optmarkRps, rateScale, steps: [] } };
}

/**
 * Runs a scenario on one or more servers with their steps interleaved (step 1 of each, then step 2 of
 * each, ...), so that load from other processes on a shared machine falls on all of them alike rather
 * than on whichever ran during a busy minute. Each server has its own ladder from its own calibration.
 */
async function runScenario(
  targets: Array<{ target: Target; threads: number }>,
  sc: Scenario,
  opts: LoadOptions,
  baseline?: { target: Target; threads: number },
): Promise<ScenarioResult[]> {
  const lanes: Lane[] = targets.map(({ target, threads }) => ({
    target,
    threads,
    client: new Client(target, opts.maxOutstanding),
    rates: [],
    calibration: undefined,
    steps: [],
    done: false,
  }));
  try {
    for (const lane of lanes) {
      // Warm the connections and the server's paths for these exact requests.
      await closedLoop(lane.client, sc.requests, sc.pick, Math.max(4, sc.requests.length), 2, 120_000);
      if (opts.rates) {
        lane.rates = opts.rates;
        continue;
      }
      const conc = Math.max(2, 2 * lane.threads);
      const cal = await closedLoop(lane.client, sc.requests, sc.pick, Math.max(8, 4 * conc), conc, 120_000);
      lane.calibration = cal.perSecond;
      lane.rates = LADDER.map((m) => round2(m * cal.perSecond));
      log(`${lane.target.name} ${sc.name}: closed loop with ${conc} in flight gives ${cal.perSecond.toFixed(1)} req/s; ladder ${lane.rates.join(', ')} req/s`);
    }
    for (let i = 0; i < opts.maxSteps; i++) {
      for (const lane of lanes) {
        // The calibration may undershoot (a busy neighbour during it): past the planned ladder, keep going up by 20%.
        if (!opts.rates && i >= lane.rates.length && !lane.done) lane.rates.push(round2(lane.rates[lane.rates.length - 1]! * 1.2));
        if (lane.done || i >= lane.rates.length) continue;
        const rate = lane.rates[i]!;
        const step = await runStep(lane, sc, opts, rate, opts.arrivals, 1000 + i);
        lane.steps.push(step);
        logStep(`${lane.target.name} ${sc.name}`, rate, step);
        // Two saturated steps in a row end the ladder: one alone may be a burst of other load on a shared machine.
        const previous = lane.steps[lane.steps.length - 2];
        if (step.saturated && previous?.saturated && !opts.rates) lane.done = true;
      }
    }
    // The constant-rate pass: the same rates below saturation, evenly spaced, on optmark only; for protect
    // the transport baseline beside it, its steps interleaved with optmark's so that the machine's drift
    // falls on both alike.
    let transport: ScenarioResult['transportBaseline'];
    for (const lane of lanes) {
      if (!opts.constantRate || opts.arrivals !== 'poisson' || lane.target.name !== 'optmark' || sc.name === 'mix') continue;
      const best = Math.max(0, ...lane.steps.map((s) => s.achievedRps));
      const rates = lane.steps.filter((s) => !s.saturated && s.offeredRps <= TAIL_BAND * best).map((s) => s.offeredRps);
      lane.constantRate = [];
      const fl = baseline && sc.name === 'protect' && rates.length ? await baselineLane(baseline, lane, sc, opts) : undefined;
      try {
        for (const [k, rate] of rates.entries()) {
          const step = await runStep(lane, sc, opts, rate, 'uniform', 2000 + k);
          lane.constantRate.push(step);
          logStep(`${lane.target.name} ${sc.name} (constant rate)`, rate, step);
          if (!fl) continue;
          const baselineRate = round2(rate * fl.transportBaseline.rateScale);
          const baselineStep = await runStep(fl.lane, sc, opts, baselineRate, 'uniform', 2000 + k);
          fl.transportBaseline.steps.push(baselineStep);
          logStep(`transport baseline ${sc.name} (constant rate)`, baselineRate, baselineStep);
        }
      } finally {
        fl?.lane.client.close();
      }
      transport = fl?.transportBaseline;
    }
    return lanes.map((lane) => ({
      scenario: sc.name,
      target: lane.target.name,
      description: sc.description,
      requests: sc.requests.map((r) => r.label),
      calibrationRps: lane.calibration,
      steps: lane.steps,
      constantRateSteps: lane.constantRate,
      transportBaseline: lane.target.name === 'optmark' ? transport : undefined,
    }));
  } finally {
    for (const lane of lanes) lane.client.close();
  }
}

export async function runLoad(opts: LoadOptions): Promise<LoadReport> {
  const startedAt = new Date();
  const out = resolve(opts.out);
  makeDirs(out);
  const info = machine();
  log(`optmark bench load: ${info.cpuModel}, ${info.cores} cores, load average ${info.loadAverageAtStart.map((x) => x.toFixed(2)).join(' ')}`);

  const corpus = opts.images ? await folderCorpus(resolve(opts.images), UPLOAD_LIMIT, log) : await generatedCorpus(opts.smoke ? ['jpeg-1mp'] : undefined, log);
  const headline = corpus.find((c) => c.name === (opts.image ?? (opts.images ? corpus[0]!.name : opts.smoke ? 'jpeg-1mp' : 'jpeg-12mp')));
  if (!headline) throw new Error(`no corpus image named ${opts.image}; have ${corpus.map((c) => c.name).join(', ')}`);

  const floors = new Map<string, Floors | undefined>();
  for (const img of opts.scenarios.length || opts.profile ? corpus : []) {
    floors.set(img.name, await floorsOf(img.path, opts.smoke ? 1 : 3));
    const f = floors.get(img.name);
    const runs = f?.protect_ms_runs && f.protect_ms_runs.length > 1 ? ` (median of ${f.protect_ms_runs.map((x) => x.toFixed(2)).join(', ')})` : '';
    log(
      `floor ${img.name} (${(img.bytes.length / 1e6).toFixed(2)} MB): protect ${f?.protect_ms.toFixed(2) ?? 'n/a'} ms${runs}, decode ${f?.decode_ms.toFixed(1) ?? 'n/a'} ms`,
    );
  }

  const scs = scenarios(opts, corpus, headline);
  const results: ScenarioResult[] = [];
  const profiles: ProfileRow[] = [];
  let serverInfo: LoadReport['server'];

  // optmark: the server under test.
  let running: Running | undefined;
  let target: Target;
  if (opts.url) {
    if (!opts.key) throw new Error('--url needs --key (an API key of a paid account with quota to spare)');
    const urls = [opts.url, ...(opts.moreUrls ?? [])].map((u) => new URL(u));
    target = { name: 'optmark', url: urls[0]!, urls, key: opts.key, pid: opts.pid };
    for (const u of urls.slice(1)) if (!(await readyz(u))) throw new Error(`${u.href} does not answer /readyz`);
    if (urls.length > 1) log(`spreading the load over ${urls.length} instances: ${urls.map((u) => u.host).join(', ')}`);
    serverInfo = {
      url: urls.map((u) => u.href).join(' '),
      started: false,
      readyz: await readyz(target.url),
      env: {},
      pid: opts.pid,
      revision: undefined,
    };
  } else {
    running = await startOptmark({ inheritConfig: true, logLevel: opts.logLevel, logDir: join(out, 'logs') });
    target = running.target;
    serverInfo = { url: target.url.href, started: true, readyz: running.ready, env: running.env, pid: target.pid, log: running.log, revision: revision() };
    log(`optmark serving on ${target.url.href} (pid ${target.pid}; log ${running.log})`);
  }
  const pool = (serverInfo.readyz?.pool ?? {}) as { threads?: number };
  const threads = pool.threads ?? info.cores;
  // The naive server on the same inputs, up at the same time (idle, it costs nothing): protect and mix
  // (it answers everything as a protect, so verify has no naive counterpart).
  let naive: Running | undefined;
  let transportBaseline: Running | undefined;
  try {
    if (opts.naive && !opts.url && scs.some((s) => s.name !== 'verify')) {
      naive = await startNaive(join(out, 'logs'));
      log(`naive server on ${naive.target.url.href} (pid ${naive.target.pid})`);
    }
    if (opts.profile) {
      profiles.push(...(await profile(target, corpus, ['protect', 'verify'], floors, opts.smoke)));
      if (naive) profiles.push(...(await profile(naive.target, corpus, ['protect'], floors, opts.smoke)));
    }
    // The tail target's baseline on this machine (transport.ts), with as many workers as optmark's pool.
    if (opts.transportBaseline && !opts.url && opts.constantRate && opts.arrivals === 'poisson' && scs.some((s) => s.name === 'protect')) {
      transportBaseline = await startTransportBaseline(threads, join(out, 'logs'));
      log(`transport baseline on ${transportBaseline.target.url.href} (pid ${transportBaseline.target.pid}, ${threads} workers)`);
    }
    for (const sc of scs) {
      const lanes = [{ target, threads }];
      if (naive && sc.name !== 'verify') lanes.push({ target: naive.target, threads: 1 });
      results.push(...(await runScenario(lanes, sc, opts, transportBaseline && { target: transportBaseline.target, threads })));
    }
  } finally {
    await transportBaseline?.stop();
    await naive?.stop();
    await running?.stop();
  }

  let memory: MemoryResult | undefined;
  if (opts.memory) {
    if (opts.url) log('memory: skipped with --url (it needs a fresh server with the default configuration on this machine)');
    else
      memory = await memoryTest({ uploads: opts.memoryUploads, bytes: opts.memoryBytes, log, settleS: opts.memorySettleS, lightTrafficS: opts.smoke ? 1 : 10 });
  }

  info.loadAverageAtEnd = loadavg();
  const report: LoadReport = {
    version: 1,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    command: opts.command,
    machine: info,
    settings: {
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      arrivals: opts.arrivals,
      maxOutstanding: opts.maxOutstanding,
      p99TargetMs: opts.p99TargetMs,
      smoke: opts.smoke,
      corpus: opts.images ? `folder ${resolve(opts.images)}` : 'generated',
      headline: headline.name,
      mix: opts.mix,
      rates: opts.rates ?? 'ladder',
    },
    server: serverInfo,
    corpus: corpus.map((c) => ({
      name: c.name,
      format: c.format,
      width: c.width,
      height: c.height,
      megapixels: (c.width * c.height) / 1e6,
      bytes: c.bytes.length,
      floors: floors.get(c.name),
    })),
    profile: profiles,
    scenarios: results,
    targets: [],
    memory,
    files: { json: '', markdown: '', chart: '' },
  };
  report.targets = evaluateTargets(report);
  writeReports(report, out);
  return report;
}
