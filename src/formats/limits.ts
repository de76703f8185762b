/**
 * Limits of one file's metadata, shared by the container readers (src/formats), the XMP layer (src/xmp)
 * and protect's check of its own output (src/marking). They are checked as the reader goes, before the
 * memory they bound is spent: a count before the next packet is opened, a budget before the next byte
 * is inflated. Over an input limit: `limit_exceeded` (422); over an output limit: `output_too_large` (422).
 */
import { inflateSync } from 'node:zlib';
import { LimitExceededError, OptmarkError } from '../errors.js';

/**
 * Segments (JPEG, before the first scan) or chunks (PNG, WebP) one file may have, counted by the one walk
 * every reader shares (the C2PA detection included), and checked on what protect writes: a file of more
 * is refused with `limit_exceeded`, an output that would have more with `output_too_large`. Real files
 * have tens; each entry costs the walk one small record, so this bounds its memory to a few megabytes.
 */
export const MAX_CONTAINER_ENTRIES = 100_000;

/** Throws LimitExceededError when a walk is about to record one more entry than MAX_CONTAINER_ENTRIES. */
export function countEntry(recorded: number, container: string): void {
  if (recorded >= MAX_CONTAINER_ENTRIES)
    throw new LimitExceededError(`${container}: more than ${MAX_CONTAINER_ENTRIES} segments or chunks, the processing limit.`);
}

/** Throws OutputTooLargeError when a rewrite would produce more entries than its own reader accepts. */
export function checkOutputEntries(entries: number, container: string): void {
  if (entries > MAX_CONTAINER_ENTRIES)
    throw new OutputTooLargeError(
      `${container}: with the XMP the file would have more than ${MAX_CONTAINER_ENTRIES} segments or chunks, the processing limit.`,
    );
}

/** Standalone XMP packets (segments, chunks) one file may carry; real files have one, sometimes two or three. */
export const MAX_XMP_PACKETS = 64;

/**
 * Bytes that the compressed XMP of one file (PNG `iTXt`/`zTXt`) may inflate to, all packets together.
 * One packet may be as large as this (src/xmp/packet.ts MAX_PACKET_BYTES), the whole file no larger: a
 * 1.5 MB upload of 64 compressed packets inflated to 1 GiB before this budget existed.
 */
export const MAX_INFLATED_XMP_BYTES = 16 * 1024 * 1024;

/**
 * Bytes protect may add to a file (its XMP packet, Extended XMP segments, a VP8X header, attributes
 * of a merged packet rewritten as elements). The answer's room in the request budget is reserved for
 * the upload plus this much (answerBytesFor, src/config.ts), so an answer within it never needs
 * memory from outside the budget. A file that would grow by more (compressed XMP written back
 * uncompressed, as the XMP specification asks: a 17 KB upload came back as 16.8 MB) is refused with
 * `output_too_large`.
 */
export const MAX_PROTECT_GROWTH_BYTES = 1024 * 1024;

/** What one file's compressed metadata has left to inflate. One per read of a file. */
export class InflateBudget {
  remaining: number;

  constructor(bytes = MAX_INFLATED_XMP_BYTES) {
    this.remaining = bytes;
  }

  /**
   * Inflates zlib data within what is left, and charges it. Returns undefined when the data is not a
   * valid zlib stream (the packet is unreadable, the file is not refused for it); throws
   * LimitExceededError, having inflated no more than the budget, when it would go past it.
   */
  inflate(data: Uint8Array): Uint8Array | undefined {
    let out: Buffer;
    try {
      // maxOutputLength stops zlib as soon as the output passes it: the bomb costs the budget, no more.
      out = inflateSync(data, { maxOutputLength: Math.max(1, this.remaining) });
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') throw this.#over();
      return undefined;
    }
    if (out.length > this.remaining) throw this.#over();
    this.remaining -= out.length;
    return out;
  }

  #over(): LimitExceededError {
    this.remaining = 0;
    return new LimitExceededError(`The image's compressed metadata inflates to more than ${MAX_INFLATED_XMP_BYTES} bytes, the processing limit.`);
  }
}

/** Throws LimitExceededError once a file shows more XMP packets than MAX_XMP_PACKETS (call per packet found). */
export function countPacket(seen: number): void {
  if (seen > MAX_XMP_PACKETS) throw new LimitExceededError(`The image carries more than ${MAX_XMP_PACKETS} XMP packets, the processing limit.`);
}

/** protect would produce a file that optmark itself would refuse (or that grows past its bound). */
export class OutputTooLargeError extends OptmarkError {
  constructor(message: string) {
    super('output_too_large', message);
  }
}
