/**
 * One request's quota unit and Idempotency-Key, from reservation to settlement. The unit is counted when
 * it is reserved and held by this instance; it is kept (committed) when every byte of a 200 but the last
 * is with the socket, and the last byte goes the instant the commit is on its way to the store (SQLite:
 * done; PostgreSQL: its statement written to the connection, which the database runs even if this
 * process dies the next instant). It is given back when the answer was not delivered or anything
 * failed; a crash before the commit leaves the hold to a reconciliation, which gives it back (the client
 * has no complete answer). So no client ever gets a complete 200 for a unit that was given back, and a
 * unit is charged for an answer that never arrived only if the process dies between the commit and the
 * write of the last byte (docs/scaling.md).
 *
 * That window is closed for clients that send an Idempotency-Key (./idempotency.ts) and retry with it: the
 * key is reserved with the unit and committed, with the SHA-256 of the uploaded image (the worker's), in
 * the commit's own statement. A retry whose key is committed takes no unit and is processed again
 * (`Idempotent-Replayed: true`, the same bytes: protect and verify are deterministic), its RateLimit headers
 * the counter as it is; a key still held is 409 with Retry-After; another image or operation under the key
 * is 422 (docs/quotas.md "Retries"). Without the header the flow is unchanged: no extra store call.
 */
import { OptmarkError } from '../errors.js';
import type { Logger } from '../log.js';
import {
  isStoreUnavailable,
  rateLimitHeaders,
  resetInstantOf,
  utcMinuteText,
  type IdempotentRequest,
  type Operation,
  type PriorRequest,
  type QuotaState,
  type Reservation,
  type Store,
} from '../store/index.js';
import { IDEMPOTENCY_RETRY_AFTER_SECONDS } from './idempotency.js';
import type { Headers } from './respond.js';

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

/**
 * A store call that timed out waiting for SQLite's write lock (busy_timeout), or a PostgreSQL store that
 * cannot answer (down, slower than its statement timeout, out of connections) or that reclaimed this
 * instance's hold, means the server cannot serve now (503 + Retry-After), not that it is broken (500).
 * No unit is ever granted without its reservation written.
 */
export function busyAsOverload(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code))
    return new OptmarkError('overloaded', 'The account store is busy; retry shortly.', { cause: err });
  if (isStoreUnavailable(err)) return new OptmarkError('overloaded', 'The account store is unavailable; retry shortly.', { cause: err });
  return err;
}

export class QuotaUnit {
  readonly #store: Store;
  readonly #log: Logger;
  readonly #reqId: string;
  readonly #operation: Operation;
  /** The account, once its key is known good: the RateLimit headers of any later answer are its counter's. */
  accountId: number | undefined;
  #reservation: Reservation | undefined;
  /** The counter just after the reservation (this unit counted), or as it is for a replay: the RateLimit headers of a 200. */
  #reserved: QuotaState | undefined;
  /** The request's Idempotency-Key; the upload's SHA-256 is set on it before the commit. */
  #idempotency: IdempotentRequest | undefined;
  /** A replay (the key's unit is committed, no unit taken): the SHA-256 the upload must have. */
  #replayOf: string | undefined;

  constructor(store: Store, log: Logger, reqId: string, operation: Operation) {
    this.#store = store;
    this.#log = log;
    this.#reqId = reqId;
    this.#operation = operation;
  }

  /** The request carries an Idempotency-Key (the worker is asked for the upload's digest). */
  get idempotent(): boolean {
    return this.#idempotency !== undefined;
  }

  /** The key's unit was committed before: the answer is built again, without a unit. */
  get replay(): boolean {
    return this.#replayOf !== undefined;
  }

  /** Reserves the unit (with the key, when there is one); throws 429, 409 or 422 as the counter and key say. */
  async reserve(accountId: number, key: string | undefined): Promise<void> {
    const idempotency = key === undefined ? undefined : { key };
    const reserved = await this.#store.reserve(accountId, this.#operation, undefined, idempotency);
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
  bindUpload(sha256: string | undefined): void {
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

  /** The RateLimit headers of a 200 (and `Idempotent-Replayed` for a replay). */
  async answerHeaders(): Promise<Headers> {
    const headers = await this.#rateLimitHeaders(this.#reserved);
    if (this.#replayOf !== undefined) headers['Idempotent-Replayed'] = 'true';
    return headers;
  }

  /**
   * Keeps the reserved unit, durably, and calls `onSent` the instant the commit is on its way to the
   * store, so the last byte does not wait a database round trip (on a busy machine the widest window a
   * kill -9 can fall in). True when the unit is kept (`onSent` was called, or there was no unit to keep:
   * a replay); false when it cannot be kept and `onSent` was not called (the answer is cut short).
   */
  async commit(onSent: () => void): Promise<boolean> {
    const r = this.#reservation;
    if (!r) {
      onSent();
      return true;
    }
    let sent = false;
    try {
      await this.#store.commit(r, undefined, () => {
        sent = true;
        onSent();
      });
      return true;
    } catch (err) {
      if (sent) {
        // The answer went out with its commit written; only the acknowledgement failed. The store does it again.
        this.#log.error({ reqId: this.#reqId, err }, 'quota commit unconfirmed (retried in the background)');
        return true;
      }
      // The store is down or this instance's hold was reclaimed (it missed its lease): no complete answer,
      // and the unit goes back (the refund is retried, or was already done by the reconciliation).
      this.#log.error({ reqId: this.#reqId, err }, 'quota commit failed; the answer is cut short');
      return false;
    }
  }

  /**
   * Settles the unit once the answer ended: kept when it was delivered, else given back (also after its
   * commit: the answer never reached the client).
   */
  async settle(delivered: boolean): Promise<void> {
    if (delivered) this.#reservation = undefined;
    else await this.giveBack();
  }

  /** Gives back the reserved unit, once. */
  async giveBack(): Promise<QuotaState | undefined> {
    const r = this.#reservation;
    this.#reservation = undefined;
    if (!r) return undefined;
    try {
      return await this.#store.refund(r);
    } catch (err) {
      // The store retries it (PostgreSQL) or the unit stays held until this instance's hold is reconciled.
      this.#log.error({ reqId: this.#reqId, err }, 'quota refund failed');
      return undefined;
    }
  }

  /**
   * The headers of a refusal, after giving the unit back (so the RateLimit headers show it given back): a
   * refusal that took no unit shows the counter the reservation read (a replay's: as it is), 429 and 409
   * their Retry-After. A store that cannot answer is not asked again.
   */
  async refusalHeaders(err: unknown): Promise<Headers> {
    const given = await this.giveBack();
    const counted = err instanceof QuotaExceededError || err instanceof KeyInUseError;
    const state = counted ? err.state : (given ?? (this.#replayOf !== undefined ? this.#reserved : undefined));
    const headers = isStoreUnavailable(err) ? {} : await this.#rateLimitHeaders(state);
    if (counted) headers['Retry-After'] = String(err.retryAfter);
    return headers;
  }

  /** RateLimit headers are a courtesy: a store that cannot be read must not turn an answer into a crash. */
  async #rateLimitHeaders(known?: QuotaState): Promise<Headers> {
    if (known) return rateLimitHeaders(known);
    if (this.accountId === undefined) return {};
    try {
      return rateLimitHeaders(await this.#store.quotaState(this.accountId, this.#operation));
    } catch (err) {
      this.#log.error({ reqId: this.#reqId, err }, 'quota state unavailable');
      return {};
    }
  }
}
