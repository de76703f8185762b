/**
 * Uploads still arriving, watched so that slow bodies cannot hold the in-flight budget (issue #20.5):
 *
 * - one account's keys together, and one client address, may hold at most a set share of the budget in
 *   bodies still arriving (OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT and _PER_ADDRESS; the per-address one
 *   can be switched off behind a proxy); past it, 503 + Retry-After for that client only;
 * - a body must arrive at OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND on average, counted from the end of a grace
 *   period after its headers; a slower one is answered 408 `upload_too_slow` and its connection closed.
 *
 * What a request holds is what its lease holds (src/transfer/): room beyond UPFRONT_BODY_BYTES is taken as
 * its bytes arrive, so a share is checked again whenever the lease grows. Before, room was reserved from
 * the declared length: 13 connections that declared 25 MiB each and sent a byte a second held the whole
 * budget, and most other protects were answered 503. Bodies that have arrived are bounded by the queue.
 */
import { OptmarkError } from '../errors.js';

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
