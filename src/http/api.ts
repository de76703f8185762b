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
import type { Task } from '../pipeline/tasks.js';
import {
  isStoreUnavailable,
  rateLimitHeaders,
  resetTimeOf,
  utcMinuteText,
  wwwAuthenticate,
  type AuthResult,
  type Operation,
  type QuotaState,
  type Reservation,
  type Store,
} from '../store/index.js';
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

function parseLength(raw: string): number | undefined | 'invalid' {
  if (raw === '') return undefined;
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 'invalid';
}

/**
 * A store call that timed out waiting for SQLite's write lock (busy_timeout), or a PostgreSQL store that
 * cannot answer (down, slow past its statement timeout, out of connections), means the server cannot
 * serve now (503 + Retry-After), not that it is broken (500). No unit is granted without its reservation.
 */
function busyAsOverload(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code)) return new OptmarkError('overloaded', 'The account store is busy; retry shortly.', { cause: err });
  if (isStoreUnavailable(err)) return new OptmarkError('overloaded', 'The account store is unavailable; retry shortly.', { cause: err });
  return err;
}

/** Body bytes delivered by uWS before the request is admitted (auth and reserve are asynchronous). */
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

function unwrap(err: unknown): unknown {
  return err instanceof OptmarkError && err.cause !== undefined ? err.cause : err;
}

