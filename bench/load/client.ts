/**
 * The load generator: open-loop at a fixed request rate. Start times are scheduled from the rate alone
 * (Poisson or evenly spaced) and a request goes out at its time whether or not earlier ones have been
 * answered; latency runs from the scheduled time, not the send time, so a server that stalls is charged
 * for the requests that piled up behind the stall (no coordinated omission). Outstanding requests are
 * bounded; a request due while the bound is reached is counted as "not sent" rather than delayed.
 *
 * Kept cheap, because it shares the machine with the server: bodies are built once and reused, and
 * responses are only counted (status, Retry-After, Server-Timing, byte length), their bodies never parsed.
 */
import { connect, type NetConnectOpts, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { parseServerTiming } from '../../src/http/timing.js';
import type { PreparedRequest } from './corpus.js';
import { prng } from './corpus.js';

export interface Target {
  /** `optmark` or `naive`. */
  name: string;
  url: URL;
  /**
   * Several instances of one deployment (`bench load --url a --url b ...`): new connections go to them in
   * turn and a request takes an idle connection of the next instance, so the load is spread evenly.
   */
  urls?: URL[];
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
  /** Milliseconds from the scheduled start to the response's head (status line and headers). */
  headMs?: number;
  /** The answer's `Server-Timing` durations by name (ms): optmark's receive, queue and work. */
  phases?: Record<string, number>;
}

/** Idle keep-alive connections older than this are dropped, not reused: node:http closes them at 5 s. */
const IDLE_REUSE_MS = 4000;

/** What the response's head said besides its status, for the outcome. */
interface HeadInfo {
  /** performance.now() when the head was complete. */
  at: number;
  serverTiming: string | undefined;
}

interface Pending {
  finish: (status: number, bytesIn: number, retryAfter: boolean, head: HeadInfo | undefined) => void;
  /** The whole request body has been handed to the kernel. */
  written: boolean;
}

/**
 * One HTTP/1.1 connection with an incremental response parser: status line and headers (accumulated
 * until the blank line), then a Content-Length, chunked or close-delimited body that is only counted.
 */
class Connection {
  readonly socket: Socket;
  pending: Pending | undefined;
  idleSince = 0;
  #head: Buffer[] = [];
  #headLength = 0;
  #mode: 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-end' | 'trailer' | 'close' = 'head';
  #status = 0;
  #retryAfter = false;
  #closeAfter = false;
  #headInfo: HeadInfo | undefined;
  #remaining = 0;
  #bytes = 0;
  #line = '';

  constructor(
    url: URL,
    readBuffer: Buffer,
    readonly onFree: (c: Connection) => void,
    readonly onGone: (c: Connection) => void,
  ) {
    this.socket = connect({
      host: url.hostname,
      port: Number(url.port || 80),
      noDelay: true,
      onread: {
        buffer: readBuffer,
        callback: (n: number, buf: Uint8Array) => {
          this.#feed(buf as Buffer, n);
          return true;
        },
      },
    } as unknown as NetConnectOpts);
    this.socket.on('error', () => this.#fail());
    this.socket.on('close', () => this.#fail());
    this.socket.on('end', () => {
      if (this.#mode === 'close' && this.pending) this.#complete();
      else this.#fail();
    });
  }

  send(head: Buffer, body: Buffer, pending: Pending): void {
    this.pending = pending;
    this.#mode = 'head';
    this.#head = [];
    this.#headLength = 0;
    this.#bytes = 0;
    this.#status = 0;
    this.#retryAfter = false;
    this.#closeAfter = false;
    this.#headInfo = undefined;
    this.socket.cork();
    this.socket.write(head);
    this.socket.write(body, () => {
      pending.written = true;
    });
    this.socket.uncork();
  }

  #fail(): void {
    const p = this.pending;
    this.pending = undefined;
    this.onGone(this);
    if (!this.socket.destroyed) this.socket.destroy();
    p?.finish(0, this.#bytes, false, undefined);
  }

  #complete(): void {
    const p = this.pending!;
    this.pending = undefined;
    // A connection is reused only when the exchange finished cleanly: the server answered early (before
    // the upload was written) or asked to close, then it is dropped.
    const reusable = p.written && !this.#closeAfter && this.#mode !== 'close';
    if (reusable) {
      this.idleSince = performance.now();
      this.onFree(this);
    } else {
      this.onGone(this);
      this.socket.destroy();
    }
    p.finish(this.#status, this.#bytes, this.#retryAfter, this.#headInfo);
  }

  /** Parses `buf[0, end)`, which is valid only during this call (the read buffer is shared and reused). */
  #feed(buf: Buffer, end: number): void {
    let at = 0;
    if (!this.pending) return; // bytes nobody asked for: ignore
    while (at < end && this.pending) {
      switch (this.#mode) {
        case 'head': {
          const chunk = buf.subarray(at, end);
          const joined = this.#headLength ? Buffer.concat([...this.#head, chunk]) : chunk;
          const blank = joined.indexOf('\r\n\r\n');
          if (blank < 0) {
            if (joined.length > 64 * 1024) return this.#fail();
            this.#head = [Buffer.from(joined)]; // copy: the read buffer is reused
            this.#headLength = joined.length;
            return;
          }
          const consumedBefore = this.#headLength;
          this.#head = [];
          this.#headLength = 0;
          this.#parseHead(joined.toString('latin1', 0, blank));
          at += blank + 4 - consumedBefore;
          if ((this.#mode as string) === 'length' && this.#remaining === 0) this.#complete();
          break;
        }
        case 'length':
        case 'chunk-data': {
          const take = Math.min(this.#remaining, end - at);
          this.#bytes += take;
          this.#remaining -= take;
          at += take;
          if (this.#remaining > 0) break;
          if (this.#mode === 'length') this.#complete();
          else this.#mode = 'chunk-end';
          break;
        }
        case 'close':
          this.#bytes += end - at;
          return;
        case 'chunk-size':
        case 'trailer':
        case 'chunk-end': {
          const nl = buf.indexOf(10, at);
          if (nl < 0 || nl >= end) {
            this.#line += buf.toString('latin1', at, end);
            return;
          }
          const line = (this.#line + buf.toString('latin1', at, nl)).replace(/\r$/, '');
          this.#line = '';
          at = nl + 1;
          if (this.#mode === 'chunk-end') this.#mode = 'chunk-size';
          else if (this.#mode === 'trailer') {
            if (line === '') this.#complete();
          } else {
            const size = parseInt(line, 16);
            if (!Number.isFinite(size)) return this.#fail();
            if (size === 0) this.#mode = 'trailer';
            else {
              this.#remaining = size;
              this.#mode = 'chunk-data';
            }
          }
          break;
        }
      }
    }
  }

  #parseHead(text: string): void {
    const lines = text.split('\r\n');
    this.#status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0);
    let length: number | undefined;
    let chunked = false;
    const info: HeadInfo = { at: performance.now(), serverTiming: undefined };
    this.#headInfo = info;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      if (colon < 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'content-length') length = Number(value);
      else if (name === 'transfer-encoding') chunked = /chunked/i.test(value);
      else if (name === 'retry-after') this.#retryAfter = true;
      else if (name === 'connection') this.#closeAfter = /close/i.test(value);
      else if (name === 'server-timing') info.serverTiming = info.serverTiming === undefined ? value : `${info.serverTiming}, ${value}`;
    }
    if (this.#status === 204 || this.#status === 304) {
      this.#mode = 'length'; // no body, whatever the headers say
      this.#remaining = 0;
    } else if (chunked) this.#mode = 'chunk-size';
    else if (length !== undefined && Number.isFinite(length)) {
      this.#mode = 'length';
      this.#remaining = length;
    } else this.#mode = 'close';
  }
}

/**
 * The generator's HTTP client: raw keep-alive connections (at most `maxOutstanding`), one shared read
 * buffer (no allocation per response chunk), request heads built once per request kind. It is several
 * times cheaper in CPU than node:http, which matters when it shares the machine with the server.
 */
export class Client {
  /** Idle connections per instance (one list unless the target has several URLs). */
  readonly #idleOf: Connection[][];
  readonly #urls: URL[];
  #turn = 0;
  readonly #all = new Set<Connection>();
  readonly #heads = new WeakMap<PreparedRequest, Buffer>();
  readonly #readBuffer = Buffer.allocUnsafe(256 * 1024);

  constructor(
    readonly target: Target,
    readonly maxOutstanding: number,
  ) {
    this.#urls = target.urls && target.urls.length > 0 ? target.urls : [target.url];
    this.#idleOf = this.#urls.map(() => []);
  }

  #head(req: PreparedRequest): Buffer {
    let head = this.#heads.get(req);
    if (!head) {
      const lines = [`POST ${req.path} HTTP/1.1`, `Host: ${this.target.url.host}`, `Content-Type: ${req.contentType}`, `Content-Length: ${req.body.length}`];
      if (this.target.key) lines.push(`Authorization: Bearer ${this.target.key}`);
      head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
      this.#heads.set(req, head);
    }
    return head;
  }

  #connection(): Connection {
    const now = performance.now();
    const turn = this.#turn;
    this.#turn = (turn + 1) % this.#urls.length;
    const idle = this.#idleOf[turn]!;
    for (;;) {
      const c = idle.pop();
      if (!c) break;
      if (!c.socket.destroyed && now - c.idleSince < IDLE_REUSE_MS) return c;
      this.#all.delete(c);
      c.socket.destroy();
    }
    const c = new Connection(
      this.#urls[turn]!,
      this.#readBuffer,
      (free) => idle.push(free),
      (gone) => {
        this.#all.delete(gone);
        const i = idle.indexOf(gone);
        if (i >= 0) idle.splice(i, 1);
      },
    );
    this.#all.add(c);
    return c;
  }

  /** Sends one request; resolves (never rejects) with what happened. `t0` is the step's time zero. */
  send(req: PreparedRequest, kind: number, scheduledAt: number, t0: number, timeoutMs: number): Promise<Outcome> {
    const sentAt = performance.now();
    return new Promise((resolve) => {
      const conn = this.#connection();
      const timer = setTimeout(() => conn.socket.destroy(), timeoutMs);
      const pending: Pending = {
        written: false,
        finish: (status, bytesIn, retryAfter, head) => {
          clearTimeout(timer);
          const now = performance.now();
          const outcome: Outcome = {
            status,
            latencyMs: now - (t0 + scheduledAt),
            lagMs: sentAt - (t0 + scheduledAt),
            doneAt: now - t0,
            bytesOut: req.body.length,
            bytesIn,
            retryAfter,
            kind,
          };
          if (head) {
            outcome.headMs = head.at - (t0 + scheduledAt);
            if (head.serverTiming !== undefined) outcome.phases = parseServerTiming(head.serverTiming);
          }
          resolve(outcome);
        },
      };
      conn.send(this.#head(req), req.body, pending);
    });
  }

  /** Drops every connection (requests still out fail with a transport error). */
  reset(): void {
    for (const c of [...this.#all]) c.socket.destroy();
    this.#all.clear();
    for (const idle of this.#idleOf) idle.length = 0;
  }

  close(): void {
    this.reset();
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
  /**
   * Seconds of load at the same rate and arrivals before the measured window, whose answers are not
   * recorded: the server's connections, socket buffers and memory reach the steady state of this rate
   * first, so the step measures that state rather than the ramp into it. 0 = none.
   */
  warmupMs?: number;
  /** Called when the first measured request is due (after the warm-up): start the step's meters here. */
  onMeasureStart?: () => void;
}

export interface StepRun {
  outcomes: Outcome[];
  /** ms from time zero until the last request finished (or the drain deadline). */
  elapsedMs: number;
  scheduled: number;
}

/**
 * Start offsets (ms) of `count` requests at `rate` per second over `count / rate` seconds: evenly spaced,
 * or Poisson. A Poisson process conditioned on `count` arrivals in a window places them as that many
 * sorted uniform points in it, so the window's length and count are exact (a step's offered rate is the
 * rate it names) while the gaps keep their exponential spread.
 */
export function arrivalTimes(count: number, rate: number, arrivals: StepPlan['arrivals'], seed: number): Float64Array {
  const out = new Float64Array(count);
  const gap = 1000 / rate;
  if (arrivals === 'uniform') {
    for (let i = 0; i < count; i++) out[i] = i * gap;
  } else {
    const rand = prng(seed);
    for (let i = 0; i < count; i++) out[i] = rand() * count * gap;
    out.sort();
  }
  return out;
}

/**
 * Runs one open-loop step. `pick(i)` chooses which prepared request the i-th start sends (its index in
 * `requests` is kept as the outcome's kind).
 */
export async function openLoop(client: Client, requests: readonly PreparedRequest[], pick: (i: number) => number, plan: StepPlan): Promise<StepRun> {
  // One schedule for warm-up and measured window, so the arrivals run on without a seam between them;
  // the measured window holds exactly rate x duration requests (as a step without warm-up does), the
  // warm-up the ones before it.
  const measuredFrom = Math.round((plan.rate * Math.max(0, plan.warmupMs ?? 0)) / 1000);
  const warm = arrivalTimes(measuredFrom, plan.rate, plan.arrivals, plan.seed + 0x5eed);
  const window = arrivalTimes(Math.max(1, Math.round((plan.rate * plan.durationMs) / 1000)), plan.rate, plan.arrivals, plan.seed);
  const starts = new Float64Array(warm.length + window.length);
  starts.set(warm);
  const offset = (measuredFrom * 1000) / plan.rate; // the warm-up's span
  for (let i = 0; i < window.length; i++) starts[warm.length + i] = offset + window[i]!;
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
    if (i === measuredFrom) plan.onMeasureStart?.();
    const kind = pick(i);
    if (outstanding >= client.maxOutstanding) {
      settle(i, {
        status: -1,
        latencyMs: 0,
        lagMs: performance.now() - (t0 + starts[i]!),
        doneAt: starts[i]!,
        bytesOut: 0,
        bytesIn: 0,
        retryAfter: false,
        kind,
      });
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
    client.reset();
  }
  // The measured window: its outcomes, with times from its own start.
  const measured = outcomes.slice(measuredFrom);
  let last = 0;
  for (const o of measured) {
    o.doneAt -= offset;
    if (o.doneAt > last) last = o.doneAt;
  }
  return { outcomes: measured, elapsedMs: last, scheduled: measured.length };
}

/** Closed loop: `concurrency` requests always in flight, `count` in all; returns completions per second. */
export async function closedLoop(
  client: Client,
  requests: readonly PreparedRequest[],
  pick: (i: number) => number,
  count: number,
  concurrency: number,
  timeoutMs: number,
): Promise<{ perSecond: number; outcomes: Outcome[] }> {
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
