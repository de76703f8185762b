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