/** Handles one API request; the uWS handler returns right after this sets up its callbacks. */
export function handleApi(deps: ApiDeps, operation: Operation, res: HttpResponse, req: HttpRequest): void {
  // HttpRequest lives only during this synchronous call: read everything from it first.
  const authorization = req.getHeader('authorization');
  const contentType = req.getHeader('content-type');
  const lengthHeader = req.getHeader('content-length');
  const id = requestId(req.getHeader('x-request-id'), randomUUID);
  const route = `/api/v1/${operation}`;
  const ex = new Exchange(res, id, route, process.hrtime.bigint());
  const phases = new Phases(ex.started);
  const { store, pool, metrics, log, inflight } = deps;
  const arena = pool.arena;
  if (!arena) throw new Error('the API needs a pool with an arena');
  inflight.count++;

  let reservation: Reservation | undefined;
  let accountId: number | undefined;
  let finished = false;
  const memory = new RequestMemory(arena, () => metrics.inflightBytes.set(arena.used));
  // Headers are a courtesy: a store that cannot be read must not turn an answer into a crash.
  const rlHeaders = async (known?: QuotaState): Promise<Headers> => {
    if (known) return rateLimitHeaders(known);
    if (accountId === undefined) return {};
    try {
      return rateLimitHeaders(await store.quotaState(accountId, operation));
    } catch (err) {
      log.error({ reqId: id, err }, 'quota state unavailable');
      return {};
    }
  };

  /** Gives back the reserved unit (also after its commit, for an answer that never reached the client), once. */
  const refund = async (): Promise<QuotaState | undefined> => {
    const r = reservation;
    reservation = undefined;
    if (!r) return undefined;
    try {
      return await store.refund(r);
    } catch (err) {
      // Held: the unit comes back when this instance's hold is reconciled; committed: it stays counted.
      log.error({ reqId: id, err }, 'quota refund failed');
      return undefined;
    }
  };

  const finish = (ok: boolean): void => {
    if (finished) return;
    finished = true;
    if (!ok) void refund();
    memory.releaseAll();
    const seconds = Number(process.hrtime.bigint() - ex.started) / 1e9;
    const status = ex.aborted && !ex.answered ? 499 : ex.status;
    metrics.observe(route, status, seconds, receiver?.received ?? 0, ex.sent);
    log.info({ reqId: id, route, status, ms: Math.round(seconds * 1000), ...phases.fields(), in: receiver?.received ?? 0, out: ex.sent, account: accountId }, 'request');
    if (--inflight.count === 0) inflight.idle();
  };

  let failing = false;
  let paused = false;
  const fail = (err: unknown): void => {
    if (failing || finished) return;
    failing = true;
    const shape = toErrorShape(busyAsOverload(err));
    if (shape.code === 'internal_error') log.error({ reqId: id, err }, 'unexpected failure');
    void (async () => {
      // Refund before the RateLimit headers are read, so they show the unit given back.
      const state = err instanceof QuotaExceededError ? err.state : await refund();
      const headers: Headers = { ...(shape.code === 'overloaded' && isStoreUnavailable(unwrap(err)) ? {} : await rlHeaders(state)), ...phases.headers() };
      if (shape.code === 'missing_api_key' || shape.code === 'invalid_api_key') headers['WWW-Authenticate'] = wwwAuthenticate(shape.code);
      if (err instanceof QuotaExceededError) headers['Retry-After'] = String(err.retryAfter);
      resume();
      await ex.error(shape.code, shape.message, headers);
      finish(false);
    })();
  };

  let receiver: BodyReceiver | undefined;
  let uploadSlot: ReturnType<RequestMemory['take']>;
  let outputSlot: ReturnType<RequestMemory['take']>;
  ex.onAbort(() => {
    receiver?.abandon(new OptmarkError('malformed_multipart', 'client went away'));
    finish(false);
  });

  // Body bytes that uWS delivers before the request is admitted (the store answers asynchronously) are
  // kept, bounded, and the socket is paused until then; refusals still go out without reading the body.
  let early: Buffer[] | undefined = [];
  let earlyBytes = 0;
  let earlyLast = false;
  res.onData((chunk, isLast) => {
    if (ex.answered || receiver?.failed) return; // already refused: uWS drains the rest of the body for us
    if (!receiver) {
      if (!early) return;
      earlyBytes += chunk.byteLength;
      if (earlyBytes > MAX_EARLY_BYTES) {
        early = undefined;
        fail(new OptmarkError('overloaded', 'The upload arrived faster than it could be admitted; retry shortly.'));
        return;
      }
      early.push(Buffer.from(new Uint8Array(chunk)));
      earlyLast = isLast;
      return;
    }
    try {
      receiver.push(chunk, isLast);
    } catch (err) {
      fail(err);
    }
  });
  // uWS forbids touching `res` after an abort or a finished answer: resume before answering.
  const resume = (): void => {
    if (!paused) return;
    paused = false;
    if (!ex.aborted && !ex.answered) res.resume();
  };
  const admitted = admit().catch((err: unknown) => {
    fail(err);
    return false;
  });
  // Still waiting on the store after this handler: hold the socket.
  if (!receiver && !ex.answered && !ex.aborted) {
    res.pause();
    paused = true;
  }
  void admitted.then((ok) => {
    resume();
    if (!ok || !receiver || ex.aborted) return;
    run(receiver);
  });

  // Everything in admit() uses headers only: refusals go out before a byte of body is used.
  async function admit(): Promise<boolean> {
    let auth: AuthResult;
    auth = await store.authenticate(authorization || undefined);
    if (ex.aborted) return false;
    if (!auth.ok) throw new OptmarkError(auth.code, auth.message);
    accountId = auth.account.id;
    const declared = parseLength(lengthHeader);
    checkContentType(contentType);
    if (declared === 'invalid') throw new OptmarkError('malformed_multipart', 'Content-Length is not a number.');
    if (declared !== undefined && declared > deps.maxUploadBytes + MULTIPART_SLACK_BYTES) {
      throw new OptmarkError('payload_too_large', `The upload is ${declared} bytes; the limit is ${deps.maxUploadBytes}.`);
    }
    if (pool.saturated) throw new OptmarkError('overloaded');
    const reserved = await store.reserve(auth.account.id, operation);
    if (!reserved.ok) {
      const s = reserved.state;
      // The reset instant from the counter's own seconds (Retry-After), so the two always agree.
      const resetsAt = utcMinuteText(resetTimeOf(new Date(Date.now() + (s.resetSeconds - 1) * 1000)));
      throw new QuotaExceededError(`The monthly ${operation} limit of ${s.limit} is used up; it resets at ${resetsAt}.`, s.resetSeconds, s);
    }
    reservation = reserved.reservation;
    if (ex.aborted) {
      void refund();
      return false;
    }
    // Room for the body: the declared length bounds it; without one, the limit does (shrunk later).
    const maxBody = deps.maxUploadBytes + MULTIPART_SLACK_BYTES;
    const capacity = declared === undefined ? maxBody : Math.max(1, declared);
    // Admission takes room for the answer too, so that a request once admitted never needs memory from
    // outside the arena.
    const slot = memory.take(capacity);
    const bodySlot = slot && operation === 'protect' ? memory.take(protectBodyCapacity(capacity)) : undefined;
    if (!slot || (operation === 'protect' && !bodySlot)) {
      memory.releaseAll();
      throw new OptmarkError('overloaded', 'The server is holding as many uploads as it can; retry shortly.');
    }
    uploadSlot = slot;
    outputSlot = bodySlot;
    const rx = new BodyReceiver({ destination: memory.view(slot), maxBodyBytes: maxBody, maxImageBytes: deps.maxUploadBytes });
    // What arrived while the store answered goes in first, in order; later chunks go straight in.
    const pending = early ?? [];
    early = undefined;
    pending.forEach((b, i) => rx.push(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer, earlyLast && i === pending.length - 1));
    receiver = rx;
    return true;
  }

  function run(receiver: BodyReceiver): void {
  receiver.done.then(
    async (upload) => {
      phases.received();
      if (ex.aborted) return;
      // Hand the unused tail of the upload's range back before the worker runs. The image inside the
      // body is smaller than the body, so an answer for the body's length has room for it.
      const input = memory.shrink(uploadSlot!, upload.length);
      const output = outputSlot && memory.shrink(outputSlot, protectBodyCapacity(upload.length));
      const range = { offset: input.offset, length: upload.length };
      const task: Task = operation === 'protect' ? { kind: 'protect', input: range, output, contentType } : { kind: 'verify', input: range, contentType };
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
        body = result.body;
      } else throw new Error('worker answered with the wrong result kind');
      // The unit is made durable before the answer goes out: a crash after this point keeps it counted
      // (the client may have its answer), a crash before gives it back. If this instance's hold was
      // reclaimed meanwhile (it missed its lease), commit throws and the answer is a 503, uncounted.
      const r = reservation;
      const state = r ? await store.commit(r) : undefined;
      const delivered = await ex.json(200, body, { ...(await rlHeaders(state)), ...phases.headers() });
      if (!delivered) await refund();
      reservation = undefined;
      finish(true);
    },
    (err: unknown) => {
      if (!ex.aborted) fail(err);
    },
  ).catch((err: unknown) => {
    if (!ex.aborted) fail(err);
    else finish(false);
  });
  }
}
