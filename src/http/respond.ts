/**
 * Writing answers through uWS: corked, once, never after an abort. Large bodies go out with tryEnd and
 * onWritable, so a slow reader costs the socket buffer, not a second copy of the body.
 */
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { defaultMessage, type ErrorCode } from '../errors.js';
import { OVERLOAD_RETRY_AFTER_SECONDS, STATUS_OF, statusLine } from './errors.js';
import { requestId } from './filename.js';

export type Headers = Record<string, string>;

export interface SendOptions {
  /** Close the connection once the (small) answer is written, instead of reading the rest of the request. */
  closeConnection?: boolean;
}

/**
 * An answer whose last byte waits (Exchange.hold): every byte but the last is with the socket. The quota
 * unit of a 200 is committed in between, and the last byte goes the instant the commit is on its way to
 * the store, so that a crash at any moment either charges a unit whose answer is complete, or gives it
 * back with the answer cut short.
 */
export interface HeldAnswer {
  /** Sends the last byte; resolves true once the whole answer is with the socket, false when the client left first. */
  release(): Promise<boolean>;
  /** Cuts the answer short: the connection closes, and the client has no complete answer. */
  cut(): void;
}

/** The state of one exchange: uWS forbids touching `res` after an abort or after the answer. */
export class Exchange {
  aborted = false;
  answered = false;
  /** Body bytes handed to uWS. */
  sent = 0;
  status = 0;
  /**
   * The request is HEAD (RFC 9110 9.3.2): the answer is the one GET gets, its Content-Length included,
   * without the body.
   */
  headOnly = false;
  readonly #onAbort: Array<() => void> = [];

  constructor(
    readonly res: HttpResponse,
    readonly id: string,
    readonly route: string,
    readonly started: bigint,
  ) {
    res.onAborted(() => {
      this.aborted = true;
      for (const f of this.#onAbort.splice(0)) f();
    });
  }

  onAbort(f: () => void): void {
    if (this.aborted) f();
    else this.#onAbort.push(f);
  }

  /**
   * Sends status, headers and body. Resolves true when the whole body was handed to the socket, false
   * when the client went away first.
   */
  send(status: number, headers: Headers, body: Uint8Array | string, options: SendOptions = {}): Promise<boolean> {
    return this.#open(status, headers, body, options.closeConnection === true, false)?.whole ?? Promise.resolve(false);
  }

  /** Sends status, headers and every byte of the body but the last (see HeldAnswer); undefined when the client went away first. */
  async hold(status: number, headers: Headers, body: Uint8Array): Promise<HeldAnswer | undefined> {
    const out = this.#open(status, headers, body, false, true);
    if (!out || !(await out.allButLast)) return undefined;
    return { release: out.release, cut: () => this.close() };
  }

  /**
   * Starts the answer: the bytes up to the last (with `holdLast`) or all of them go out, with tryEnd and
   * onWritable for backpressure. `allButLast` resolves once the bytes allowed so far are with the socket,
   * `whole` once the answer is; `release` lets the held last byte go.
   */
  #open(
    status: number,
    headers: Headers,
    body: Uint8Array | string,
    closeConnection: boolean,
    holdLast: boolean,
  ): { allButLast: Promise<boolean>; whole: Promise<boolean>; release: () => Promise<boolean> } | undefined {
    if (this.aborted || this.answered) return undefined;
    this.answered = true;
    this.status = status;
    const res = this.res;
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    const total = bytes.length;
    let reached!: (ok: boolean) => void;
    let finished!: (ok: boolean) => void;
    const allButLast = new Promise<boolean>((r) => (reached = r));
    const whole = new Promise<boolean>((r) => (finished = r));
    this.onAbort(() => {
      reached(false);
      finished(false);
    });
    // Bytes that may go now.
    let limit = holdLast && total > 0 ? total - 1 : total;
    let start = 0;
    // Offers the bytes up to `limit`; true when they are all with the socket (or the answer is done).
    const pump = (): boolean => {
      const [ok, done] = res.tryEnd(bytes.subarray(res.getWriteOffset() - start, limit), total);
      if (done || (ok && limit === total)) {
        this.sent = total;
        finished(true);
      }
      if (ok || done) reached(true);
      return ok || done;
    };
    const writable = (): boolean => (this.aborted ? true : pump());
    const release = (): Promise<boolean> => {
      if (limit < total && !this.aborted) {
        limit = total;
        res.cork(() => {
          if (!pump()) res.onWritable(writable);
        });
      }
      return whole;
    };
    res.cork(() => {
      res.writeStatus(statusLine(status));
      res.writeHeader('X-Request-ID', this.id);
      for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
      if (this.headOnly || closeConnection) {
        // With closeConnection, uWS writes `Connection: close`, sends the answer, then shuts the socket down
        // (FIN) and closes it: a client still sending is not read any further.
        if (this.headOnly) res.endWithoutBody(total, closeConnection);
        else res.end(bytes, true);
        if (!this.headOnly) this.sent = total;
        reached(true);
        finished(true);
        return;
      }
      start = res.getWriteOffset();
      if (holdLast && total === 0) return reached(true);
      if (!pump()) res.onWritable(writable);
    });
    return { allButLast, whole, release };
  }

  /** Sends a JSON body. */
  json(status: number, body: Uint8Array | string, headers: Headers = {}, options: SendOptions = {}): Promise<boolean> {
    return this.send(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers }, body, options);
  }

  /** Sends the `{error, code}` body of a failure with its status (and Retry-After when overloaded). */
  error(code: ErrorCode, message?: string, headers: Headers = {}, options: SendOptions = {}): Promise<boolean> {
    const status = STATUS_OF[code];
    const extra: Headers = { ...headers };
    if (status === 503 && !extra['Retry-After']) extra['Retry-After'] = String(OVERLOAD_RETRY_AFTER_SECONDS);
    return this.json(status, JSON.stringify({ error: message ?? defaultMessage(code), code }), extra, options);
  }

  /** Forcefully closes the connection (used when a client keeps sending far past a refusal). */
  close(): void {
    if (!this.aborted) {
      this.aborted = true;
      this.res.close();
    }
  }
}

/** The exchange of a request that carries no body to read (its id from X-Request-ID or a fresh one; HEAD answered without a body). */
export function exchangeOf(res: HttpResponse, req: HttpRequest, route: string): Exchange {
  const ex = new Exchange(res, requestId(req.getHeader('x-request-id'), randomUUID), route, process.hrtime.bigint());
  ex.headOnly = req.getMethod() === 'head';
  return ex;
}

/**
 * Routes GET and HEAD of `path` to one handler (RFC 9110 9.1: a server supports HEAD wherever it
 * supports GET); its exchange, made with exchangeOf, leaves the body out for HEAD.
 */
export function getAndHead(app: TemplatedApp, path: string, handler: (res: HttpResponse, req: HttpRequest) => void): void {
  app.get(path, handler);
  app.head(path, handler);
}
