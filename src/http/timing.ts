/**
 * The phases of one API request, for the answer's `Server-Timing` header (W3C Server Timing) and the
 * request's log line, in milliseconds:
 *
 * - `receive`: from the request's headers to the last byte of its body (the client's upload);
 * - `queue`: from the last body byte to the worker's result, less the worker's own time: the wait for a
 *   free worker, the two hand-overs between threads and the event loop's delay in taking the result;
 * - `work`: the worker's own time (multipart parse, mark or verify, the answer's bytes).
 *
 * What a client measures beyond their sum is its own sending before the server's first callback, the
 * answer's transfer and the network. A phase not reached is left out (a refusal from the headers alone
 * has none).
 */
import type { Headers } from './respond.js';

const NS_PER_MS = 1e6;

export class Phases {
  receiveMs: number | undefined;
  queueMs: number | undefined;
  workMs: number | undefined;
  #bodyAt: bigint | undefined;

  constructor(readonly started: bigint) {}

  /** The whole body has arrived. */
  received(now: bigint = process.hrtime.bigint()): void {
    this.#bodyAt = now;
    this.receiveMs = Number(now - this.started) / NS_PER_MS;
  }

  /** The worker's result is back; `workMs` is the time the worker reported for itself. */
  worked(workMs: number | undefined, now: bigint = process.hrtime.bigint()): void {
    if (this.#bodyAt === undefined) return;
    const roundTrip = Number(now - this.#bodyAt) / NS_PER_MS;
    const work = workMs !== undefined && Number.isFinite(workMs) ? Math.min(Math.max(0, workMs), roundTrip) : undefined;
    this.workMs = work;
    this.queueMs = roundTrip - (work ?? 0);
  }

  /** The phases reached so far, in order, by name. */
  #reached(): Array<[name: 'receive' | 'queue' | 'work', ms: number]> {
    const all = [
      ['receive', this.receiveMs],
      ['queue', this.queueMs],
      ['work', this.workMs],
    ] as const;
    return all.filter((p): p is [(typeof p)[0], number] => p[1] !== undefined);
  }

  /** `{ 'Server-Timing': 'receive;dur=2.41, queue;dur=0.12, work;dur=5.03' }`, or nothing before the body. */
  headers(): Headers {
    const reached = this.#reached();
    return reached.length ? { 'Server-Timing': reached.map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`).join(', ') } : {};
  }

  /** The phases reached, rounded to 0.01 ms, for the log line. */
  fields(): { receiveMs?: number; queueMs?: number; workMs?: number } {
    return Object.fromEntries(this.#reached().map(([name, ms]) => [`${name}Ms`, Math.round(ms * 100) / 100]));
  }
}

/**
 * Reads a `Server-Timing` value into durations by name (ms). Entries without a numeric `dur` are left
 * out; a malformed header gives what could be read, never an error.
 */
export function parseServerTiming(value: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const entry of value.split(',')) {
    const [name, ...params] = entry.split(';').map((s) => s.trim());
    if (!name) continue;
    for (const p of params) {
      const m = /^dur=(-?\d+(?:\.\d+)?)$/i.exec(p);
      if (m) out[name] = Number(m[1]);
    }
  }
  return out;
}
