/**
 * The worker's side of the wall: the references a task carries become plain Uint8Arrays over the
 * memory shared at start, and an answer goes back in place or as bytes of its own.
 */
import type { AnswerRef, BytesRef, TransferShare } from './index.js';

export class TransferViews {
  readonly #buffer: SharedArrayBuffer | undefined;

  constructor(share: TransferShare | undefined) {
    this.#buffer = share?.buffer;
  }

  /** The bytes a reference names (a view: no copy, no allocation of request size). */
  view(ref: BytesRef): Uint8Array {
    if (!this.#buffer) throw new Error('this worker was started without shared request memory');
    return new Uint8Array(this.#buffer, ref.offset, ref.length);
  }

  /** How to hand `body` back: in place when it was written into `room`, else as its own bytes. */
  answer(body: Uint8Array, room: Uint8Array | undefined): AnswerRef {
    if (room && body.buffer === room.buffer && body.byteOffset === room.byteOffset) return { inPlace: body.length };
    return { bytes: body };
  }
}
