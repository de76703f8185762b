/**
 * Receives one request body chunk by chunk (from uWS `onData`) into one bounded destination, a range of
 * the shared arena. This is all the event-loop thread does with an upload: each byte is copied once, out
 * of uWS's short-lived chunk, and an image worker parses the multipart framing in place
 * (src/pipeline/upload.ts).
 */
import { OptmarkError } from '../errors.js';

export interface BodyReceiverOptions {
  /** Room for min(Content-Length, limit) bytes, or the limit when the length is unknown. */
  destination: Uint8Array;
  /** Bytes a body may have at most (the image limit plus the multipart framing allowed on top). */
  maxBodyBytes: number;
  /** The configured image limit, for the 413 message. */
  maxImageBytes: number;
}

export class BodyReceiver {
  readonly done: Promise<Uint8Array>;
  #resolve!: (body: Uint8Array) => void;
  #reject!: (err: OptmarkError) => void;
  #failed: OptmarkError | undefined;
  /** The destination as a Buffer (a view, no copy): its fill() is the memcpy push needs. */
  #dest: Buffer | undefined;
  readonly #maxBody: number;
  readonly #maxImage: number;
  /** Request body bytes seen so far. */
  received = 0;

  constructor(options: BodyReceiverOptions) {
    const d = options.destination;
    this.#dest = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    this.#maxBody = options.maxBodyBytes;
    this.#maxImage = options.maxImageBytes;
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // Callers attach to `done` only after the body ends; a rejection before that is not unhandled.
    this.done.catch(() => undefined);
  }

  get failed(): OptmarkError | undefined {
    return this.#failed;
  }

  /** Feeds one chunk (valid only during this call). Throws the error that ends the upload, if any. */
  push(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.#failed) throw this.#failed;
    const dest = this.#dest!;
    const at = this.received;
    const need = at + chunk.byteLength;
    this.received = need;
    if (need > this.#maxBody || need > dest.length) {
      // Past the limit, or past the Content-Length the client declared (and was given room for).
      const past = need > this.#maxBody ? `the ${this.#maxImage}-byte limit` : 'its declared Content-Length';
      this.abandon(new OptmarkError('payload_too_large', `The upload is larger than ${past}.`));
      throw this.#failed!;
    }
    // Buffer#fill copies with memcpy. TypedArray#set into shared memory goes through V8's relaxed
    // (atomic-safe) memmove, byte by byte: ten times slower.
    if (chunk.byteLength > 0) dest.fill(new Uint8Array(chunk), at, need);
    if (isLast) {
      this.#dest = undefined;
      if (need === 0) this.abandon(new OptmarkError('malformed_multipart', 'The request has no body.'));
      else this.#resolve(dest.subarray(0, need));
    }
  }

  /** Stops receiving; the destination is released. */
  abandon(reason: OptmarkError): void {
    if (this.#failed) return;
    this.#failed = reason;
    this.#dest = undefined;
    this.#reject(reason);
  }
}
