/**
 * One measured step: an open-loop run at a fixed rate with the server's CPU, per-thread CPU and memory
 * read from /proc around it, the generator's own CPU, and the machine's busy time (so CPU that went to
 * other processes during the step is visible in the report).
 */
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { type Client, openLoop, type Outcome, type StepPlan } from './client.js';
import type { PreparedRequest } from './corpus.js';
import { idealQueue, type QueueReference } from './queue.js';
import { RssSampler, machineCpu, memory, processTimes, resetPeak, threadCpu, threadDelta, waitTotals, type ThreadDelta } from './proc.js';

export interface Latency {
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

export interface StepResult {
  offeredRps: number;
  arrivals: 'poisson' | 'uniform';
  durationS: number;
  /** Seconds of unrecorded load at this rate before the measured window. */
  warmupS: number;
  /** Wall seconds from the first scheduled start to the last answer. */
  elapsedS: number;
  scheduled: number;
  /** Requests the generator did not send because its outstanding bound was reached. */
  notSent: number;
  /** 2xx answers. */
  ok: number;
  /** 503 answers, and how many of them lacked Retry-After. */
  overloaded: number;
  overloadedWithoutRetryAfter: number;
  /** Other non-2xx statuses by code. */
  otherStatus: Record<string, number>;
  /** Connection failures and requests cut off at the drain deadline. */
  transportErrors: number;
  cutOff: number;
  /** 2xx answers per second over max(duration, elapsed). */
  achievedRps: number;
  /** Request bodies into the server, response bodies out of it, MB (1e6 bytes) per second. */
  mbInPerS: number;
  mbOutPerS: number;
  /** Latency of 2xx answers, ms, from the scheduled start. */
  latencyMs: Latency | undefined;
  /** How late the generator sent, ms (p99, max): large values mean the generator itself fell behind. */
  sendLagMs: { p99: number; max: number };
  errorRate: number;
  overloadRate: number;
  server: {
    /** CPU-seconds the server process used during the step (all threads), from /proc. */
    cpuS: number | undefined;
    cpuMsPerRequest: number | undefined;
    /** The kernel (system) part of it: socket reads and writes, page faults, and on loopback part of the peer's TCP work. */
    sysMsPerRequest: number | undefined;
    /** Average cores busy. */
    cores: number | undefined;
    peakRssMiB: number | undefined;
    endRssMiB: number | undefined;
    /**
     * Time the server's threads spent runnable but waiting for a core (the run queue, from
     * /proc/<pid>/task/<tid>/schedstat), ms per request: all threads, and the event loop alone. It is
     * the part of the latency that more cores, or nothing else on these, would take away.
     */
    waitMsPerRequest: number | undefined;
    eventLoopWaitMsPerRequest: number | undefined;
    /** Largest threads by CPU during the step. */
    threads: Array<{ thread: string; cpuS: number; msPerRequest: number; sysMsPerRequest: number; waitMsPerRequest: number | undefined }>;
  };
  /** The generator's CPU and its threads' run-queue wait, per answered request, and cores busy. */
  generator: { cpuMsPerRequest: number; waitMsPerRequest: number | undefined; cores: number };
  /** Average cores busy with processes other than the server and the generator (other tenants). */
  otherCores: number | undefined;
  /** Failures above 1%, or under 90% of the offered rate achieved. */
  saturated: boolean;
  /**
   * The ideal machine's latency at this step's rate and arrivals (bench/load/queue.ts), given the CPU
   * per request the server and the generator used here: what the arrivals alone cost in tail latency.
   */
  queueReference: QueueReference | undefined;
  /** Per request kind (mix): count and latency of 2xx answers. */
  byKind: Array<{ label: string; ok: number; latencyMs: Latency | undefined }>;
  /** Where the latency of 2xx answers went, when the server reported its phases (Server-Timing). */
  phases: PhaseBreakdown | undefined;
}

/**
 * The parts of one answer's latency, ms: `receive`, `queue` and `work` are the server's own phases from
 * its Server-Timing header (src/http/timing.ts); `outside` is the rest until the answer's head arrived
 * (the generator's send lag, the request's way to the server's first callback, and the head's way
 * back); `read` is from the head to the answer's last byte (its transfer to the generator).
 */
export const PHASE_PARTS = ['outside', 'receive', 'queue', 'work', 'read'] as const;
export type PhasePart = (typeof PHASE_PARTS)[number];
export type PhaseTimes = Record<PhasePart, number>;

export interface PhaseBreakdown {
  /** 2xx answers that carried the server's phases. */
  answers: number;
  /** Mean of each part over the answers from p40 to p60 of latency (the typical answer). */
  middle: PhaseTimes;
  /** Mean of each part over the answers at or above the step's p99 latency (the tail), and how many. */
  slowest: PhaseTimes;
  slowestCount: number;
  /** p99 of each part on its own. */
  p99: PhaseTimes;
}

/** One answer's parts, or undefined when it did not carry the server's three phases. */
export function phaseTimes(o: Outcome): PhaseTimes | undefined {
  const p = o.phases;
  if (!p || o.headMs === undefined || p.receive === undefined || p.queue === undefined || p.work === undefined) return undefined;
  return { outside: o.headMs - p.receive - p.queue - p.work, receive: p.receive, queue: p.queue, work: p.work, read: o.latencyMs - o.headMs };
}

/** The breakdown of a step's 2xx answers; undefined when none carried the server's phases. */
export function phaseBreakdown(answers: Outcome[]): PhaseBreakdown | undefined {
  const rows = answers.map((o) => ({ latency: o.latencyMs, t: phaseTimes(o) })).filter((r): r is { latency: number; t: PhaseTimes } => r.t !== undefined);
  if (rows.length === 0) return undefined;
  rows.sort((a, b) => a.latency - b.latency);
  const n = rows.length;
  const mean = (part: typeof rows): PhaseTimes => {
    const out = Object.fromEntries(PHASE_PARTS.map((k) => [k, 0])) as PhaseTimes;
    for (const r of part) for (const k of PHASE_PARTS) out[k] += r.t[k] / part.length;
    return out;
  };
  const p99At = Math.min(n - 1, Math.max(0, Math.ceil(0.99 * n) - 1));
  const slowest = rows.slice(p99At);
  const middle = rows.slice(Math.floor(0.4 * n), Math.max(Math.floor(0.4 * n) + 1, Math.ceil(0.6 * n)));
  const p99 = Object.fromEntries(PHASE_PARTS.map((k) => [k, latency(rows.map((r) => r.t[k]))!.p99])) as PhaseTimes;
  return { answers: n, middle: mean(middle), slowest: mean(slowest), slowestCount: slowest.length, p99 };
}

export function latency(values: number[]): Latency | undefined {
  if (values.length === 0) return undefined;
  const s = Float64Array.from(values).sort();
  const at = (q: number): number => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
  let sum = 0;
  for (const v of s) sum += v;
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99), max: s[s.length - 1]!, mean: sum / s.length };
}

