/**
 * The load generator: open-loop at a fixed request rate. Start times are scheduled from the rate alone
 * (Poisson or evenly spaced) and a request goes out at its time whether or not earlier ones have been
 * answered; latency runs from the scheduled time, not the send time, so a server that stalls is charged
 * for the requests that piled up behind the stall (no coordinated omission). Outstanding requests are
 * bounded; a request due while the bound is reached is counted as "not sent" rather than delayed.
 *
 * Kept cheap, because it shares the machine with the server: bodies are built once and reused, and
 * responses are only counted (status, Retry-After, byte length), never parsed.
 */
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { PreparedRequest } from './corpus.js';
import { prng } from './corpus.js';

export interface Target {
  /** `optmark` or `naive`. */
  name: string;
  url: URL;
  /** Bearer key; none for the naive server. */
  key: string | undefined;
  /** Process id to read CPU and memory from, when the server runs on this machine. */
  pid: number | undefined;
}

/** One answered (or failed) request. */
export interface Outcome {
  /** HTTP status; 0 for a transport error, -1 for not sent, -2 for cut off at the drain deadline. */
  status: number;
  /** Milliseconds from the scheduled start to the last response byte. */
  latencyMs: number;
  /** Milliseconds from the scheduled start to the actual send (the generator's own lag). */
  lagMs: number;
  /** When the last byte arrived, ms since the step's time zero. */
  doneAt: number;
  bytesOut: number;
  bytesIn: number;
  retryAfter: boolean;
  kind: number;
}

export class Client {
  readonly agent: Agent;
  constructor(
    readonly target: Target,
    readonly maxOutstanding: number,
  ) {
    this.agent = new Agent({ keepAlive: true, maxSockets: maxOutstanding, maxFreeSockets: maxOutstanding, noDelay: true } as ConstructorParameters<typeof Agent>[0]);
  }

