/**
 * One request's body, from its headers to its release: the one owner of request memory on the event
 * loop. It keeps what arrives while the request is admitted (EarlyBody), takes the lease (src/transfer/)
 * and the client's share of arriving room (Uploads), copies the chunks into the lease, holds the body to
 * the rate floor, and says whether a refusal closes the connection. The API (./api.ts) and the
 * dashboard's JSON routes (./dashboard.ts) read their bodies through it, so every route has the same
 * edge rules: a declared Content-Length over the limit is 413 before a byte is read, a body past it is
 * 413, a body slower than the floor is 408 and closed, a body the budget or its client's share cannot
 * hold is 503.
 *
 * Uploads still arriving are watched so that slow bodies cannot hold the in-flight budget (issue #20.5):
 *
 * - one account's keys together, and one client address, may hold at most a set share of the budget in
 *   bodies still arriving (OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT and _PER_ADDRESS; the per-address one
 *   can be switched off behind a proxy); past it, 503 + Retry-After for that client only;
 * - a body must arrive at OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND on average, counted from the end of a grace
 *   period after its headers; a slower one is answered 408 `upload_too_slow` and its connection closed.
 *
 * What a request holds is what its lease holds: room beyond UPFRONT_BODY_BYTES is taken as its bytes
 * arrive, so a share is checked again whenever the lease grows. Reserving room from the declared length
 * let 13 connections that declared 25 MiB each and sent a byte a second hold the whole budget. Bodies
 * that have arrived are bounded by the queue.
 */
import type { ErrorCode } from '../errors.js';
import { OptmarkError } from '../errors.js';
import { PoolOverloadedError } from '../pool/pool.js';
import { type AnswerRef, type BytesRef, type Lease, type Transfer, TransferFullError } from '../transfer/index.js';
import type { Exchange } from './respond.js';

/**
 * Body bytes that arrive while a request is being admitted (its key checked, its quota unit reserved).
 * uWS lends a chunk only for the duration of its callback, so each is copied, in order, and handed to the
 * request's lease once it is admitted. With the store a round trip away (PostgreSQL) the whole of a small
 * upload is read in that time, on every request; a fresh allocation per chunk (up to 512 KiB: an mmap,
 * its page faults, a munmap and work for the garbage collector) cost about as much as the round trip
 * itself, so the copies go into slabs that are used again.
 */
/** uWS reads at most this much at a time (LIBUS_RECV_BUFFER_LENGTH): one slab holds any chunk. */
const SLAB_BYTES = 512 * 1024;
/** Slabs kept for the next requests (at most 4 MiB held between requests). */
const SPARE_SLABS = 8;
const spare: Uint8Array[] = [];

export class EarlyBody {
  readonly #chunks: Array<{ bytes: Uint8Array; isLast: boolean }> = [];
  readonly #slabs: Uint8Array[] = [];
  /** Where the next chunk goes in the last slab. */
  #at = 0;
  /** Bytes kept so far. */
  bytes = 0;