const MIB = 1024 * 1024;

export async function measureStep(client: Client, requests: readonly PreparedRequest[], pick: (i: number) => number, plan: StepPlan): Promise<StepResult> {
  const pid = client.target.pid;
  // The meters start with the measured window (after the step's warm-up), from the same callback.
  let peakResettable = false;
  let sampler: RssSampler | undefined;
  let cpu0: ReturnType<typeof processTimes> | undefined;
  let threads0: ReturnType<typeof threadCpu> | undefined;
  let mach0: ReturnType<typeof machineCpu> | undefined;
  let gen0: NodeJS.CpuUsage | undefined;
  let genThreads0: ReturnType<typeof threadCpu> | undefined;
  let wall0 = 0;
  const start = (): void => {
    peakResettable = pid !== undefined && resetPeak(pid);
    sampler = pid !== undefined ? new RssSampler(pid, 100).start() : undefined;
    cpu0 = pid !== undefined ? processTimes(pid) : undefined;
    threads0 = pid !== undefined ? threadCpu(pid) : undefined;
    mach0 = machineCpu();
    gen0 = process.cpuUsage();
    genThreads0 = threadCpu(process.pid);
    wall0 = performance.now();
  };

  // openLoop calls it exactly once: its measured window always holds at least one request.
  const run = await openLoop(client, requests, pick, { ...plan, onMeasureStart: start });

  const wallS = (performance.now() - wall0) / 1000;
  const gen = process.cpuUsage(gen0);
  const genThreads1 = threadCpu(process.pid);
  const mach1 = machineCpu();
  const cpu1 = pid !== undefined ? processTimes(pid) : undefined;
  const threads1 = pid !== undefined ? threadCpu(pid) : undefined;
  const sampledPeak = sampler?.stop();
  const mem = pid !== undefined ? memory(pid) : undefined;

  return summarise(run.outcomes, requests, plan, run.elapsedMs, {
    cpuS: cpu0 !== undefined && cpu1 !== undefined ? cpu1.cpu - cpu0.cpu : undefined,
    sysS: cpu0 !== undefined && cpu1 !== undefined ? cpu1.sys - cpu0.sys : undefined,
    threads: pid !== undefined ? threadDelta(pid, threads0, threads1) : [],
    peakRss: mem ? (peakResettable ? Math.max(mem.hwm, sampledPeak ?? 0) : sampledPeak) : undefined,
    endRss: mem?.rss,
    generatorCpuS: (gen.user + gen.system) / 1e6,
    waitS: pid !== undefined ? waitTotals(pid, threads0, threads1) : undefined,
    generatorWaitS: waitTotals(process.pid, genThreads0, genThreads1)?.all,
    machineBusyS: mach0 && mach1 ? mach1.busy - mach0.busy : undefined,
    wallS,
  });
}

