/**
 * POST /api/v1/protect and /api/v1/verify, one request as a short sequence:
 *
 *   admit    from the headers alone: the key, the Content-Type and Content-Length, room in the queue, a
 *            quota unit (./quota.ts) and request memory (./intake.ts); a refusal goes out before a byte
 *            of body is read
 *   receive  the body's chunks, copied into the request memory
 *   process  a worker parses the form and builds the answer (for protect, into the request memory)
 *   answer   every byte but the last, the unit committed, then the last byte
 *   settle   the one end, whatever happened: the unit kept or given back, the memory released, metrics
 *
 * The store is asynchronous (SQLite or PostgreSQL, src/store/): body bytes that arrive while the request
 * is being admitted are held by the intake (the socket is paused).
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { MULTIPART_SLACK_BYTES } from '../config.js';
import { OptmarkError, toErrorShape } from '../errors.js';
import type { Logger } from '../log.js';
import { checkContentType } from '../pipeline/form-type.js';
import { PoolOverloadedError, type ImagePool } from '../pool/pool.js';
import type { AnswerResult, Task } from '../pool/tasks.js';
import { wwwAuthenticate, type Account, type Operation, type Store } from '../store/index.js';
import type { BytesRef, Transfer } from '../transfer/index.js';
import { type Head, readHead } from './head.js';
import { parseIdempotencyKey } from './idempotency.js';
import { type BodyRules, ClientGoneError, Intake, type Uploads } from './intake.js';
import type { Metrics } from './metrics.js';
import { busyAsOverload, QuotaUnit } from './quota.js';
import { Exchange, type Headers } from './respond.js';
import { Phases } from './timing.js';

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

/** An upload's body: the upload limit plus the form's framing. */
function uploadRules(maxUploadBytes: number): BodyRules {
  return {
    maxBytes: maxUploadBytes + MULTIPART_SLACK_BYTES,
    tooLarge: (declared) =>
      new OptmarkError(
        'payload_too_large',
        declared === undefined
          ? `The upload is larger than the ${maxUploadBytes}-byte limit.`
          : `The upload is ${declared} bytes; the limit is ${maxUploadBytes}.`,
      ),
    malformed: 'malformed_multipart',
    nonEmpty: true,
  };
}

/** Handles one API request; the uWS handler returns right after this sets up its callbacks. */
export function handleApi(deps: ApiDeps, operation: Operation, res: HttpResponse, req: HttpRequest, extension?: ApiExtension): void {
  void new ApiRequest(deps, operation, res, readHead(operation, res, req), extension).run();
}

type Answer = { bytes: Uint8Array; headers?: Record<string, string> | undefined; extraHeaders?: Record<string, string> | undefined };

class ApiRequest {
  readonly #deps: ApiDeps;
  readonly #operation: Operation;
  readonly #head: Head;
  readonly #route: string;
  readonly #ex: Exchange;
  readonly #phases: Phases;
  readonly #intake: Intake;
  readonly #unit: QuotaUnit;
  readonly #extension: ApiExtension | undefined;
  #extra: ExtensionRequest | undefined;
  #delivered = false;

  constructor(deps: ApiDeps, operation: Operation, res: HttpResponse, head: Head, extension: ApiExtension | undefined) {
    this.#deps = deps;
    this.#operation = operation;
    this.#head = head;
    this.#extension = extension;
    this.#route = extension?.route ?? `/api/v1/${operation}`;
    // The abort callback and the body reader, both of which uWS requires before the handler returns.
    this.#ex = new Exchange(res, head.id, this.#route, process.hrtime.bigint());
    this.#phases = new Phases(this.#ex.started);
    this.#intake = new Intake(this.#ex, deps, uploadRules(deps.maxUploadBytes));
    this.#unit = new QuotaUnit(deps.store, deps.log, head.id, operation);
  }

