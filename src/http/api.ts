/**
 * POST /api/v1/protect and /api/v1/verify: authenticate and check limits from the headers alone,
 * reserve a quota unit, copy the request body into a range of the shared arena, let a worker parse the
 * multipart framing and build the answer in another range, write it back, then keep the unit on success
 * or give it back on any failure.
 */
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { OptmarkError, toErrorShape } from '../errors.js';
import type { Logger } from '../log.js';
import type { ImagePool } from '../pool/pool.js';
import { protectBodyCapacity } from '../pipeline/body.js';
import type { ArenaRange, BodyResult, Task } from '../pipeline/tasks.js';
import { rateLimitHeaders, resetTimeOf, utcMinuteText, wwwAuthenticate, type Account, type AuthResult, type Operation, type Reservation, type Store } from '../store/index.js';
import { requestId } from './filename.js';
import { RequestMemory } from './memory.js';
import type { Metrics } from './metrics.js';
import { MULTIPART_SLACK_BYTES } from '../config.js';
import { checkContentType } from '../pipeline/upload.js';
import { BodyReceiver } from './receive.js';
import { Exchange, type Headers } from './respond.js';
import { Phases } from './timing.js';

export interface ApiDeps {
  store: Store;
  pool: ImagePool;
  metrics: Metrics;
  log: Logger;
  maxUploadBytes: number;
  /** Requests in progress, for graceful shutdown. */
  inflight: { count: number; idle: () => void };
}

/**
 * What a route built on this flow adds to it (the dashboard's mark, src/http/dashboard.ts): a check
 * after authentication, its own worker task, and what to do with the answer. The flow stays the API's:
 * the same admission, limits, quota unit, arena memory, error codes and settling.
 */
export interface ApiExtension {
  /** The route's name in metrics and logs. */
  route: string;
  /** Called once the key is known good, before the quota unit is taken; throws an OptmarkError to refuse. */
  admit(auth: { account: Account; keyId: number }): ExtensionRequest;
}

export interface ExtensionRequest {
  /** The worker task for the received body. */
  task(input: ArenaRange, contentType: string): Task;
  /**
   * The worker's answer, before it is sent: store what must exist when the client reads it, and return
   * the body to send (the worker's, or one with fields added). Throw to fail the request.
   */
  answered(result: BodyResult): Uint8Array;
  /** Called once when the request ends: ok when the answer reached the client. */
  settle(ok: boolean): void;
}

function parseLength(raw: string): number | undefined | 'invalid' {
  if (raw === '') return undefined;
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 'invalid';
}

/**
 * A store call that timed out waiting for SQLite's write lock (busy_timeout) means the server is
 * overloaded (503 + Retry-After), not broken (500).
 */
function busyAsOverload(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code)) return new OptmarkError('overloaded', 'The account store is busy; retry shortly.', { cause: err });
  return err;
}

/** 429: the account's monthly units are used up until the month turns (Retry-After, in seconds). */
class QuotaExceededError extends OptmarkError {
  constructor(
    message: string,
    readonly retryAfter: number,
  ) {
    super('quota_exceeded', message);
  }
}

