/**
 * Receives one multipart/form-data upload chunk by chunk (from uWS `onData`) through busboy into one
 * bounded destination (a range of the shared arena). The event-loop thread copies each byte of the image
 * once: out of uWS's short-lived chunk into the destination, which the worker then reads in place.
 */
import busboy from 'busboy';
import { OptmarkError } from '../errors.js';

/** Multipart framing around the image (boundaries, part headers) allowed on top of the image limit. */
export const MULTIPART_SLACK_BYTES = 64 * 1024;

export interface ReceivedImage {
  /** The image bytes: a view of the start of the destination. */
  bytes: Uint8Array;
  filename: string | undefined;
  mimeType: string;
}

export interface ReceiverOptions {
  contentType: string;
  /**
   * Where the image goes: room for min(Content-Length, limit) bytes, or the limit when the length is
   * unknown. An image that does not fit is refused.
   */
  destination: Uint8Array;
  /** The configured image limit (for the 413 message and the body's cut-off). */
  maxImageBytes: number;
}

/** True for the media types an image part may declare (curl labels unknown extensions such as .webp octet-stream). */
function acceptablePartType(mimeType: string): boolean {
  const t = mimeType.toLowerCase();
  return t.startsWith('image/') || t === 'application/octet-stream';
}

/** Throws the 4xx the request's Content-Type deserves, or returns nothing when it is multipart/form-data. */
export function checkContentType(contentType: string): void {
  if (!/^multipart\/form-data\s*(;|$)/i.test(contentType.trim())) {
    throw new OptmarkError('unsupported_media_type', 'Send multipart/form-data with one "image" file part.');
  }
}

export class MultipartReceiver {
  readonly #options: ReceiverOptions;
  readonly #parser: busboy.Busboy;
  readonly done: Promise<ReceivedImage>;
  #resolve!: (image: ReceivedImage) => void;
  #reject!: (err: OptmarkError) => void;
  #failed: OptmarkError | undefined;
  /** The destination as a Buffer (a view, no copy): its fill() is the memcpy #append needs. */
  #dest: Buffer | undefined;
  #length = 0;
  #filename: string | undefined;
  #mimeType = '';
  #imageParts = 0;
  #fileEnded = false;
  /** Request body bytes seen so far. */
  received = 0;

