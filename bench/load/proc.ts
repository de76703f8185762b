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
  /** Whole ns spent runnable but waiting for a core (run queue), from schedstat; undefined without it. */
  waitNs: number | undefined;
}

/** Run-queue wait of a thread so far, ns (whole): the second field of /proc/<pid>/task/<tid>/schedstat. */
function runQueueWaitNs(pid: number, tid: string): number | undefined {
  const text = read(`/proc/${pid}/task/${tid}/schedstat`);
  const ns = text === undefined ? NaN : Number(text.split(' ')[1]);
  return Number.isSafeInteger(ns) ? ns : undefined;
}

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
    if (text) out.push({ tid: Number(t), ...parseStat(text), waitNs: runQueueWaitNs(pid, t) });
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

/** Every thread of the later reading with what it used since the earlier one (a thread born between them counts from zero). */
function deltas(pid: number, before: ThreadCpu[], after: ThreadCpu[]): Array<ThreadDelta & { tid: number; waitNs: number | undefined }> {
  const start = new Map(before.map((t) => [t.tid, t]));
  return after.map((t) => {
    const s = start.get(t.tid);
    const wait0 = s ? s.waitNs : 0;
    const waitNs = t.waitNs === undefined || wait0 === undefined ? undefined : t.waitNs - wait0;
    return {
      tid: t.tid,
      thread: t.tid === pid ? `main (event loop) ${t.tid}` : `${t.comm} ${t.tid}`,
      cpu: t.cpu - (s?.cpu ?? 0),
      sys: t.sys - (s?.sys ?? 0),
      waitNs,
      wait: waitNs === undefined ? undefined : waitNs / 1e9,
    };
  });
}

/** Per-thread CPU used between two readings, largest first, named so the event loop stands out. */
export function threadDelta(pid: number, before: ThreadCpu[] | undefined, after: ThreadCpu[] | undefined): ThreadDelta[] {
  if (!before || !after) return [];
  return deltas(pid, before, after)
    .filter((r) => r.cpu > 0)
    .sort((a, b) => b.cpu - a.cpu)
    .map(({ thread, cpu, sys, wait }) => ({ thread, cpu, sys, wait }));
}

/**
 * Run-queue wait between two readings, seconds: of all the process's threads together (summed in whole
 * ns, so the main thread's part never exceeds it), and of its main thread (for optmark, the event loop).
 * Undefined without both readings or without schedstat (a kernel without CONFIG_SCHED_INFO).
 */
export function waitTotals(pid: number, before: ThreadCpu[] | undefined, after: ThreadCpu[] | undefined): { all: number; main: number } | undefined {
  if (!before || !after) return undefined;
  const rows = deltas(pid, before, after);
  const main = rows.find((r) => r.tid === pid)?.waitNs;
  if (main === undefined || rows.some((r) => r.waitNs === undefined)) return undefined;
  return { all: rows.reduce((sum, r) => sum + r.waitNs!, 0) / 1e9, main: main / 1e9 };
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
