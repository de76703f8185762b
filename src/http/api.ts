/**
 * POST /api/v1/protect and /api/v1/verify, one request in four steps:
 *
 *   admit    from the headers alone: the key, the Content-Type and Content-Length, room in the queue, a
 *            quota unit and a memory lease (src/transfer/); a refusal goes out before a byte of body is read
 *   receive  the body's chunks, copied into the lease
 *   process  a worker parses the form and builds the answer (for protect, into the lease)
 *   respond  the answer, with backpressure
 *
 * and one place, `finish`, that releases the lease whatever happened. The store is asynchronous (SQLite or
 * PostgreSQL, src/store/): body bytes that arrive while the request is being admitted are held (the
 * socket is paused, at most MAX_EARLY_BYTES are kept). The quota unit is counted when it is reserved and
 * held by this instance; the hold is taken off (the unit kept) when every byte of a 200 but the last is
 * with the socket, and the last byte goes after that commit. The unit is given back when the answer was
 * not delivered or anything failed; a crash before the commit leaves the hold to a reconciliation, which
 * gives it back (the client has no complete answer). No client ever gets a complete 200 for a unit that
 * was given back, and a unit is charged for an answer that never arrived only if the process dies
 * between the commit (SQLite: done; PostgreSQL: its statement written to the connection) and the write
 * of the last byte (docs/scaling.md).
 *
 * That window is closed for clients that send an Idempotency-Key (./idempotency.ts) and retry with it: the
 * key is reserved with the unit and committed, with the SHA-256 of the uploaded image (the worker's), in
 * the commit's own statement. A retry whose key is committed takes no unit and is processed again
 * (`Idempotent-Replayed: true`, the same bytes: protect and verify are deterministic), its RateLimit headers
 * the counter as it is; a key still held is 409 with Retry-After; another image or operation under the key
 * is 422 (docs/quotas.md "Retries"). Without the header the flow is unchanged: no extra store call.
 */
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { MULTIPART_SLACK_BYTES } from '../config.js';
import { OptmarkError, toErrorShape } from '../errors.js';
import type { Logger } from '../log.js';
import { checkContentType } from '../pipeline/form-type.js';
import { EarlyBody } from './early.js';
import { IDEMPOTENCY_RETRY_AFTER_SECONDS, parseIdempotencyKey } from './idempotency.js';
import { PoolOverloadedError, type ImagePool } from '../pool/pool.js';
import type { AnswerResult, Task } from '../pool/tasks.js';
import {
  isStoreUnavailable,
  rateLimitHeaders,
  resetInstantOf,
  utcMinuteText,
  wwwAuthenticate,
  type Account,
  type IdempotentRequest,
  type Operation,
  type PriorRequest,
  type QuotaState,
  type Reservation,
  type Store,
} from '../store/index.js';
import { type BytesRef, type Lease, type Transfer, TransferFullError } from '../transfer/index.js';
import { requestId } from './filename.js';
import type { Metrics } from './metrics.js';
import { Exchange, type Headers } from './respond.js';
import { Phases } from './timing.js';
import type { ArrivalWatch, Uploads, UploadTooSlowError } from './uploads.js';

/** Requests in progress, for graceful shutdown. */
export interface InFlight {
  begin(): void;
  end(): void;
}

export interface ApiDeps {
  store: Store;
  pool: ImagePool;
  transfer: Transfer;
  metrics: Metrics;
  log: Logger;
  maxUploadBytes: number;
  inflight: InFlight;
  /** Arriving bodies: per-client shares and the rate floor. */
  uploads: Uploads;
}

/**
 * What a route built on this flow adds to it (the dashboard's mark, src/http/dashboard.ts): a check after
 * authentication, its own worker task, and what to do with the answer. The flow stays this one: the same
 * admission, limits, quota unit, request memory, error codes and settling.
 */
