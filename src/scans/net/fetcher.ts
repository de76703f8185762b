/**
 * The one HTTP client of scans (docs/scans.md, "The crawler's manners"). Every request:
 *
 *   robots.txt of the origin (fetched once, bounded) allows it for our agent, else robots_disallowed
 *   ── a slot of the host (limits.perHostConcurrency, limits.perHostDelayMs between starts)
 *   ── the name resolved and every address checked (./address.ts); the socket's peer checked again on
 *      connect, before a byte is written; a keep-alive socket only reused for the same origin and
 *      checked address (./pool.ts)
 *   ── connect, headers and body time limits (the body's counts only time spent waiting on the network,
 *      not time the consumer held the stream back); redirects followed by hand, each hop checked again
 *   ── the body decompressed (gzip, deflate, br) within the response's byte limit, and every byte read
 *      off the wire counted against the scan's budget (limits.maxBytes)
 */
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { PassThrough, type Readable, Transform } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import zlib from 'node:zlib';
import { type Fetcher, type FetchOptions, type FetchResult, type FetchStream, ScanError, type ScanContext, type ScanLimits } from '../types.js';
import type { AddressPolicy } from './address.js';
import { parseRobots, type Robots } from './robots.js';
import { OriginSignals } from '../served.js';
import { AgentPool } from './pool.js';

/** The crawler's agent; its product token (`optmark-scan`) is what robots.txt groups name. */
export const USER_AGENT = 'optmark-scan/0.1 (+https://github.com/optmark/optmark/blob/main/docs/scans.md)';
export const AGENT_TOKEN = 'optmark-scan';
/** robots.txt, ai.txt and tdmrep.json are read up to this many bytes. */
export const MAX_SITE_FILE_BYTES = 512 * 1024;

export interface FetcherOptions {
  limits: ScanLimits;
  policy: AddressPolicy;
  signal: AbortSignal;
  skipped?: ScanContext['skipped'];
  userAgent?: string;
}

interface Host {
  active: number;
  waiting: (() => void)[];
  lastStart: number;
}

export function createFetcher(o: FetcherOptions): Fetcher {
  return new ScanFetcher(o);
}

class ScanFetcher implements Fetcher {
  bytes = 0;
  readonly #o: FetcherOptions;
  readonly #hosts = new Map<string, Host>();
  readonly #robots = new Map<string, Promise<Robots | undefined>>();
  readonly #origins: OriginSignals;
  readonly #pool: AgentPool;

  constructor(o: FetcherOptions) {
    this.#o = o;
    this.#origins = new OriginSignals((url) => this.#siteFile(url));
    this.#pool = new AgentPool(o.limits.perHostConcurrency);
  }

  close(): void {
    this.#pool.close();
  }

  async get(url: string, options: FetchOptions): Promise<FetchResult> {
    const r = await this.stream(url, options);
    return { url: r.url, status: r.status, headers: r.headers, body: await buffer(r.body) };
  }

  async stream(url: string, options: FetchOptions): Promise<FetchStream> {
    let at = parseHttpUrl(url);
    for (let hop = 0; ; hop++) {
      if (!options.ignoreRobots && !(await this.#allowedByRobots(at))) {
        this.#o.skipped?.(at.href, 'robots_disallowed', `robots.txt of ${at.origin} disallows ${at.pathname} for ${AGENT_TOKEN}`);
        throw new ScanError('robots_disallowed', `robots.txt of ${at.origin} disallows ${at.pathname} for ${AGENT_TOKEN}`);
      }
      const res = await this.#request(at);
      const location = res.statusCode !== undefined && res.statusCode >= 300 && res.statusCode < 400 ? res.headers.location : undefined;
      if (location === undefined) return this.#answer(at, res, options.maxBytes);
      res.resume();
      if (hop >= this.#o.limits.maxRedirects) throw new ScanError('too_many_redirects', `${url}: more than ${this.#o.limits.maxRedirects} redirects`);
      let next: URL;
      try {
        next = new URL(location, at);
      } catch {
        throw new ScanError('fetch_failed', `${at.href} redirects to an unusable Location: ${JSON.stringify(location).slice(0, 200)}`);
      }
      if (next.protocol !== 'http:' && next.protocol !== 'https:')
        throw new ScanError('target_not_allowed', `${at.href} redirects to ${next.protocol} (only http and https)`);
      at = next;
    }
  }

  servedSignals(url: string, headers: Record<string, string>): Promise<string[]> {
    return this.#origins.signals(new URL(url), headers);
  }

  /** A site file (robots.txt, ai.txt, tdmrep.json): its text, or undefined for none (any failure). */
  async #siteFile(url: URL): Promise<string | undefined> {
    try {
      const r = await this.get(url.href, { maxBytes: MAX_SITE_FILE_BYTES, ignoreRobots: true });
      return r.status >= 200 && r.status < 300 ? Buffer.from(r.body).toString('utf8') : undefined;
    } catch (err) {
      // A refused address or a spent budget is the scan's failure, not a missing file.
      if (err instanceof ScanError && (err.code === 'target_not_allowed' || err.code === 'budget_exceeded')) throw err;
      return undefined;
    }
  }

  async #allowedByRobots(url: URL): Promise<boolean> {
    let robots = this.#robots.get(url.origin);
    if (!robots) {
      const file = new URL('/robots.txt', url);
      robots = this.#siteFile(file).then((text) => (text === undefined ? undefined : parseRobots(file.href, text)));
      this.#robots.set(url.origin, robots);
    }
    const r = await robots;
    return r === undefined || r.isAllowed(url.href, AGENT_TOKEN) !== false;
  }