  /** Copies a chunk lent by uWS. */
  add(chunk: ArrayBuffer, isLast: boolean): void {
    const n = chunk.byteLength;
    let slab = this.#slabs.at(-1);
    if (!slab || slab.byteLength - this.#at < n) {
      slab = (n <= SLAB_BYTES ? spare.pop() : undefined) ?? new Uint8Array(Math.max(SLAB_BYTES, n));
      this.#slabs.push(slab);
      this.#at = 0;
    }
    const bytes = slab.subarray(this.#at, this.#at + n);
    bytes.set(new Uint8Array(chunk));
    this.#at += n;
    this.bytes += n;
    this.#chunks.push({ bytes, isLast });
  }

  /** Hands every chunk to `sink` in order (each valid only during its call, as uWS's), then lets the slabs go. */
  replay(sink: (chunk: Uint8Array, isLast: boolean) => void): void {
    try {
      for (const c of this.#chunks) sink(c.bytes, c.isLast);
    } finally {
      this.release();
    }
  }

  /** The bytes are not needed any more: the slabs go back for other requests. */
  release(): void {
    for (const s of this.#slabs) if (s.byteLength === SLAB_BYTES && spare.length < SPARE_SLABS) spare.push(s);
    this.#slabs.length = 0;
    this.#chunks.length = 0;
  }
}

/** How long a body may take before its average rate is held to the minimum (slow starts, TLS, a busy client). */
export const UPLOAD_RATE_GRACE_MS = 5_000;
/** How often arriving uploads are looked at. */
const SWEEP_MS = 1_000;

export interface UploadLimits {
  /** Bytes of arriving bodies one account (all its keys) may hold; 0: no limit. */
  perAccountBytes: number;
  /** Bytes of arriving bodies one client address may hold; 0: no limit (behind a proxy every client shares its address). */
  perAddressBytes: number;
  /** Slowest average rate a body may arrive at after the grace period; 0: no floor. */
  minBytesPerSecond: number;
}

/** 408: the body arrived slower than the configured floor. */
export class UploadTooSlowError extends OptmarkError {
  constructor(minBytesPerSecond: number) {
    super(
      'upload_too_slow',
      `The upload arrived slower than ${minBytesPerSecond} bytes per second (OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND); the connection is closed.`,
    );
  }
}

/** One arriving body: what it holds at first, and how it is told it is too slow. */
export interface Arrival {
  readonly account: number;
  readonly address: string;
  readonly bytes: number;
  readonly startedMs: number;
  received(): number;
  tooSlow(error: UploadTooSlowError): void;
}

/** The watch of one arriving body (Uploads.arrive). */
export interface ArrivalWatch {
  hold(bytes: number): void;
  end(): void;
}

export class Uploads {
  readonly #limits: UploadLimits;
  readonly #now: () => number;
  readonly #byAccount = new Map<number, number>();
  readonly #byAddress = new Map<string, number>();
  readonly #arriving = new Set<Arrival>();
  #timer: NodeJS.Timeout | undefined;

  constructor(limits: UploadLimits, now: () => number = () => performance.now()) {
    this.#limits = limits;
    this.#now = now;
  }

  now(): number {
    return this.#now();
  }

  /** Bytes of arriving bodies an account holds now. */
  heldByAccount(account: number): number {
    return this.#byAccount.get(account) ?? 0;
  }

  heldByAddress(address: string): number {
    return this.#byAddress.get(address) ?? 0;
  }

  /**
   * Starts watching an arriving body that holds `bytes` of room; throws 503 (overloaded) when its account or
   * address would hold more than its share. Returns its watch: `hold(bytes)` when the body holds more room
   * (throws 503 the same way, holding what it held), `end()` once the body has arrived or the request ended
   * (later calls do nothing).
   */
  arrive(a: Arrival): ArrivalWatch {
    this.#take(a, 0, a.bytes, 'one more of');
    this.#arriving.add(a);
    if (this.#limits.minBytesPerSecond > 0 && !this.#timer) {
      this.#timer = setInterval(() => this.sweep(), SWEEP_MS);
      this.#timer.unref();
    }
    let held = a.bytes;
    let ended = false;
    return {
      hold: (bytes: number) => {
        if (ended || bytes <= held) return;
        this.#take(a, held, bytes, 'this one growing to');
        held = bytes;
      },
      end: () => {
        if (ended) return;
        ended = true;
        this.#arriving.delete(a);
        this.#drop(this.#byAccount, a.account, held);
        this.#drop(this.#byAddress, a.address, held);
        if (this.#arriving.size === 0 && this.#timer) {
          clearInterval(this.#timer);
          this.#timer = undefined;
        }
      },
    };
  }

  /** Moves a body's hold from `from` to `to` bytes, or throws 503 when that passes a share. */
  #take(a: Arrival, from: number, to: number, what: string): void {
    const { perAccountBytes, perAddressBytes } = this.#limits;
    const account = this.heldByAccount(a.account) - from + to;
    const address = this.heldByAddress(a.address) - from + to;
    if (perAccountBytes > 0 && account > perAccountBytes) {
      throw new OptmarkError(
        'overloaded',
        `This account's uploads still arriving hold ${account - to} bytes; ${what} ${to} would pass its share (${perAccountBytes}). Retry once they have arrived.`,
      );
    }
    if (perAddressBytes > 0 && address > perAddressBytes) {
      throw new OptmarkError(
        'overloaded',
        `Uploads from this address still arriving hold ${address - to} bytes; ${what} ${to} would pass its share (${perAddressBytes}). Retry once they have arrived.`,
      );
    }
    this.#byAccount.set(a.account, account);
    this.#byAddress.set(a.address, address);
  }

  /** Tells every body behind the rate floor that it is too slow (the timer calls this each second). */
  sweep(): void {
    const min = this.#limits.minBytesPerSecond;
    if (min <= 0) return;
    const now = this.#now();
    for (const a of [...this.#arriving]) {
      const late = (now - a.startedMs - UPLOAD_RATE_GRACE_MS) / 1000;
      if (late > 0 && a.received() < min * late) {
        this.#arriving.delete(a);
        a.tooSlow(new UploadTooSlowError(min));
      }
    }
  }

  /** Stops the timer (at shutdown). */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #drop<K>(map: Map<K, number>, key: K, bytes: number): void {
    const left = (map.get(key) ?? 0) - bytes;
    if (left > 0) map.set(key, left);
    else map.delete(key);
  }
}

/** Body bytes kept while a request is being admitted (the socket is paused; one receive buffer at most, normally). */
const MAX_EARLY_BYTES = 4 * 1024 * 1024;

/**
 * A refusal in the middle of a body closes the connection, so that the rest is not read; when no more
 * than this much is still to come, it is read and dropped instead. Closing a socket whose unread bytes
 * sit in the kernel sends a reset, which can reach the client before the answer does (it then sees a
 * reset, not the 503); draining 256 KiB costs a socket buffer's worth of reading and keeps the answer.
 */
export const DRAIN_BYTES = 256 * 1024;

/** What a route's body may be. */
export interface BodyRules {
  /** Most bytes the body may have, framing included. */
  maxBytes: number;
  /** The 413 for a declared length over maxBytes (`declared`), or for a body that grew past it. */
  tooLarge(declared?: number): OptmarkError;
  /** The code of a Content-Length that is not a number (and, with `nonEmpty`, of an empty body). */
  malformed: ErrorCode;
  /** An empty body is refused (an upload needs one). */
  nonEmpty: boolean;
}

export interface IntakeDeps {
  transfer: Transfer;
  uploads: Uploads;
}

/** Who sends the body: its share of arriving room is counted per account and per address. */
export interface Sender {
  account: number;
  address: string;
}

function parseLength(raw: string): number | undefined | 'invalid' {
  if (raw === '') return undefined;
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 'invalid';
}

/**
 * One request's body and memory. Made in the uWS handler (uWS hands the body only to a reader attached
 * before the handler returns): until `receive`, the socket is paused and what arrives is kept. Every
 * refusal reads `closeConnection()` first; `release()` ends it, once, whatever happened.
 */
export class Intake {
  readonly #ex: Exchange;
  readonly #deps: IntakeDeps;
  readonly #rules: BodyRules;
  /** Chunks that arrived before `receive` took over (copied: uWS reuses its buffer), or undefined once it did. */
  #early: EarlyBody | undefined = new EarlyBody();
  #sink: ((chunk: ArrayBuffer | Uint8Array, isLast: boolean) => void) | undefined;
  #paused = false;
  #declared: number | undefined;
  #lease: Lease | undefined;
  /** The watch of the arriving body (its share of the client's room); set while the body arrives. */
  #arrival: ArrivalWatch | undefined;
  /** Set while the body arrives: ends `receive` with the rate floor's refusal. */
  #tooSlow: ((err: UploadTooSlowError) => void) | undefined;
  /** Why the rest of the body is not to be read: too slow, or refused mid-body; undefined while it may be. */
  #cut: 'slow' | 'refused' | undefined;

  constructor(ex: Exchange, deps: IntakeDeps, rules: BodyRules) {
    this.#ex = ex;
    this.#deps = deps;
    this.#rules = rules;
    ex.res.onData((chunk, isLast) => {
      if (this.#sink) return this.#sink(chunk, isLast);
      if (!this.#early) return;
      if (this.#early.bytes + chunk.byteLength <= MAX_EARLY_BYTES) return this.#early.add(chunk, isLast);
      this.#early.release();
      this.#early = undefined;
    });
    try {
      ex.res.pause();
      this.#paused = true;
    } catch {
      // uWS's JS fallback has no pause: the early chunks are kept up to MAX_EARLY_BYTES anyway.
    }
  }

  /** Body bytes received so far. */
  get received(): number {
    return this.#lease?.received ?? 0;
  }

  /** The declared Content-Length, from the headers: throws when it is not a number or over the limit. */
  declare(contentLength: string): void {
    const declared = parseLength(contentLength);
    if (declared === 'invalid') throw new OptmarkError(this.#rules.malformed, 'Content-Length is not a number.');
    if (declared !== undefined && declared > this.#rules.maxBytes) throw this.#rules.tooLarge(declared);
    this.#declared = declared;
  }

  /**
   * Room for the body from the in-flight budget (and, with `answer`, for a protect's answer), and its
   * sender's share of arriving room; throws 503 when either is full. The declared length bounds the
   * room; without one, the limit does. Past UPFRONT_BODY_BYTES it is taken as the bytes arrive.
   */
  admit(answer: boolean, sender: Sender): void {
    const { transfer, uploads } = this.#deps;
    const lease = transfer.admit(this.#declared === undefined ? this.#rules.maxBytes : Math.max(1, this.#declared), answer);
    if (!lease) throw new PoolOverloadedError('The server is holding as many uploads as it can; retry shortly.');
    this.#lease = lease;
    this.#arrival = uploads.arrive({
      ...sender,
      bytes: lease.held,
      startedMs: uploads.now(),
      received: () => lease.received,
      tooSlow: (err) => this.#tooSlow?.(err),
    });
  }

  /**
   * Copies the body into the lease; resolves once it has arrived, rejects past the limits, on an empty
   * body (when the rules refuse one), when the rate floor or the budget refuses it, or when the client leaves.
   */
  receive(): Promise<void> {
    const lease = this.#lease;
    if (!lease) return Promise.reject(new Error('intake: receive before admit'));
    return new Promise((resolve, reject) => {
      let settled = false;
      const end = (err?: Error, cut?: 'slow' | 'refused'): void => {
        settled = true;
        this.#tooSlow = undefined;
        if (cut) this.#cut = cut;
        if (err) reject(err);
        else resolve();
      };
      this.#ex.onAbort(() => settled || end(new ClientGoneError()));
      this.#tooSlow = (err) => settled || end(err, 'slow');
      const onData = (chunk: ArrayBuffer | Uint8Array, isLast: boolean): void => {
        if (settled) return; // refused already: uWS drains the rest of the body
        if (lease.received + chunk.byteLength > this.#rules.maxBytes) return end(this.#rules.tooLarge());
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
            return end(err as Error, 'refused');
          }
        }
        if (!isLast) return;
        if (lease.received === 0 && this.#rules.nonEmpty) return end(new OptmarkError(this.#rules.malformed, 'The request has no body.'));
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

  /** The references a worker task carries (see Lease.seal). */
  seal(): { input: BytesRef; output: BytesRef | undefined } {
    return this.#lease!.seal();
  }

  /** The answer's bytes from what the worker handed back (see Lease.answer). */
  answer(ref: AnswerRef): Uint8Array {
    return this.#lease!.answer(ref);
  }

  /** The whole body, sealed, as a copy on this thread (a small JSON body). */
  bytes(): Buffer {
    this.#lease!.seal();
    return Buffer.from(this.#lease!.body());
  }

  /**
   * Called once before a refusal goes out: the socket reads again, and true when the answer closes the
   * connection. A body refused as too slow is closed; one refused mid-body is closed unless at most
   * DRAIN_BYTES of its declared length are still to come (then they are read and dropped, so the
   * answer is not overtaken by a reset). Any other refusal lets uWS read the rest of the body and drop it.
   */
  closeConnection(): boolean {
    this.#resume();
    if (this.#cut === 'slow') return true;
    if (this.#cut !== 'refused') return false;
    return this.#declared === undefined || this.#declared - this.received > DRAIN_BYTES;
  }

  /** Gives back the lease and the share; later calls do nothing. */
  release(): void {
    this.#arrival?.end();
    this.#tooSlow = undefined;
    this.#early?.release();
    this.#early = undefined;
    this.#lease?.release();
  }

  /** uWS forbids touching `res` after an abort or a finished answer. */
  #resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    if (!this.#ex.aborted && !this.#ex.answered) this.#ex.res.resume();
  }
}

/** The client went away before its body arrived. */
export class ClientGoneError extends Error {}
