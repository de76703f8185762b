/**
 * Request memory, behind one wall. This module alone knows where an upload's bytes and its answer's
 * bytes live while a request is in flight: one SharedArrayBuffer (the arena, ./arena.ts) allocated at
 * start and mapped once by every worker. Per request nothing is allocated, copied or transferred beyond
 * the one copy out of uWS's receive buffer, and no V8 heap sees fresh external memory (transferring
 * fresh ArrayBuffers instead cost about a third more server CPU per 12 MP protect, in V8's mark-compacts).
 *
 * The HTTP layer asks for a lease (admission: the in-flight budget, OPTMARK_MAX_INFLIGHT_BYTES), writes
 * the body's chunks into it, seals it (the references a worker task carries), reads the answer from it
 * and releases it once. A body declared up to UPFRONT_BODY_BYTES gets all its room, and a protect its
 * answer's, at admission; a larger one (or one of unknown length) gets UPFRONT_BODY_BYTES and its room
 * grows as its bytes arrive (in place when it can, else moved, doubling), its answer's room at seal: a
 * client that declares 25 MiB and sends a byte a second holds 2 MiB of the budget, not 59 (issue #20). Workers turn the references into plain Uint8Arrays (./worker.ts). Idle pages go
 * back to the OS after a quiet stretch (./idle.ts).
 */
import { answerBytesFor } from '../config.js';
import { OptmarkError } from '../errors.js';
import { Arena, type Slot } from './arena.js';
import { QuietTimer, releaseFreePages } from './idle.js';

/**
 * Room a body is given at admission, before any of it arrived. Bodies declared up to this (most photos)
 * are admitted as before, with all their room and their answer's: no growth on the hot path.
 */
export const UPFRONT_BODY_BYTES = 2 * 1024 * 1024;

/**
 * What a write did: `ok`; `grown` (the lease holds more of the budget now); `too-large` (past the room
 * it was admitted with: nothing written); `full` (the budget has no room for the next bytes: nothing written).
 */
export type WriteResult = 'ok' | 'grown' | 'too-large' | 'full';

/** 503: the in-flight budget could not hold a request's next bytes or its answer. */
export class TransferFullError extends OptmarkError {
  constructor(what: string) {
    super('overloaded', `The server is holding as many uploads as it can (no room for ${what}); retry shortly.`);
  }
}

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
   * A lease for a body of up to `bodyBytes` and, with `answer`, for its protect answer; or undefined when
   * the budget has no room for it now (the caller answers 503). Up to UPFRONT_BODY_BYTES, all the room is
   * taken now; beyond, UPFRONT_BODY_BYTES now and the rest as the body arrives.
   */
  admit(bodyBytes: number, answer: boolean): Lease | undefined {
    const upfront = bodyBytes <= UPFRONT_BODY_BYTES;
    const input = upfront ? this.#arena.alloc(bodyBytes) : this.#arena.alloc(UPFRONT_BODY_BYTES, bodyBytes);
    if (!input) return undefined;
    const output = answer && upfront ? this.#arena.alloc(answerBytesFor(bodyBytes)) : undefined;
    if (answer && upfront && !output) {
      this.#arena.free(input);
      return undefined;
    }
    this.#leases++;
    return new Lease(this.#arena, input, output, bodyBytes, answer && !upfront, () => {
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
  /** The most body bytes it takes (the declared length, or the limit). */
  readonly #room: number;
  /** A protect whose answer's room is taken at seal (its body's room grows as it arrives). */
  readonly #answerAtSeal: boolean;
  readonly #released: () => void;
  #input: Slot | undefined;
  #output: Slot | undefined;
  /** The upload's room as a Buffer (a view, no copy): its fill() is a memcpy. */
  #dest: Buffer | undefined;
  #done = false;
  /** Body bytes written so far. */
  received = 0;

  constructor(arena: Arena, input: Slot, output: Slot | undefined, room: number, answerAtSeal: boolean, released: () => void) {
    this.#arena = arena;
    this.#input = input;
    this.#output = output;
    this.#room = room;
    this.#answerAtSeal = answerAtSeal;
    this.#released = released;
    this.#dest = Buffer.from(arena.buffer, input.offset, Math.min(room, input.length));
  }

  /** Bytes of the budget it holds now (its rooms, in whole pages). */
  get held(): number {
    return (this.#input?.length ?? 0) + (this.#output?.length ?? 0);
  }

  /** Appends a chunk of the body (valid only during this call); see WriteResult. */
  write(chunk: ArrayBuffer | Uint8Array): WriteResult {
    let dest = this.#dest;
    const need = this.received + chunk.byteLength;
    if (!dest || need > this.#room) return 'too-large';
    let result: WriteResult = 'ok';
    if (need > dest.length) {
      dest = this.#grow(need);
      if (!dest) return 'full';
      result = 'grown';
    }
    // Buffer#fill copies with memcpy. TypedArray#set into shared memory goes through V8's relaxed
    // (atomic-safe) memmove, byte by byte on unaligned chunks: ten times slower.
    if (chunk.byteLength > 0) dest.fill(chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk), this.received, need);
    this.received = need;
    return result;
  }

  /**
   * Room for at least `need` body bytes: the slot grows in place (to double, or to what is needed), else
   * the bytes so far move to a new slot; undefined when the budget has neither.
   */
  #grow(need: number): Buffer | undefined {
    const old = this.#input!;
    const target = Math.min(this.#room, Math.max(need, 2 * old.length));
    let slot = this.#arena.grow(old, target) ?? this.#arena.grow(old, need);
    if (!slot) {
      const moved = this.#arena.alloc(target, this.#room) ?? this.#arena.alloc(need);
      if (!moved) return undefined;
      const to = Buffer.from(this.#arena.buffer, moved.offset, moved.length);
      // Buffer#copy is a memmove (see write).
      this.#dest!.copy(to, 0, 0, this.received);
      this.#arena.free(old);
      slot = moved;
    }
    this.#input = slot;
    this.#dest = Buffer.from(this.#arena.buffer, slot.offset, Math.min(this.#room, slot.length));
    return this.#dest;
  }

  /**
   * The body is complete: the rooms shrink to what it needs, and the references a worker task carries
   * come back (the answer's only for a lease admitted with one). A lease whose answer's room is taken now
   * throws TransferFullError (503) when the budget cannot hold it.
   */
  seal(): { input: BytesRef; output: BytesRef | undefined } {
    if (!this.#input || !this.#dest) throw new Error('lease: sealed twice or after release');
    if (this.#answerAtSeal && !this.#output) {
      this.#output = this.#arena.alloc(answerBytesFor(this.received));
      if (!this.#output) throw new TransferFullError("the answer's bytes");
    }
    this.#dest = undefined;
    this.#input = this.#arena.shrink(this.#input, this.received);
    if (this.#output) this.#output = this.#arena.shrink(this.#output, answerBytesFor(this.received));
    return { input: { offset: this.#input.offset, length: this.received }, output: this.#output };
  }

  /** The sealed body's bytes on this thread (a view, valid until `answer` or `release`). */
  body(): Uint8Array {
    if (!this.#input || this.#dest) throw new Error('lease: body before seal or after answer');
    return this.#arena.view(this.#input, this.received);
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