  async #slot(host: string): Promise<() => void> {
    let h = this.#hosts.get(host);
    if (!h) {
      h = { active: 0, waiting: [], lastStart: 0 };
      this.#hosts.set(host, h);
    }
    const hh = h;
    while (hh.active >= Math.max(1, this.#o.limits.perHostConcurrency)) await new Promise<void>((r) => hh.waiting.push(r));
    hh.active++;
    const wait = hh.lastStart + this.#o.limits.perHostDelayMs - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    hh.lastStart = Date.now();
    return () => {
      hh.active--;
      hh.waiting.shift()?.();
    };
  }

  async #request(url: URL): Promise<http.IncomingMessage> {
    const { policy, signal } = this.#o;
    if (signal.aborted) throw new ScanError('fetch_failed', 'the scan was stopped');
    const checked = await policy.resolve(url.hostname);
    const release = await this.#slot(url.host);
    try {
      return await this.#send(url, checked, release, true);
    } catch (err) {
      // A kept-alive socket the server closed as it was reused: once more (a GET), and only once.
      if (!(err instanceof StaleSocket)) throw err;
      return this.#send(url, checked, release, false);
    }
  }

  /**
   * One GET to the checked address; `release` frees the host's slot when the answer is done or failed
   * (not on a StaleSocket, which `mayRetry` allows: the retry holds the slot on).
   */
  #send(url: URL, { address, family }: { address: string; family: 4 | 6 }, release: () => void, mayRetry: boolean): Promise<http.IncomingMessage> {
    const { limits, policy, signal } = this.#o;
    const client = url.protocol === 'https:' ? https : http;
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        if (!(err instanceof StaleSocket)) release();
        req.destroy();
        reject(err);
      };
      const req = client.request(url, {
        method: 'GET',
        headers: { 'User-Agent': this.#o.userAgent ?? USER_AGENT, 'Accept-Encoding': 'gzip, deflate, br', Accept: '*/*' },
        // The address checked above, never a second lookup (a resolver that answers otherwise the second time).
        lookup: (_host, opts, cb) => (opts.all ? cb(null, [{ address, family }]) : cb(null, address, family)),
        agent: this.#pool.agent(url, address),
        signal,
      });
      const connectTimer = setTimeout(
        () => fail(new ScanError('timeout', `${url.host}: no connection within ${limits.connectTimeoutMs} ms`)),
        limits.connectTimeoutMs,
      );
      const headersTimer = setTimeout(
        () => fail(new ScanError('timeout', `${url.href}: no answer headers within ${limits.headersTimeoutMs} ms`)),
        limits.headersTimeoutMs,
      );
      // The peer actually connected, before any byte of the request is written ('socket' comes before the
      // request is flushed; a new socket's pending write waits for 'connect', after this listener).
      const checkPeer = (socket: Socket): void => {
        clearTimeout(connectTimer);
        const peer = socket.remoteAddress ?? '';
        if (!policy.allows(peer)) fail(new ScanError('target_not_allowed', `${url.host} connected to ${peer}, an address scans may not reach`));
      };
      req.on('socket', (socket: Socket) => {
        // A pooled socket connected (and was checked) for this origin and address before; checked again all the same.
        if (req.reusedSocket && !socket.connecting) checkPeer(socket);
        else socket.once('connect', () => checkPeer(socket));
      });
      req.on('response', (res) => {
        clearTimeout(connectTimer);
        clearTimeout(headersTimer);
        if (settled) {
          res.destroy();
          return;
        }
        settled = true;
        res.once('close', release);
        resolve(res);
      });
      req.on('error', (err) => {
        clearTimeout(connectTimer);
        clearTimeout(headersTimer);
        const code = (err as NodeJS.ErrnoException).code;
        if (mayRetry && req.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE')) return fail(new StaleSocket());
        fail(err instanceof ScanError ? err : new ScanError('fetch_failed', `${url.href}: ${code ?? err.message}`));
      });
      req.end();
    });
  }

  /** The answer with its body decompressed and bounded, as one stream. */
  #answer(url: URL, res: http.IncomingMessage, maxBytes: number): FetchStream {
    const { limits } = this.#o;
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    const wire = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        this.bytes += chunk.length;
        if (this.bytes > limits.maxBytes) return done(new ScanError('budget_exceeded', `the scan read more than its ${limits.maxBytes} bytes`));
        done(null, chunk);
      },
    });
    const encoding = (headers['content-encoding'] ?? '').trim().toLowerCase();
    const inflate: Transform | undefined =
      encoding === 'gzip' || encoding === 'x-gzip'
        ? zlib.createGunzip()
        : encoding === 'deflate'
          ? zlib.createInflate()
          : encoding === 'br'
            ? zlib.createBrotliDecompress()
            : undefined;
    let seen = 0;
    const bounded = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        seen += chunk.length;
        if (seen > maxBytes) return done(new ScanError('too_large', `${url.href}: more than ${maxBytes} bytes`));
        done(null, chunk);
      },
    });
    const out = new PassThrough();
    const clock = new NetworkClock(limits.bodyTimeoutMs, () =>
      out.destroy(new ScanError('timeout', `${url.href}: the body did not end within ${limits.bodyTimeoutMs} ms of waiting on the network`)),
    );
    const stages: (Readable | Transform)[] = [res, wire, ...(inflate ? [inflate] : []), bounded];
    // The answer's own hop by hand, so the clock stops exactly while the consumer holds the body back.
    res.on('data', (chunk: Buffer) => {
      if (wire.write(chunk)) return;
      clock.hold();
      res.pause();
      wire.once('drain', () => {
        clock.run();
        res.resume();
      });
    });
    res.once('end', () => {
      clock.stop();
      wire.end();
    });
    for (let i = 1; i < stages.length - 1; i++) (stages[i] as Readable).pipe(stages[i + 1] as Transform);
    bounded.pipe(out);
    clock.run();
    const stop = (err?: Error) => {
      clock.stop();
      for (const s of stages) s.destroy();
      if (err && !out.destroyed) out.destroy(err instanceof ScanError ? err : new ScanError('fetch_failed', `${url.href}: ${err.message}`));
    };
    for (const s of stages) s.once('error', stop);
    out.once('close', () => stop());
    return { url: url.href, status: res.statusCode ?? 0, headers, body: out };
  }
}

/** A kept-alive socket that failed as it was reused, before any answer: the request is sent once more. */
class StaleSocket extends Error {}

/**
 * The body's time limit, counted only while the body flows (the fetcher is waiting on the network): held
 * while the consumer presses back, so a slow reader never times out a fast server, while a server that
 * stalls, or trickles a byte now and then, spends the budget.
 */
class NetworkClock {
  #spent = 0;
  #since: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    readonly budgetMs: number,
    readonly onSpent: () => void,
  ) {}

  run(): void {
    if (this.#stopped || this.#since !== undefined) return;
    this.#since = performance.now();
    this.#timer = setTimeout(this.onSpent, Math.max(0, this.budgetMs - this.#spent));
  }

  hold(): void {
    if (this.#since === undefined) return;
    this.#spent += performance.now() - this.#since;
    this.#since = undefined;
    clearTimeout(this.#timer);
  }

  stop(): void {
    this.hold();
    this.#stopped = true;
  }
}

function parseHttpUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ScanError('invalid_source', `not a URL: ${JSON.stringify(raw).slice(0, 200)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ScanError('target_not_allowed', `${url.protocol} URLs are not fetched (only http and https)`);
  return url;
}
