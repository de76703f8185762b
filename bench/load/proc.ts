/**
 * What a process costs, read from /proc so the load generator's own CPU (on the same machine) does not
 * blur it: CPU-seconds of the process and of each of its threads, resident memory and its peak, and the
 * whole machine's busy time (to show how much of it went to other processes during a step).
 * Linux only; elsewhere every reader returns undefined and the report says "n/a".
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';

/** Clock ticks per second of /proc CPU fields; 100 on every Linux that Node supports. */
const TICKS = 100;

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return undefined;
  }
}

/** utime + stime of a /proc stat line (and each apart), in seconds, and the command name. */
function parseStat(text: string): { comm: string; cpu: number; user: number; sys: number } {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const comm = text.slice(open + 1, close);
  const fields = text.slice(close + 2).split(' ');
  // After "pid (comm) ": state is index 0, utime is field 14 overall = index 11, stime index 12.
  const user = Number(fields[11]) / TICKS;
  const sys = Number(fields[12]) / TICKS;
  return { comm, cpu: user + sys, user, sys };
}

/** CPU-seconds the process has used so far (all its threads, user + system). */
export function processCpu(pid: number): number | undefined {
  return processTimes(pid)?.cpu;
}

/** CPU-seconds so far, in all and split into user and kernel (system) time. */
export function processTimes(pid: number): { cpu: number; user: number; sys: number } | undefined {
  const text = read(`/proc/${pid}/stat`);
  return text === undefined ? undefined : parseStat(text);
}

export interface ThreadCpu {
  tid: number;
  comm: string;
  cpu: number;
  user: number;
  sys: number;
  /** Seconds spent runnable but waiting for a core (run queue), from schedstat; undefined without it. */
  wait: number | undefined;
}

/** Run-queue wait of a thread so far, ns (whole): the second field of /proc/<pid>/task/<tid>/schedstat. */
function runQueueWaitNs(pid: number, tid: string): number | undefined {
  const text = read(`/proc/${pid}/task/${tid}/schedstat`);
  const ns = text === undefined ? NaN : Number(text.split(' ')[1]);
  return Number.isSafeInteger(ns) ? ns : undefined;
}

const nsToS = (ns: number | undefined): number | undefined => (ns === undefined ? undefined : ns / 1e9);

/** CPU-seconds per thread (a thread that exits between reads is simply missing). */
export function threadCpu(pid: number): ThreadCpu[] | undefined {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  const out: ThreadCpu[] = [];
  for (const t of tids) {
    const text = read(`/proc/${pid}/task/${t}/stat`);
    if (text) out.push({ tid: Number(t), ...parseStat(text), wait: nsToS(runQueueWaitNs(pid, t)) });
  }
  return out;
}

export interface ThreadDelta {
  thread: string;
  cpu: number;
  sys: number;
  /** Seconds runnable but waiting for a core; undefined without schedstat. */
  wait: number | undefined;
}

/**
 * Run-queue wait so far, in whole ns (so that differences are exact): of all the process's threads
 * together, and of its main thread (for optmark, the event loop). Undefined without
 * /proc/<pid>/task/<tid>/schedstat (a kernel without CONFIG_SCHED_INFO, or not Linux).
 */
export function runQueueWaits(pid: number): { allNs: number; mainNs: number } | undefined {
  let mainNs: number | undefined;
  let allNs = 0;
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      const ns = runQueueWaitNs(pid, t);
      allNs += ns ?? 0;
      if (t === String(pid)) mainNs = ns; // the same reading in both sums
    }
  } catch {
    return undefined;
  }
  return mainNs === undefined ? undefined : { allNs, mainNs };
}

/** Per-thread CPU used between two readings, largest first, named so the event loop stands out. */
export function threadDelta(pid: number, before: ThreadCpu[] | undefined, after: ThreadCpu[] | undefined): ThreadDelta[] {
  if (!before || !after) return [];
  const start = new Map(before.map((t) => [t.tid, t]));
  const rows = after.map((t) => {
    const s = start.get(t.tid);
    const wait0 = s ? s.wait : 0;
    return {
      thread: t.tid === pid ? `main (event loop) ${t.tid}` : `${t.comm} ${t.tid}`,
      cpu: t.cpu - (s?.cpu ?? 0),
      sys: t.sys - (s?.sys ?? 0),
      wait: t.wait === undefined || wait0 === undefined ? undefined : t.wait - wait0,
    };
  });
  return rows.filter((r) => r.cpu > 0).sort((a, b) => b.cpu - a.cpu);
}

export interface Memory {
  /** Resident set now, bytes. */
  rss: number;
  /** Peak resident set (since start or the last resetPeak), bytes. */
  hwm: number;
}

export function memory(pid: number): Memory | undefined {
  const text = read(`/proc/${pid}/status`);
  if (!text) return undefined;
  const kb = (key: string): number => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : 0;
  };
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** Resets the process's peak RSS (VmHWM) to its current RSS; false where the kernel does not allow it. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

export interface MachineCpu {
  /** Busy CPU-seconds of all cores together since boot (user, nice, system, irq, softirq, steal). */
  busy: number;
  /** Idle CPU-seconds (idle + iowait). */
  idle: number;
}

export function machineCpu(): MachineCpu | undefined {
  const text = read('/proc/stat');
  const line = text?.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return undefined;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  return { busy: (user + nice + system + irq + softirq + steal) / TICKS, idle: (idle + iowait) / TICKS };
}

/**
 * Samples a process's RSS on an interval and keeps the largest value: a fallback for peak memory where
 * VmHWM cannot be reset, and a cross-check where it can.
 */
export class RssSampler {
  #timer: NodeJS.Timeout | undefined;
  max = 0;
  constructor(
    readonly pid: number,
    readonly intervalMs = 100,
  ) {}

  start(): this {
    this.max = memory(this.pid)?.rss ?? 0;
    this.#timer = setInterval(() => {
      const m = memory(this.pid);
      if (m && m.rss > this.max) this.max = m.rss;
    }, this.intervalMs);
    this.#timer.unref();
    return this;
  }

  stop(): number {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    const m = memory(this.pid);
    if (m && m.rss > this.max) this.max = m.rss;
    return this.max;
  }
}