/** Handles one API request; the uWS handler returns right after this sets up its callbacks. */
export function handleApi(deps: ApiDeps, operation: Operation, res: HttpResponse, req: HttpRequest, extension?: ApiExtension): void {
  // HttpRequest lives only during this synchronous call: read everything from it first.
  const authorization = req.getHeader('authorization');
  const contentType = req.getHeader('content-type');
  const lengthHeader = req.getHeader('content-length');
  const id = requestId(req.getHeader('x-request-id'), randomUUID);
  const route = extension?.route ?? `/api/v1/${operation}`;
  const ex = new Exchange(res, id, route, process.hrtime.bigint());
  const phases = new Phases(ex.started);
  const { store, pool, metrics, log, inflight } = deps;
  const arena = pool.arena;
  if (!arena) throw new Error('the API needs a pool with an arena');
  inflight.count++;

  let reservation: Reservation | undefined;
  let accountId: number | undefined;
  let finished = false;
  let extra: ExtensionRequest | undefined;
  const memory = new RequestMemory(arena, () => metrics.inflightBytes.set(arena.used));
  // Headers are a courtesy: a store that cannot be read must not turn an answer into a crash.
  const rlHeaders = (): Headers => {
    if (accountId === undefined) return {};
    try {
      return rateLimitHeaders(store.quotaState(accountId, operation));
    } catch (err) {
      log.error({ reqId: id, err }, 'quota state unavailable');
      return {};
    }
  };

  /** Keeps (ok) or gives back the reserved unit, once. */
  const settle = (ok: boolean): void => {
    const r = reservation;
    reservation = undefined;
    if (!r) return;
    try {
      if (ok) store.commit(r);
      else store.refund(r);
    } catch (err) {
      log.error({ reqId: id, err }, 'quota update failed');
    }
  };

  const finish = (ok: boolean): void => {
    if (finished) return;
    finished = true;
    settle(ok);
    try {
      extra?.settle(ok);
    } catch (err) {
      log.error({ reqId: id, err }, 'settling the request failed');
    }
    memory.releaseAll();
    const seconds = Number(process.hrtime.bigint() - ex.started) / 1e9;
    const status = ex.aborted && !ex.answered ? 499 : ex.status;
    metrics.observe(route, status, seconds, receiver?.received ?? 0, ex.sent);
    log.info({ reqId: id, route, status, ms: Math.round(seconds * 1000), ...phases.fields(), in: receiver?.received ?? 0, out: ex.sent, account: accountId }, 'request');
    if (--inflight.count === 0) inflight.idle();
  };

  const fail = (err: unknown): void => {
    // Refund before the RateLimit headers are read, so they show the unit given back.
    settle(false);
    const shape = toErrorShape(busyAsOverload(err));
    if (shape.code === 'internal_error') log.error({ reqId: id, err }, 'unexpected failure');
    const headers: Headers = { ...rlHeaders(), ...phases.headers() };
    if (shape.code === 'missing_api_key' || shape.code === 'invalid_api_key') headers['WWW-Authenticate'] = wwwAuthenticate(shape.code);
    if (err instanceof QuotaExceededError) headers['Retry-After'] = String(err.retryAfter);
    void ex.error(shape.code, shape.message, headers).then(() => finish(false));
  };

  let receiver: BodyReceiver | undefined;
  let uploadSlot: ReturnType<RequestMemory['take']>;
  let outputSlot: ReturnType<RequestMemory['take']>;
  ex.onAbort(() => {
    receiver?.abandon(new OptmarkError('malformed_multipart', 'client went away'));
    finish(false);
  });

  // Everything up to here used headers only: refusals go out before a byte of body is read.
  let auth: AuthResult;
  try {
    auth = store.authenticate(authorization || undefined); // may write (last use): can be busy
  } catch (err) {
    return fail(err);
  }
  if (!auth.ok) return fail(new OptmarkError(auth.code, auth.message));
  accountId = auth.account.id;
  const declared = parseLength(lengthHeader);
  try {
    checkContentType(contentType);
    if (declared === 'invalid') throw new OptmarkError('malformed_multipart', 'Content-Length is not a number.');
    if (declared !== undefined && declared > deps.maxUploadBytes + MULTIPART_SLACK_BYTES) {
      throw new OptmarkError('payload_too_large', `The upload is ${declared} bytes; the limit is ${deps.maxUploadBytes}.`);
    }
    if (pool.saturated) throw new OptmarkError('overloaded');
    if (extension) extra = extension.admit(auth);
    const reserved = store.reserve(auth.account.id, operation);
    if (!reserved.ok) {
      const s = reserved.state;
      // The reset instant from the counter's own seconds (Retry-After), so the two always agree.
      const resetsAt = utcMinuteText(resetTimeOf(new Date(Date.now() + (s.resetSeconds - 1) * 1000)));
      throw new QuotaExceededError(`The monthly ${operation} limit of ${s.limit} is used up; it resets at ${resetsAt}.`, s.resetSeconds);
    }
    reservation = reserved.reservation;
    // Room for the body: the declared length bounds it; without one, the limit does (shrunk later).
    const maxBody = deps.maxUploadBytes + MULTIPART_SLACK_BYTES;
    const capacity = declared === undefined ? maxBody : Math.max(1, declared);
    // Admission takes room for the answer too, so that a request once admitted never needs memory from
    // outside the arena.
    const slot = memory.take(capacity);
    // An extension's worker builds its answer in a buffer of its own (the layers may grow the image).
    const needsOutput = operation === 'protect' && !extension;
    const bodySlot = slot && needsOutput ? memory.take(protectBodyCapacity(capacity)) : undefined;
    if (!slot || (needsOutput && !bodySlot)) {
      memory.releaseAll();
      throw new OptmarkError('overloaded', 'The server is holding as many uploads as it can; retry shortly.');
    }
    uploadSlot = slot;
    outputSlot = bodySlot;
    receiver = new BodyReceiver({ destination: memory.view(slot), maxBodyBytes: maxBody, maxImageBytes: deps.maxUploadBytes });
  } catch (err) {
    return fail(err);
  }

  const rx = receiver;
  res.onData((chunk, isLast) => {
    if (ex.answered || rx.failed) return; // already refused: uWS drains the rest of the body for us
    try {
      rx.push(chunk, isLast);
    } catch (err) {
      fail(err);
    }
  });
  rx.done.then(
    async (upload) => {
      phases.received();
      if (ex.aborted) return;
      // Hand the unused tail of the upload's range back before the worker runs. The image inside the
      // body is smaller than the body, so an answer for the body's length has room for it.
      const input = memory.shrink(uploadSlot!, upload.length);
      const output = outputSlot && memory.shrink(outputSlot, protectBodyCapacity(upload.length));
      const range = { offset: input.offset, length: upload.length };
      const task: Task = extra
        ? extra.task(range, contentType)
        : operation === 'protect'
          ? { kind: 'protect', input: range, output, contentType }
          : { kind: 'verify', input: range, contentType };
      memory.lend();
      let result;
      try {
        result = await pool.run(task);
      } catch (err) {
        memory.returned(false);
        throw err;
      }
      memory.returned(true);
      phases.worked(result.workMs);
      memory.free(input);
      if (!result.ok) {
        if (result.detail) log.error({ reqId: id, detail: result.detail }, 'worker failure');
        throw new OptmarkError(result.error.code, result.error.message);
      }
      let body: Uint8Array;
      if (result.kind === 'arena-body' && output) body = memory.view(output, result.length);
      else if (result.kind === 'body') {
        if (output) memory.free(output);
        body = extra ? extra.answered(result) : result.body;
      } else throw new Error('worker answered with the wrong result kind');
      const delivered = await ex.json(200, body, { ...rlHeaders(), ...phases.headers() });
      finish(delivered);
    },
    (err: unknown) => {
      if (!ex.aborted) fail(err);
    },
  ).catch((err: unknown) => {
    if (!ex.aborted) fail(err);
    else finish(false);
  });
}