  constructor(options: ReceiverOptions) {
    this.#options = options;
    this.#dest = Buffer.from(options.destination.buffer, options.destination.byteOffset, options.destination.byteLength);
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // Callers attach to `done` only after the body ends; a rejection before that is not unhandled.
    this.done.catch(() => undefined);
    try {
      this.#parser = busboy({
        headers: { 'content-type': options.contentType },
        // Browsers and curl send a non-ASCII filename="..." as raw UTF-8 (busboy's default reads latin1).
        defParamCharset: 'utf8',
        limits: { fieldSize: 64 * 1024, fields: 16, files: 16, parts: 32, headerPairs: 32 },
      });
    } catch (err) {
      throw new OptmarkError('malformed_multipart', `The multipart Content-Type is not usable: ${(err as Error).message}`);
    }
    this.#parser.on('file', (name, stream, info) => {
      // Destroying the parser errors every open part stream: that must never be an unhandled 'error'.
      stream.on('error', () => undefined);
      if (name !== 'image') return this.#fail(new OptmarkError('unexpected_part', `Unexpected file part "${name}"; send only "image".`));
      if (++this.#imageParts > 1) return this.#fail(new OptmarkError('too_many_parts'));
      if (!acceptablePartType(info.mimeType)) {
        return this.#fail(new OptmarkError('unsupported_media_type', `The "image" part is ${info.mimeType}; it must be image/*.`));
      }
      this.#filename = info.filename;
      this.#mimeType = info.mimeType;
      // Flowing mode: busboy hands data over synchronously inside write(), while the chunk is valid.
      stream.on('data', (data: Buffer) => this.#append(data));
      stream.on('end', () => {
        this.#fileEnded = true;
      });
    });
    this.#parser.on('field', (name) => {
      this.#fail(
        new OptmarkError(name === 'image' ? 'missing_image' : 'unexpected_part', name === 'image' ? 'The "image" part must be a file, not a text field.' : `Unexpected field "${name}"; send only the "image" file part.`),
      );
    });
    const limit = (what: string) => () => this.#fail(new OptmarkError('malformed_multipart', `Too many ${what} in the form.`));
    this.#parser.on('partsLimit', limit('parts'));
    this.#parser.on('filesLimit', limit('files'));
    this.#parser.on('fieldsLimit', limit('fields'));
    this.#parser.on('error', (err: Error) => this.#fail(new OptmarkError('malformed_multipart', `Malformed multipart body: ${err.message}`)));
    this.#parser.on('close', () => this.#finish());
  }

  get failed(): OptmarkError | undefined {
    return this.#failed;
  }

  /** Feeds one chunk (valid only during this call). Throws the error that ends the upload, if any. */
  push(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.#failed) throw this.#failed;
    this.received += chunk.byteLength;
    const limit = this.#options.maxImageBytes + MULTIPART_SLACK_BYTES;
    if (this.received > limit) this.#fail(new OptmarkError('payload_too_large', `The upload exceeds ${this.#options.maxImageBytes} bytes.`));
    else {
      if (chunk.byteLength > 0) this.#parser.write(Buffer.from(chunk));
      if (isLast) this.#parser.end();
    }
    if (this.#failed) throw this.#failed;
  }

  /** Stops parsing; the destination is released. */
  abandon(reason: OptmarkError): void {
    this.#fail(reason);
  }

  #append(data: Buffer): void {
    const dest = this.#dest;
    if (this.#failed || !dest) return;
    const need = this.#length + data.length;
    if (need > dest.length) {
      this.#fail(new OptmarkError('payload_too_large', `The image exceeds ${Math.min(dest.length, this.#options.maxImageBytes)} bytes.`));
      return;
    }
    // Buffer#fill copies with memcpy. TypedArray#set into shared memory goes through V8's relaxed
    // (atomic-safe) memmove, which runs byte by byte on busboy's unaligned chunks: ten times slower.
    if (data.length > 0) dest.fill(data, this.#length, need);
    this.#length = need;
  }

  #fail(err: OptmarkError): void {
    if (this.#failed) return;
    this.#failed = err;
    this.#dest = undefined;
    this.#parser.removeAllListeners('close');
    this.#parser.on('error', () => undefined);
    this.#parser.destroy();
    this.#reject(err);
  }

  #finish(): void {
    if (this.#failed) return;
    if (this.#imageParts === 0 || !this.#dest || !this.#fileEnded || this.#length === 0) {
      if (this.#imageParts === 1 && this.#fileEnded) {
        this.#fail(new OptmarkError('unsupported_format', 'The "image" part is empty.'));
      } else {
        this.#fail(new OptmarkError(this.#imageParts === 0 ? 'missing_image' : 'malformed_multipart'));
      }
      return;
    }
    this.#resolve({ bytes: this.#dest.subarray(0, this.#length), filename: this.#filename, mimeType: this.#mimeType });
  }
}

/**
 * Runs the multipart path on a synthetic upload so the event-loop thread's parser is compiled before the
 * first real request; throws if the receiver does not hand back exactly what went in.
 */
export async function warmUpReceiver(rounds = 30): Promise<void> {
  const boundary = '----optmark-warmup';
  const image = Buffer.alloc(256 * 1024, 0x5a);
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="w.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  for (let i = 0; i < rounds; i++) {
    const rx = new MultipartReceiver({
      contentType: `multipart/form-data; boundary=${boundary}`,
      destination: new Uint8Array(body.length),
      maxImageBytes: body.length,
    });
    for (let at = 0; at < body.length; at += 65536) {
      const chunk = body.subarray(at, at + 65536);
      rx.push(chunk.buffer.slice(chunk.byteOffset, chunk.byteOffset + chunk.length), at + 65536 >= body.length);
    }
    const got = await rx.done;
    if (!Buffer.from(got.bytes.buffer, got.bytes.byteOffset, got.bytes.length).equals(image)) throw new Error('multipart warm-up: bytes differ');
  }
}