  async run(): Promise<void> {
    this.#deps.inflight.begin();
    try {
      await this.#admit();
      await this.#intake.receive();
      this.#phases.received();
      this.#delivered = await this.#answer(await this.#process());
      await this.#unit.settle(this.#delivered);
    } catch (err) {
      if (!this.#ex.aborted) await this.#refuse(err);
    } finally {
      this.#settle();
    }
  }

  /** Everything here reads headers only. Throws the refusal. */
  async #admit(): Promise<void> {
    const { store, pool } = this.#deps;
    const auth = await store.authenticate(this.#head.authorization || undefined);
    if (this.#ex.aborted) throw new ClientGoneError();
    if (!auth.ok) throw new OptmarkError(auth.code, auth.message);
    this.#unit.accountId = auth.account.id;
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
    if (this.#head.vault !== '' && this.#head.vault !== 'match') {
      throw new OptmarkError(
        'invalid_query',
        `vault=${JSON.stringify(this.#head.vault).slice(1, -1)} is not accepted: vault=match also reports the account's vault originals the picture looks like; omit it not to.`,
      );
    }
    checkContentType(this.#head.contentType);
    this.#intake.declare(this.#head.contentLength);
    if (pool.saturated) throw new PoolOverloadedError();
    if (this.#extension) this.#extra = await this.#extension.admit({ account: auth.account, keyId: auth.keyId });
    await this.#unit.reserve(auth.account.id, key);
    if (this.#ex.aborted) throw new ClientGoneError();
    // A protect's memory holds room for its answer too, so that an admitted request never needs memory
    // from elsewhere; an extension's worker answers with bytes of its own (its layers may grow the image).
    this.#intake.admit(this.#operation === 'protect' && !this.#extra, { account: auth.account.id, address: this.#head.address });
  }

  /** A worker parses the form and builds the answer; the answer's bytes (in the request memory, for protect). */
  async #process(): Promise<Answer> {
    const { input, output } = this.#intake.seal();
    const contentType = this.#head.contentType;
    const digest = this.#unit.idempotent ? { digest: true } : {};
    const task: Task =
      this.#extra?.task?.(input, contentType) ??
      (this.#operation === 'protect'
        ? { kind: 'protect', input, output, contentType, ...(this.#head.raw ? { raw: true } : {}), ...digest }
        : {
            kind: 'verify',
            input,
            contentType,
            skipFingerprint: this.#head.fingerprint === 'skip',
            ...(this.#head.vault === 'match' ? { perceptualHash: true } : {}),
            ...digest,
          });
    const result = await this.#deps.pool.run(task);
    this.#phases.worked(result.workMs);
    if (!result.ok) {
      if (result.detail) this.#deps.log.error({ reqId: this.#head.id, detail: result.detail }, 'worker failure');
      throw new OptmarkError(result.error.code, result.error.message);
    }
    if (result.kind !== 'answer') throw new Error(`worker answered a ${this.#operation} with a ${result.kind} result`);
    const body = this.#intake.answer(result.answer);
    this.#unit.bindUpload(result.uploadSha256);
    if (this.#extra) return { bytes: await this.#extra.answered(result, body), extraHeaders: result.extraHeaders };
    return { bytes: body, headers: result.headers, extraHeaders: result.extraHeaders };
  }

  /**
   * The 200: every byte but the last, then the unit committed, then the last byte the instant the commit
   * is on its way (a commit that fails cuts the answer short). True when the whole answer reached the socket.
   */
  async #answer(answer: Answer): Promise<boolean> {
    const headers: Headers = { ...(await this.#unit.answerHeaders()), ...this.#phases.headers() };
    const all: Headers = answer.headers
      ? { ...answer.headers, 'Cache-Control': 'no-store', ...headers }
      : { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...answer.extraHeaders, ...headers };
    const held = await this.#ex.hold(200, all, answer.bytes);
    if (!held) return false;
    let last: Promise<boolean> | undefined;
    if (!(await this.#unit.commit(() => (last = held.release())))) {
      held.cut();
      return false;
    }
    return last ?? held.release();
  }

  /** Sends the `{error, code}` answer a failure deserves. */
  async #refuse(err: unknown): Promise<void> {
    // The unit goes back before the RateLimit headers are read, so they show it given back.
    const shape = toErrorShape(busyAsOverload(err));
    const headers: Headers = { ...(await this.#unit.refusalHeaders(err)), ...this.#phases.headers() };
    if (shape.code === 'internal_error') this.#deps.log.error({ reqId: this.#head.id, err }, 'unexpected failure');
    if (shape.code === 'missing_api_key' || shape.code === 'invalid_api_key') headers['WWW-Authenticate'] = wwwAuthenticate(shape.code);
    await this.#ex.error(shape.code, shape.message, headers, { closeConnection: this.#intake.closeConnection() });
  }

  /** The one end of every request: the unit (given back if still held), the extension, memory, metrics, log line. */
  #settle(): void {
    void this.#unit.giveBack();
    this.#extra?.settle(this.#delivered).catch((err: unknown) => this.#deps.log.error({ reqId: this.#head.id, err }, 'settling the request failed'));
    const received = this.#intake.received;
    this.#intake.release();
    const ex = this.#ex;
    const seconds = Number(process.hrtime.bigint() - ex.started) / 1e9;
    const status = ex.aborted && !ex.answered ? 499 : ex.status;
    this.#deps.metrics.observe(this.#route, status, seconds, received, ex.sent);
    const fields = { reqId: this.#head.id, route: this.#route, status, ms: Math.round(seconds * 1000), ...this.#phases.fields() };
    this.#deps.log.info({ ...fields, in: received, out: ex.sent, account: this.#unit.accountId }, 'request');
    this.#deps.inflight.end();
  }
}