export interface ApiExtension {
  /** The route's name in metrics and logs. */
  route: string;
  /** The route takes an Idempotency-Key (its answer may be built again for a retry without harm). */
  idempotent?: boolean;
  /** Called once the key is known good, before the quota unit is taken; rejects with an OptmarkError to refuse. */
  admit(auth: { account: Account; keyId: number }): Promise<ExtensionRequest>;
}

export interface ExtensionRequest {
  /** The worker task for the received body (the operation's own task when absent). */
  task?(input: BytesRef, contentType: string): Task;
  /**
   * The worker's answer, before it is sent: store what must exist when the client reads it, and return
   * the body to send (`body`, or one with fields added). Reject to fail the request.
   */
  answered(result: AnswerResult, body: Uint8Array): Promise<Uint8Array>;
  /** Called once when the request ends: true when the answer reached the client. */
  settle(delivered: boolean): Promise<void>;
}

/** What the handler reads from the request's headers (uWS's HttpRequest lives only during the handler call). */
interface Head {
  id: string;
  /** The client's address, as uWS gives it (the proxy's, behind one). */
  address: string;
  authorization: string;
  contentType: string;
  contentLength: string;
  /** verify's `?fingerprint=` ('' when absent; `skip` leaves the pixel detector out). */
  fingerprint: string;
  /** protect: answer the marked bytes themselves (the Accept header prefers an image type to JSON). */
  raw: boolean;
  /** The Idempotency-Key header, unparsed ('' when absent). */
  idempotencyKey: string;
}

const JSON_RANGES = new Set(['application/json', 'application/*', '*/*']);
const IMAGE_RANGES = new Set(['image/*', 'image/jpeg', 'image/png', 'image/webp']);

/**
 * True when an Accept header prefers the image itself to JSON: an image range (`image/*` or the
 * JPEG/PNG/WebP types) with a higher q than any JSON range (`application/json`, `application/*`,
 * `*\/*`). No header, or a tie, keeps JSON, the contract's default.
 */
export function prefersImage(accept: string): boolean {
  let image = 0;
  let json = 0;
  for (const part of accept.slice(0, 1024).split(',')) {
    const [range, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (!range) continue;
    let q = 1;
    for (const p of params) if (p.startsWith('q=')) q = Number.parseFloat(p.slice(2)) || 0;
    if (IMAGE_RANGES.has(range)) image = Math.max(image, q);
    else if (JSON_RANGES.has(range)) json = Math.max(json, q);
  }
  return image > 0 && image > json;
}

/**
 * One query parameter ('' when absent). uWS's fallback transport (node:http) cannot answer getQuery
 * (it parses a relative URL as absolute and throws), but its getUrl keeps the query string.
 */
function queryParam(req: HttpRequest, key: string): string {
  try {
    return req.getQuery(key) ?? '';
  } catch {
    const url = req.getUrl();
    const q = url.indexOf('?');
    return q < 0 ? '' : (new URLSearchParams(url.slice(q + 1)).get(key) ?? '');
  }
}

function parseLength(raw: string): number | undefined | 'invalid' {
  if (raw === '') return undefined;
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 'invalid';
}

/**
 * A store call that timed out waiting for SQLite's write lock (busy_timeout), or a PostgreSQL store that
 * cannot answer (down, slower than its statement timeout, out of connections) or that reclaimed this
 * instance's hold, means the server cannot serve now (503 + Retry-After), not that it is broken (500).
 * No unit is ever granted without its reservation written.
 */
function busyAsOverload(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code))
    return new OptmarkError('overloaded', 'The account store is busy; retry shortly.', { cause: err });
  if (isStoreUnavailable(err)) return new OptmarkError('overloaded', 'The account store is unavailable; retry shortly.', { cause: err });
  return err;
}

/** Body bytes kept while a request is being admitted (the socket is paused; one receive buffer at most, normally). */
const MAX_EARLY_BYTES = 4 * 1024 * 1024;