interface Costs {
  cpuS: number | undefined;
  sysS: number | undefined;
  threads: ThreadDelta[];
  /** Run-queue seconds of the server's threads (all, and the event loop's). */
  waitS: { all: number; main: number } | undefined;
  peakRss: number | undefined;
  endRss: number | undefined;
  generatorCpuS: number;
  generatorWaitS: number | undefined;
  machineBusyS: number | undefined;
  wallS: number;
}

function summarise(outcomes: Outcome[], requests: readonly PreparedRequest[], plan: StepPlan, elapsedMs: number, costs: Costs): StepResult {
  let ok = 0;
  let overloaded = 0;
  let noRetry = 0;
  let notSent = 0;
  let transport = 0;
  let cutOff = 0;
  let bytesIn = 0;
  let bytesOut = 0;
  const other: Record<string, number> = {};
  const okLatency: number[] = [];
  const okOutcomes: Outcome[] = [];
  const lags: number[] = [];
  const perKind = requests.map(() => [] as number[]);
  for (const o of outcomes) {
    if (o.status === -1) {
      notSent++;
      continue;
    }
    if (o.status === -2) {
      cutOff++;
      continue;
    }
    lags.push(o.lagMs);
    bytesIn += o.bytesOut; // the server's in is the generator's out
    bytesOut += o.bytesIn;
    if (o.status === 0) transport++;
    else if (o.status >= 200 && o.status < 300) {
      ok++;
      okLatency.push(o.latencyMs);
      okOutcomes.push(o);
      perKind[o.kind]!.push(o.latencyMs);
    } else if (o.status === 503) {
      overloaded++;
      if (!o.retryAfter) noRetry++;
    } else other[o.status] = (other[o.status] ?? 0) + 1;
  }
  const seconds = Math.max(plan.durationMs, elapsedMs) / 1000;
  const scheduled = outcomes.length;
  const failures = notSent + cutOff + transport + overloaded + Object.values(other).reduce((a, b) => a + b, 0);
  const achieved = ok / seconds;
  const lag = latency(lags);
  const served = Math.max(1, ok + overloaded);
  const perOk = (seconds: number | undefined): number | undefined => (seconds === undefined || ok === 0 ? undefined : (seconds * 1000) / ok);
  return {
    offeredRps: plan.rate,
    arrivals: plan.arrivals,
    durationS: plan.durationMs / 1000,
    warmupS: (plan.warmupMs ?? 0) / 1000,
    elapsedS: elapsedMs / 1000,
    scheduled,
    notSent,
    ok,
    overloaded,
    overloadedWithoutRetryAfter: noRetry,
    otherStatus: other,
    transportErrors: transport,
    cutOff,
    achievedRps: achieved,
    mbInPerS: bytesIn / 1e6 / seconds,
    mbOutPerS: bytesOut / 1e6 / seconds,
    latencyMs: latency(okLatency),
    sendLagMs: { p99: lag?.p99 ?? 0, max: lag?.max ?? 0 },
    errorRate: (failures - overloaded) / scheduled,
    overloadRate: overloaded / scheduled,
    server: {
      cpuS: costs.cpuS,
      cpuMsPerRequest: costs.cpuS === undefined || ok === 0 ? undefined : (costs.cpuS * 1000) / ok,
      sysMsPerRequest: costs.sysS === undefined || ok === 0 ? undefined : (costs.sysS * 1000) / ok,
      cores: costs.cpuS === undefined ? undefined : costs.cpuS / costs.wallS,
      peakRssMiB: costs.peakRss === undefined ? undefined : costs.peakRss / MIB,
      endRssMiB: costs.endRss === undefined ? undefined : costs.endRss / MIB,
      waitMsPerRequest: perOk(costs.waitS?.all),
      eventLoopWaitMsPerRequest: perOk(costs.waitS?.main),
      threads: costs.threads.slice(0, 10).map((t) => ({
        thread: t.thread,
        cpuS: t.cpu,
        msPerRequest: perOk(t.cpu) ?? 0,
        sysMsPerRequest: perOk(t.sys) ?? 0,
        waitMsPerRequest: perOk(t.wait),
      })),
    },
    generator: {
      cpuMsPerRequest: (costs.generatorCpuS * 1000) / served,
      waitMsPerRequest: costs.generatorWaitS === undefined ? undefined : (costs.generatorWaitS * 1000) / served,
      cores: costs.generatorCpuS / costs.wallS,
    },
    otherCores: costs.machineBusyS === undefined ? undefined : Math.max(0, costs.machineBusyS - (costs.cpuS ?? 0) - costs.generatorCpuS) / costs.wallS,
    saturated: failures / scheduled > 0.01 || achieved < 0.9 * plan.rate,
    queueReference:
      costs.cpuS === undefined || ok === 0
        ? undefined
        : idealQueue(plan.rate, ((costs.cpuS + costs.generatorCpuS) * 1000) / served, availableParallelism(), plan.arrivals, plan.seed),
    byKind: requests.map((r, k) => ({ label: r.label, ok: perKind[k]!.length, latencyMs: latency(perKind[k]!) })),
    phases: phaseBreakdown(okOutcomes),
  };
}
