/**
 * Request memory, behind one wall. This module alone knows where an upload's bytes and its answer's
 * bytes live while a request is in flight: one SharedArrayBuffer (the arena, ./arena.ts) allocated at
 * start and mapped once by every worker. Per request nothing is allocated, copied or transferred beyond
 * the one copy out of uWS's receive buffer, and no V8 heap sees fresh external memory (transferring
 * fresh ArrayBuffers instead cost about a third more server CPU per 12 MP protect, in V8's mark-compacts).
 *
 * The HTTP layer asks for a lease (admission: the in-flight budget, OPTMARK_MAX_INFLIGHT_BYTES), writes
 * the body's chunks into it, seals it (the references a worker task carries), reads the answer from it
 * and releases it once. Workers turn the references into plain Uint8Arrays (./worker.ts). Idle pages go
 * back to the OS after a quiet stretch (./idle.ts).
 */
import { answerBytesFor } from '../config.js';
import { Arena, type Slot } from './arena.js';
import { QuietTimer, releaseFreePages } from './idle.js';

/** Where a task's bytes lie; only ./worker.ts reads it. */
export interface BytesRef {
  readonly offset: number;
  readonly length: number;
}

/** How a worker hands an answer back: its length, written in place into the lease's answer room, or bytes of its own. */
export type AnswerRef = { readonly inPlace: number } | { readonly bytes: Uint8Array };

/** What every worker is given once, at start, to see the leases' bytes. */
export interface TransferShare {
  readonly buffer: SharedArrayBuffer;
}

export interface TransferOptions {
  /** The in-flight budget: every upload and protect answer in flight together. */
  capacityBytes: number;
  /** Bytes at the start of the budget that stay resident while idle (the warm start). */
  warmBytes: number;
  /** Unbroken quiet time (no lease) before idle pages go back to the OS. */
  quietMs?: number;
}

export class Transfer {
  readonly #arena: Arena;
  readonly #quiet: QuietTimer;
  #leases = 0;

  constructor(options: TransferOptions) {
    this.#arena = new Arena(options.capacityBytes);
    this.#quiet = new QuietTimer(
      options.quietMs ?? 2000,
      () => this.#leases > 0,
      () => releaseFreePages(this.#arena, options.warmBytes),
    );
  }

  get share(): TransferShare {
    return { buffer: this.#arena.buffer };
  }

  /** Bytes leased now. */
  get used(): number {
    return this.#arena.used;
  }

  get capacity(): number {
    return this.#arena.capacity;
  }

  /** Leases not yet released. */
  get leases(): number {
    return this.#leases;
  }

  /**
   * A lease with room for a body of up to `bodyBytes` and, with `answer`, for its protect answer; or
   * undefined when the budget has no room for it now (the caller answers 503).
   */
  admit(bodyBytes: number, answer: boolean): Lease | undefined {
    const input = this.#arena.alloc(bodyBytes);
    if (!input) return undefined;
    const output = answer ? this.#arena.alloc(answerBytesFor(bodyBytes)) : undefined;
    if (answer && !output) {
      this.#arena.free(input);
      return undefined;
    }
    this.#leases++;
    return new Lease(this.#arena, input, output, bodyBytes, () => {
      if (--this.#leases === 0) this.#quiet.idle();
    });
  }

  /** Stops the idle timer (at shutdown). */
  stop(): void {
    this.#quiet.stop();
  }
}

/**
 * One request's memory. Release it once, after the worker task that was given its references has
 * settled (the pool settles a timed-out task only once its worker is gone).
 */
export class Lease {
  readonly #arena: Arena;
  readonly #room: number;
  readonly #released: () => void;
  #input: Slot | undefined;
  #output: Slot | undefined;
  /** The upload's room as a Buffer (a view, no copy): its fill() is a memcpy. */
  #dest: Buffer | undefined;
  #done = false;
  /** Body bytes written so far. */
  received = 0;

  constructor(arena: Arena, input: Slot, output: Slot | undefined, room: number, released: () => void) {
    this.#arena = arena;
    this.#input = input;
    this.#output = output;
    this.#room = room;
    this.#released = released;
    this.#dest = Buffer.from(arena.buffer, input.offset, room);
  }

  /** Appends a chunk of the body (valid only during this call); false, writing nothing, when it does not fit. */
  write(chunk: ArrayBuffer): boolean {
    const dest = this.#dest;
    const need = this.received + chunk.byteLength;
    if (!dest || need > this.#room) return false;
    // Buffer#fill copies with memcpy. TypedArray#set into shared memory goes through V8's relaxed
    // (atomic-safe) memmove, byte by byte on unaligned chunks: ten times slower.
    if (chunk.byteLength > 0) dest.fill(new Uint8Array(chunk), this.received, need);
    this.received = need;
    return true;
  }

  /**
   * The body is complete: the rooms shrink to what it needs, and the references a worker task carries
   * come back (the answer's only for a lease admitted with one).
   */
  seal(): { input: BytesRef; output: BytesRef | undefined } {
    if (!this.#input || !this.#dest) throw new Error('lease: sealed twice or after release');
    this.#dest = undefined;
    this.#input = this.#arena.shrink(this.#input, this.received);
    if (this.#output) this.#output = this.#arena.shrink(this.#output, answerBytesFor(this.received));
    return { input: { offset: this.#input.offset, length: this.received }, output: this.#output };
  }

  /**
   * The answer's bytes, from what the worker handed back; valid until release. The body's room goes
   * back now (the worker is done with it).
   */
  answer(ref: AnswerRef): Uint8Array {
    if (this.#input) this.#arena.free(this.#input);
    this.#input = undefined;
    if ('bytes' in ref) return ref.bytes;
    if (!this.#output || ref.inPlace > this.#output.length) throw new Error('lease: an answer in place without room for it');
    return this.#arena.view(this.#output, ref.inPlace);
  }

  /** Gives every byte back; later calls do nothing. */
  release(): void {
    if (this.#done) return;
    this.#done = true;
    this.#dest = undefined;
    if (this.#input) this.#arena.free(this.#input);
    if (this.#output) this.#arena.free(this.#output);
    this.#input = this.#output = undefined;
    this.#released();
  }
}