/** 429: the account's monthly units are used up until the month turns (Retry-After, in seconds). */
class QuotaExceededError extends OptmarkError {
  constructor(
    message: string,
    readonly retryAfter: number,
    readonly state: QuotaState,
  ) {
    super('quota_exceeded', message);
  }
}

/** 409: the key's first attempt still holds its unit (Retry-After, in seconds). */
class KeyInUseError extends OptmarkError {
  readonly retryAfter = IDEMPOTENCY_RETRY_AFTER_SECONDS;
  constructor(readonly state: QuotaState) {
    super(
      'idempotency_key_in_use',
      'A request with this Idempotency-Key is still in progress (or its instance stopped and its unit is not yet given back); retry with the same key shortly.',
    );
  }
}

/** The client went away before its body arrived. */
class ClientGoneError extends Error {}

/** The client's address as text; the uWS JS fallback has no address (it throws "Not implemented"), so all its clients share one. */
function remoteAddress(res: HttpResponse): string {
  try {
    return Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
  } catch {
    return 'unknown';
  }
}

/** Handles one API request; the uWS handler returns right after this sets up its callbacks. */
export function handleApi(deps: ApiDeps, operation: Operation, res: HttpResponse, req: HttpRequest, extension?: ApiExtension): void {
  const head: Head = {
    id: requestId(req.getHeader('x-request-id'), randomUUID),
    address: remoteAddress(res),
    authorization: req.getHeader('authorization'),
    contentType: req.getHeader('content-type'),
    contentLength: req.getHeader('content-length'),
    fingerprint: operation === 'verify' ? queryParam(req, 'fingerprint') : '',
    raw: operation === 'protect' && prefersImage(req.getHeader('accept')),
    idempotencyKey: req.getHeader('idempotency-key'),
  };
  void new ApiRequest(deps, operation, res, head, extension).run();
}

class ApiRequest {
  readonly #deps: ApiDeps;
  readonly #operation: Operation;
  readonly #head: Head;
  readonly #route: string;
  readonly #ex: Exchange;
  readonly #phases: Phases;
  #accountId: number | undefined;
  #reservation: Reservation | undefined;
  /** The counter just after the reservation (this unit counted), or as it is for a replay: the RateLimit headers of a 200. */
  #reserved: QuotaState | undefined;
  /** The request's Idempotency-Key; the upload's SHA-256 is set on it before the commit. */
  #idempotency: IdempotentRequest | undefined;
  /** A replay (the key's unit is committed, no unit taken): the SHA-256 the upload must have. */
  #replayOf: string | undefined;
  #lease: Lease | undefined;
  /** Chunks that arrived before #receive took over (copied: uWS reuses its buffer), or undefined once it did. */
  #early: EarlyBody | undefined = new EarlyBody();
  #sink: ((chunk: ArrayBuffer | Uint8Array, isLast: boolean) => void) | undefined;
  #paused = false;
  /** The watch of the arriving body (its share of the client's room); set while the body arrives. */
  #arrival: ArrivalWatch | undefined;
  /** The answer closes the connection: the client is not read any further (too slow, or refused mid-body). */
  #closeAfter = false;

  readonly #extension: ApiExtension | undefined;
  #extra: ExtensionRequest | undefined;
  #delivered = false;

