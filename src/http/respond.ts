/**
 * Writing answers through uWS: corked, once, never after an abort. Large bodies go out with tryEnd and
 * onWritable, so a slow reader costs the socket buffer, not a second copy of the body.
 */
import type { HttpResponse } from 'uWebSockets.js';
import { defaultMessage, type ErrorCode } from '../errors.js';
import { OVERLOAD_RETRY_AFTER_SECONDS, STATUS_OF, statusLine } from './errors.js';

export type Headers = Record<string, string>;

export interface SendOptions {
  /** Close the connection once the (small) answer is written, instead of reading the rest of the request. */
  closeConnection?: boolean;
}

/** The state of one exchange: uWS forbids touching `res` after an abort or after the answer. */
export class Exchange {
  aborted = false;
  answered = false;
  /** Body bytes handed to uWS. */
  sent = 0;
  status = 0;
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
    if (this.aborted || this.answered) return Promise.resolve(false);
    this.answered = true;
    this.status = status;
    const res = this.res;
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    const total = bytes.length;
    return new Promise((resolve) => {
      this.onAbort(() => resolve(false));
      res.cork(() => {
        res.writeStatus(statusLine(status));
        res.writeHeader('X-Request-ID', this.id);
        for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
        if (options.closeConnection) {
          // uWS writes `Connection: close`, sends the answer, then shuts the socket down (FIN) and closes it:
          // a client still sending is not read any further.
          res.end(bytes, true);
          this.sent = total;
          resolve(true);
          return;
        }
        const start = res.getWriteOffset();
        const [ok, done] = res.tryEnd(bytes, total);
        if (done) {
          this.sent = total;
          resolve(true);
          return;
        }
        if (ok) return; // everything buffered; uWS finishes on its own
        res.onWritable((offset) => {
          if (this.aborted) return true;
          const [ok2, done2] = res.tryEnd(bytes.subarray(offset - start), total);
          if (done2) {
            this.sent = total;
            resolve(true);
          }
          return ok2;
        });
      });
    });
  }

  /**
   * Sends status, headers and the body but its last byte; once uWS has taken those, runs `gate(finish)`,
   * which calls `finish()` to send the last byte. The API's gate is the quota commit: `finish` runs the
   * moment the commit is on its way to the store, so that an answer is whole only with its unit counted
   * (src/http/api.ts). A gate that throws before `finish` closes the connection (the client gets an answer
   * cut short, never a whole one) and the error is thrown on. Resolves true when the whole body was
   * handed to the socket, false when the client went away first (the gate is then not run at all when
   * that happened before it).
   */
  async sendGated(status: number, headers: Headers, body: Uint8Array, gate: (finish: () => void) => Promise<void>): Promise<boolean> {
    if (this.aborted || this.answered) return false;
    this.answered = true;
    this.status = status;
    const res = this.res;
    const total = body.length;
    const head = body.subarray(0, Math.max(0, total - 1));
    const headSent = await new Promise<boolean>((resolve) => {
      this.onAbort(() => resolve(false));
      res.cork(() => {
        res.writeStatus(statusLine(status));
        res.writeHeader('X-Request-ID', this.id);
        for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
        const start = res.getWriteOffset();
        if (res.tryEnd(head, total)[0]) return resolve(true);
        res.onWritable((offset) => {
          if (this.aborted) return true;
          const ok = res.tryEnd(head.subarray(offset - start), total)[0];
          if (ok) resolve(true);
          return ok;
        });
      });
    });
    if (!headSent || this.aborted) return false;
    this.sent = head.length;
    let finished: Promise<boolean> | undefined;
    const finish = (): void => {
      finished ??= new Promise<boolean>((resolve) => {
        if (this.aborted) return resolve(false);
        this.onAbort(() => resolve(false));
        res.cork(() => {
          const tail = body.subarray(head.length);
          const start = res.getWriteOffset();
          const [ok, done] = res.tryEnd(tail, total);
          if (done) {
            this.sent = total;
            return resolve(true);
          }
          if (ok) return;
          res.onWritable((offset) => {
            if (this.aborted) return true;
            const [ok2, done2] = res.tryEnd(tail.subarray(offset - start), total);
            if (done2) {
              this.sent = total;
              resolve(true);
            }
            return ok2;
          });
        });
      });
    };
    try {
      await gate(finish);
    } catch (err) {
      if (!finished) this.close();
      throw err;
    }
    if (!finished) {
      this.close();
      return false;
    }
    return finished;
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