  /** Sends one request; resolves (never rejects) with what happened. `t0` is the step's time zero. */
  send(req: PreparedRequest, kind: number, scheduledAt: number, t0: number, timeoutMs: number): Promise<Outcome> {
    const sentAt = performance.now();
    return new Promise((resolve) => {
      let settled = false;
      const outcome = (status: number, bytesIn: number, retryAfter: boolean): void => {
        if (settled) return;
        settled = true;
        const now = performance.now();
        resolve({
          status,
          latencyMs: now - (t0 + scheduledAt),
          lagMs: sentAt - (t0 + scheduledAt),
          doneAt: now - t0,
          bytesOut: req.body.length,
          bytesIn,
          retryAfter,
          kind,
        });
      };
      const headers: Record<string, string | number> = {
        'content-type': req.contentType,
        'content-length': req.body.length,
      };
      if (this.target.key) headers.authorization = `Bearer ${this.target.key}`;
      const r = request(
        { agent: this.agent, method: 'POST', hostname: this.target.url.hostname, port: this.target.url.port, path: req.path, headers, timeout: timeoutMs },
        (res) => {
          let n = 0;
          res.on('data', (c: Buffer) => {
            n += c.length;
          });
          res.on('end', () => outcome(res.statusCode ?? 0, n, res.headers['retry-after'] !== undefined));
          res.on('error', () => outcome(0, n, false));
        },
      );
      r.on('timeout', () => r.destroy(new Error('timeout')));
      // A server may answer (413, 503) before the whole body is written and then close: the answer counts.
      r.on('error', () => outcome(0, 0, false));
      r.end(req.body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

export interface StepPlan {
  /** Offered rate, requests per second. */
  rate: number;
  durationMs: number;
  arrivals: 'poisson' | 'uniform';
  /** How long to wait for stragglers after the last scheduled start. */
  drainMs: number;
  seed: number;
  /** Per-request timeout. */
  timeoutMs: number;
}

export interface StepRun {
  outcomes: Outcome[];
  /** ms from time zero until the last request finished (or the drain deadline). */
  elapsedMs: number;
  scheduled: number;
}

/** Start offsets (ms) of `rate` requests per second for `durationMs`. */
export function schedule(rate: number, durationMs: number, arrivals: StepPlan['arrivals'], seed: number): Float64Array {
  const n = Math.max(1, Math.round((rate * durationMs) / 1000));
  const out = new Float64Array(n);
  const gap = 1000 / rate;
  if (arrivals === 'uniform') {
    for (let i = 0; i < n; i++) out[i] = i * gap;
  } else {
    const rand = prng(seed);
    let t = 0;
    for (let i = 0; i < n; i++) {
      out[i] = t;
      t += -Math.log(1 - rand()) * gap;
    }
  }
  return out;
}

/**
 * Runs one open-loop step. `pick(i)` chooses which prepared request the i-th start sends (its index in
 * `requests` is kept as the outcome's kind).
 */
export async function openLoop(client: Client, requests: readonly PreparedRequest[], pick: (i: number) => number, plan: StepPlan): Promise<StepRun> {
  const starts = schedule(plan.rate, plan.durationMs, plan.arrivals, plan.seed);
  const outcomes: Outcome[] = new Array(starts.length);
  let outstanding = 0;
  let finished = 0;
  let next = 0;
  const t0 = performance.now() + 5;
  let allDone: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    allDone = resolve;
  });
  const settle = (i: number, o: Outcome): void => {
    if (outcomes[i] !== undefined) return; // already cut off at the drain deadline
    outcomes[i] = o;
    if (++finished === starts.length) allDone();
  };

  const fire = (i: number): void => {
    const kind = pick(i);
    if (outstanding >= client.maxOutstanding) {
      settle(i, { status: -1, latencyMs: 0, lagMs: performance.now() - (t0 + starts[i]!), doneAt: starts[i]!, bytesOut: 0, bytesIn: 0, retryAfter: false, kind });
      return;
    }
    outstanding++;
    void client.send(requests[kind]!, kind, starts[i]!, t0, plan.timeoutMs).then((o) => {
      outstanding--;
      settle(i, o);
    });
  };

  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      while (next < starts.length && t0 + starts[next]! <= now) fire(next++);
      if (next >= starts.length) return resolve();
      // Wake a little early: timers fire late, never early, and lateness shows up as lag.
      const wait = t0 + starts[next]! - performance.now();
      setTimeout(tick, wait > 2 ? wait - 1 : 0);
    };
    setTimeout(tick, 5);
  });

  const deadline = new Promise<'deadline'>((resolve) => setTimeout(() => resolve('deadline'), plan.drainMs).unref());
  const how = await Promise.race([done, deadline]);
  if (how === 'deadline') {
    // Whatever is still out is cut off: it counts as a failure with the latency it had reached.
    const now = performance.now();
    for (let i = 0; i < starts.length; i++) {
      if (outcomes[i] === undefined) {
        outcomes[i] = { status: -2, latencyMs: now - (t0 + starts[i]!), lagMs: 0, doneAt: now - t0, bytesOut: 0, bytesIn: 0, retryAfter: false, kind: pick(i) };
      }
    }
    // Drop the sockets so the cut-off requests stop loading the server and the next step starts clean.
    client.agent.destroy();
  }
  let last = 0;
  for (const o of outcomes) if (o.doneAt > last) last = o.doneAt;
  return { outcomes, elapsedMs: last, scheduled: starts.length };
}

/** Closed loop: `concurrency` requests always in flight, `count` in all; returns completions per second. */
export async function closedLoop(client: Client, requests: readonly PreparedRequest[], pick: (i: number) => number, count: number, concurrency: number, timeoutMs: number): Promise<{ perSecond: number; outcomes: Outcome[] }> {
  let next = 0;
  const outcomes: Outcome[] = [];
  const t0 = performance.now();
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const kind = pick(i);
      const o = await client.send(requests[kind]!, kind, performance.now() - t0, t0, timeoutMs);
      outcomes.push(o);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  const seconds = (performance.now() - t0) / 1000;
  return { perSecond: count / seconds, outcomes };
}