  constructor(deps: ApiDeps, operation: Operation, res: HttpResponse, head: Head, extension: ApiExtension | undefined) {
    this.#deps = deps;
    this.#operation = operation;
    this.#head = head;
    this.#extension = extension;
    this.#route = extension?.route ?? `/api/v1/${operation}`;
    // Registers the abort callback uWS requires before the handler returns.
    this.#ex = new Exchange(res, head.id, this.#route, process.hrtime.bigint());
    this.#phases = new Phases(this.#ex.started);
    // The body handler too must be there before the handler returns; until the request is admitted
    // the socket is paused and what uWS already read is kept.
    res.onData((chunk, isLast) => {
      if (this.#sink) return this.#sink(chunk, isLast);
      if (!this.#early) return;
      if (this.#early.bytes + chunk.byteLength <= MAX_EARLY_BYTES) return this.#early.add(chunk, isLast);
      this.#early.release();
      this.#early = undefined;
    });
    try {
      res.pause();
      this.#paused = true;
    } catch {
      // uWS's JS fallback has no pause: the early chunks are kept up to MAX_EARLY_BYTES anyway.
    }
  }

  async run(): Promise<void> {
    this.#deps.inflight.begin();
    try {
      const lease = await this.#admit();
      await this.#receive(lease);
      const answer = await this.#process(lease);
      // The reserved unit is already counted, held by this instance. It is kept (committed) when every
      // byte of the answer but the last is with the socket, and the last byte goes after the commit: a
      // crash before the commit leaves the hold to a reconciliation (given back; the client has no
      // complete answer), and a commit that fails closes the connection. So a unit is charged without its
      // answer only if the process dies between the commit and one last write.
      const headers: Headers = { ...(await this.#rateLimitHeaders(this.#reserved)), ...this.#phases.headers() };
      if (this.#replayOf !== undefined) headers['Idempotent-Replayed'] = 'true';
      const options = { beforeLastByte: (release: () => void) => this.#commit(release) };
      const delivered = answer.headers
        ? await this.#ex.send(200, { ...answer.headers, 'Cache-Control': 'no-store', ...headers }, answer.bytes, options)
        : await this.#ex.json(200, answer.bytes, { ...answer.extraHeaders, ...headers }, options);
      this.#delivered = delivered;
      if (!delivered) await this.#giveBack();
      this.#reservation = undefined; // kept
    } catch (err) {
      if (!this.#ex.aborted) await this.#refuse(err);
    } finally {
      this.#finish();
    }
  }

  /** uWS forbids touching `res` after an abort or a finished answer. */
  #resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    if (!this.#ex.aborted && !this.#ex.answered) this.#ex.res.resume();
  }

  /** Everything here reads headers only. Throws the refusal. */
  async #admit(): Promise<Lease> {
    const { store, pool, transfer, maxUploadBytes } = this.#deps;
    const auth = await store.authenticate(this.#head.authorization || undefined);
    if (this.#ex.aborted) throw new ClientGoneError();
    if (!auth.ok) throw new OptmarkError(auth.code, auth.message);
    this.#accountId = auth.account.id;
    const key = parseIdempotencyKey(this.#head.idempotencyKey);
    if (key !== undefined && this.#extension && !this.#extension.idempotent) {
      throw new OptmarkError('invalid_idempotency_key', `${this.#route} does not take an Idempotency-Key.`);
    }
    if (this.#head.fingerprint !== '' && this.#head.fingerprint !== 'skip') {
      throw new OptmarkError(
        'invalid_query',
        `fingerprint=${JSON.stringify(this.#head.fingerprint).slice(1, -1)} is not accepted: fingerprint=skip leaves the pixel detector out; omit it to run the detector.`,
      );
    }
    checkContentType(this.#head.contentType);
    const declared = parseLength(this.#head.contentLength);
    if (declared === 'invalid') throw new OptmarkError('malformed_multipart', 'Content-Length is not a number.');
    const maxBody = maxUploadBytes + MULTIPART_SLACK_BYTES;
    if (declared !== undefined && declared > maxBody) {
      throw new OptmarkError('payload_too_large', `The upload is ${declared} bytes; the limit is ${maxUploadBytes}.`);
    }
    if (pool.saturated) throw new PoolOverloadedError();
    if (this.#extension) this.#extra = await this.#extension.admit({ account: auth.account, keyId: auth.keyId });
    const idempotency = key === undefined ? undefined : { key };
    const reserved = await store.reserve(auth.account.id, this.#operation, undefined, idempotency);
    this.#idempotency = idempotency;
    if (!reserved.ok && reserved.prior) {
      this.#replayOf = this.#priorUpload(reserved.prior, reserved.state);
    } else if (!reserved.ok) {
      const s = reserved.state;
      // The reset instant from the counter's own seconds (Retry-After), so the two always agree.
      const resetsAt = utcMinuteText(resetInstantOf(s.resetSeconds, new Date()));
      throw new QuotaExceededError(`The monthly ${this.#operation} limit of ${s.limit} is used up; it resets at ${resetsAt}.`, s.resetSeconds, s);
    }
    if (reserved.ok) this.#reservation = reserved.reservation;
    this.#reserved = reserved.state;
    if (this.#ex.aborted) throw new ClientGoneError();
    // Room for the body: the declared length bounds it; without one, the limit does. Past
    // UPFRONT_BODY_BYTES it is taken as the bytes arrive (src/transfer/). A protect's lease holds room for its
    // answer too, so that an admitted request never needs memory from elsewhere (a large one, from its seal).
    const room = declared === undefined ? maxBody : Math.max(1, declared);
    // An extension's worker answers with bytes of its own (its layers may grow the image).
    const lease = transfer.admit(room, this.#operation === 'protect' && !this.#extra);
    if (!lease) throw new PoolOverloadedError('The server is holding as many uploads as it can; retry shortly.');
    this.#lease = lease;
    // The client's share of the memory held by requests whose body is still arriving (what its lease
    // holds, checked again as it grows: throws 503 past it); the rate floor.
    this.#arrival = this.#deps.uploads.arrive({
      account: auth.account.id,
      address: this.#head.address,
      bytes: lease.held,
      startedMs: this.#deps.uploads.now(),
      received: () => lease.received,
      tooSlow: (err) => this.#tooSlow?.(err),
    });
    return lease;
  }

  /**
   * What a key the store already has means: a committed unit for this operation is a replay (the SHA-256
   * its upload must have); a unit still held is 409; another operation's key is 422.
   */
  #priorUpload(prior: PriorRequest, state: QuotaState): string {
    if (prior.status === 'in_progress') throw new KeyInUseError(state);
    if (prior.operation !== this.#operation) {
      throw new OptmarkError('idempotency_key_reused', `This Idempotency-Key was used for a ${prior.operation} request; send a new key for a new request.`);
    }
    return prior.sha256;
  }

  /** The worker's SHA-256 of the uploaded image: set on the key before the commit, or checked against a replay's. */
  #bindUpload(sha256: string | undefined): void {
    const idempotency = this.#idempotency;
    if (!idempotency) return;
    if (sha256 === undefined) throw new Error('the worker answered an Idempotency-Key request without the upload digest');
    if (this.#replayOf !== undefined && sha256 !== this.#replayOf) {
      throw new OptmarkError(
        'idempotency_key_reused',
        'This Idempotency-Key was used for another upload (keys are kept 24 hours); send a new key for a new request.',
      );
    }
    idempotency.sha256 = sha256;
  }

  /** Set while the body arrives: ends the receive step with the rate floor's refusal. */
  #tooSlow: ((err: UploadTooSlowError) => void) | undefined;

  /** Copies the body into the lease; rejects past the limits, on an empty body, or when the client leaves. */
  #receive(lease: Lease): Promise<void> {
    const maxBody = this.#deps.maxUploadBytes + MULTIPART_SLACK_BYTES;
    return new Promise((resolve, reject) => {
      let settled = false;
      const end = (err?: Error): void => {
        settled = true;
        if (err) reject(err);
        else resolve();
      };
      this.#ex.onAbort(() => settled || end(new ClientGoneError()));
      this.#tooSlow = (err) => {
        if (settled) return;
        this.#closeAfter = true;
        end(err);
      };
      const onData = (chunk: ArrayBuffer | Uint8Array, isLast: boolean): void => {
        if (settled) return; // refused already: uWS drains the rest of the body
        if (lease.received + chunk.byteLength > maxBody) {
          return end(new OptmarkError('payload_too_large', `The upload is larger than the ${this.#deps.maxUploadBytes}-byte limit.`));
        }
        const written = lease.write(chunk);
        if (written !== 'ok') {
          // Past the Content-Length the client declared (and was admitted with).
          if (written === 'too-large') return end(new OptmarkError('payload_too_large', 'The upload is larger than its declared Content-Length.'));
          // The lease could not grow (the budget is full), or grew past its client's share: 503, and the rest
          // of the body is not read.
          try {
            if (written === 'full') throw new TransferFullError("this upload's next bytes");
            this.#arrival?.hold(lease.held);
          } catch (err) {
            this.#closeAfter = true;
            return end(err as Error);
          }
        }
        if (!isLast) return;
        if (lease.received === 0) return end(new OptmarkError('malformed_multipart', 'The request has no body.'));
        this.#phases.received();
        // Arrived: the body no longer counts against its client's share of arriving room.
        this.#arrival?.end();
        end();
      };
      // What arrived while the request was admitted goes first, in order; then the socket reads again.
      const early = this.#early;
      this.#early = undefined;
      this.#sink = onData;
      if (!early) end(new PoolOverloadedError('The upload arrived faster than it could be admitted; retry shortly.'));
      else early.replay(onData);
      this.#resume();
    });
  }

  /** A worker parses the form and builds the answer; the answer's bytes (in the lease, for protect). */
  async #process(
    lease: Lease,
  ): Promise<{ bytes: Uint8Array; headers?: Record<string, string> | undefined; extraHeaders?: Record<string, string> | undefined }> {
    const { input, output } = lease.seal();
    const contentType = this.#head.contentType;
    const digest = this.#idempotency ? { digest: true } : {};
    const task: Task =
      this.#extra?.task?.(input, contentType) ??
      (this.#operation === 'protect'
        ? { kind: 'protect', input, output, contentType, ...(this.#head.raw ? { raw: true } : {}), ...digest }
        : { kind: 'verify', input, contentType, skipFingerprint: this.#head.fingerprint === 'skip', ...digest });
    const result = await this.#deps.pool.run(task);
    this.#phases.worked(result.workMs);
    if (!result.ok) {
      if (result.detail) this.#deps.log.error({ reqId: this.#head.id, detail: result.detail }, 'worker failure');
      throw new OptmarkError(result.error.code, result.error.message);
    }
    if (result.kind !== 'answer') throw new Error(`worker answered a ${this.#operation} with a ${result.kind} result`);
    const body = lease.answer(result.answer);
    this.#bindUpload(result.uploadSha256);
    if (this.#extra) return { bytes: await this.#extra.answered(result, body), extraHeaders: result.extraHeaders };
    return { bytes: body, headers: result.headers, extraHeaders: result.extraHeaders };
  }

  /** Sends the `{error, code}` answer a failure deserves. */
  async #refuse(err: unknown): Promise<void> {
    // Refund before the RateLimit headers are read, so they show the unit given back.
    const given = await this.#giveBack();
    const shape = toErrorShape(busyAsOverload(err));
    if (shape.code === 'internal_error') this.#deps.log.error({ reqId: this.#head.id, err }, 'unexpected failure');
    // A store that cannot answer is not asked again for the headers.
    // A refusal that took no unit shows the counter the reservation read (a replay's: as it is).
    const state =
      err instanceof QuotaExceededError || err instanceof KeyInUseError ? err.state : (given ?? (this.#replayOf !== undefined ? this.#reserved : undefined));
    const headers: Headers = { ...(isStoreUnavailable(err) ? {} : await this.#rateLimitHeaders(state)), ...this.#phases.headers() };
    if (shape.code === 'missing_api_key' || shape.code === 'invalid_api_key') headers['WWW-Authenticate'] = wwwAuthenticate(shape.code);
    if (err instanceof QuotaExceededError || err instanceof KeyInUseError) headers['Retry-After'] = String(err.retryAfter);
    this.#resume();
    // A client too slow to send its body, or refused in the middle of it, is not read any further: the
    // answer closes the connection.
    await this.#ex.error(shape.code, shape.message, headers, { closeConnection: this.#closeAfter });
  }

  /** The one end of every request: quota unit (given back if still held), memory, metrics, log line. */
  #finish(): void {
    this.#arrival?.end();
    this.#tooSlow = undefined;
    if (this.#reservation) void this.#giveBack();
    this.#extra?.settle(this.#delivered).catch((err: unknown) => this.#deps.log.error({ reqId: this.#head.id, err }, 'settling the request failed'));
    this.#early?.release();
    this.#early = undefined;
    const received = this.#lease?.received ?? 0;
    this.#lease?.release();
    this.#lease = undefined;
    const ex = this.#ex;
    const seconds = Number(process.hrtime.bigint() - ex.started) / 1e9;
    const status = ex.aborted && !ex.answered ? 499 : ex.status;
    this.#deps.metrics.observe(this.#route, status, seconds, received, ex.sent);
    this.#deps.log.info(
      {
        reqId: this.#head.id,
        route: this.#route,
        status,
        ms: Math.round(seconds * 1000),
        ...this.#phases.fields(),
        in: received,
        out: ex.sent,
        account: this.#accountId,
      },
      'request',
    );
    this.#deps.inflight.end();
  }

  /**
   * Keeps the reserved unit, durably, and calls `release` (the last byte of the 200) the instant the
   * commit is on its way to the store: SQLite, done; PostgreSQL, its statement written to the connection,
   * which the database runs even if this process dies the next instant. So the last byte does not wait a
   * database round trip, which on a busy machine is the widest window a kill -9 can fall in. False when
   * the unit cannot be kept (nothing released).
   */
  async #commit(release: () => void): Promise<boolean> {
    const r = this.#reservation;
    if (!r) return true;
    let sent = false;
    try {
      await this.#deps.store.commit(r, undefined, () => {
        sent = true;
        release();
      });
      return true;
    } catch (err) {
      if (sent) {
        // The answer went out with its commit written; only the acknowledgement failed. The store does it again.
        this.#deps.log.error({ reqId: this.#head.id, err }, 'quota commit unconfirmed (retried in the background)');
        return true;
      }
      // The store is down or this instance's hold was reclaimed (it missed its lease): no complete answer,
      // and the unit goes back (the refund is retried, or was already done by the reconciliation).
      this.#deps.log.error({ reqId: this.#head.id, err }, 'quota commit failed; the answer is cut short');
      return false;
    }
  }

  /** Gives back the reserved unit (also after its commit, for an answer that never reached the client), once. */
  async #giveBack(): Promise<QuotaState | undefined> {
    const r = this.#reservation;
    this.#reservation = undefined;
    if (!r) return undefined;
    try {
      return await this.#deps.store.refund(r);
    } catch (err) {
      // The store retries it (PostgreSQL) or the unit stays held until this instance's hold is reconciled.
      this.#deps.log.error({ reqId: this.#head.id, err }, 'quota refund failed');
      return undefined;
    }
  }

  /** RateLimit headers are a courtesy: a store that cannot be read must not turn an answer into a crash. */
  async #rateLimitHeaders(known?: QuotaState): Promise<Headers> {
    if (known) return rateLimitHeaders(known);
    if (this.#accountId === undefined) return {};
    try {
      return rateLimitHeaders(await this.#deps.store.quotaState(this.#accountId, this.#operation));
    } catch (err) {
      this.#deps.log.error({ reqId: this.#head.id, err }, 'quota state unavailable');
      return {};
    }
  }
}
