/**
 * The multipart/form-data upload, parsed by busboy in an image worker over the whole request body: the
 * image part is found in place, without a copy, because busboy hands the part's bytes over as views of
 * the buffer it was given. (busboy on the event loop cost about 1 ms per 12 MP upload there, a quarter of
 * that thread's work per protect; in a worker it runs in parallel.)
 *
 * MultipartReceiver also takes chunks as they come (a copy into its destination), which the benches and
 * tests use to compare both ways.
 */
import busboy from 'busboy';
import { MULTIPART_SLACK_BYTES } from '../config.js';
import { OptmarkError } from '../errors.js';
import { bytesAddon } from '../native/index.js';
import { formBoundary } from './form-type.js';

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
   * unknown. An image that does not fit is refused. It may be the memory the chunks are views of
   * (parseUpload): the image is then found, or compacted, in place.
   */
  destination: Uint8Array;
  /**
   * parseUpload's short cut: the chunks are a form whose first part's data was replaced by one marker
   * byte; the marker, when busboy hands it over as a part's data, stands for `data` (a view of the
   * destination).
   */
  elided?: FirstPartSplit;
  /** The configured image limit (for the 413 message and the body's cut-off). */
  maxImageBytes: number;
}

/** True for the media types an image part may declare (curl labels unknown extensions such as .webp octet-stream). */
function acceptablePartType(mimeType: string): boolean {
  const t = mimeType.toLowerCase();
  return t.startsWith('image/') || t === 'application/octet-stream';
}

/**
 * Parses a whole multipart body held in `body` and returns the image part as a view of the same memory,
 * never a copy. Two paths, and which runs when:
 *
 * - the short cut, when the body opens with its boundary and the first part is the image (the form
 *   every client sends): a native search (the addon's AVX2 `indexOf`, about 20 GB/s, else
 *   `Buffer#indexOf`) finds where the first part's data ends, and busboy parses the form with that data
 *   replaced by a one-byte marker, so its boundary scan (JavaScript, about 0.25 ms per MB) runs over a
 *   few hundred bytes instead of the image. busboy finds its delimiters as the leftmost matches, as
 *   indexOf does, so the form it sees parses as the whole body would; the result is kept only when the
 *   marker comes back as the image part's data;
 * - busboy over the whole body, for anything else (an error on the short cut, a preamble, another part
 *   first, a delimiter inside the part headers).
 *
 * The short cut saves 17-19% of the server's CPU per protect of a 12 MP JPEG (busboy alone costs
 * 1.21-1.24x, bench/protect-cpu.ts; bench/RESULTS.md). A reader of the common form without busboy at all
 * saved 0-15% more (median 5-10%, under the 15% a shadow path must pay) and was removed.
 */
export async function parseUpload(body: Uint8Array, contentType: string, maxImageBytes: number): Promise<ReceivedImage> {
  const first = locateFirstPart(body, contentType);
  if (first) {
    const split = splitAt(body, first);
    const rx = new MultipartReceiver({ contentType, destination: body, maxImageBytes, elided: split });
    rx.push(split.form, true);
    const fast = await rx.done.then(
      (image) => (rx.elidedUsed ? image : undefined),
      () => undefined,
    );
    if (fast) return fast;
  }
  const rx = new MultipartReceiver({ contentType, destination: body, maxImageBytes });
  rx.push(body, true);
  return rx.done;
}

/** The one-byte stand-in for the first part's data in the form busboy parses. */
const MARKER = 0x58;

export interface FirstPartSplit {
  /** The form with the first part's data replaced by one marker byte at `markerAt`. */
  form: Buffer;
  markerAt: number;
  /** The first part's data: a view of the body. */
  data: Uint8Array;
}

/** Where the first part of a form lies (offsets into the body). */
interface FirstPart {
  /** Start of the part's data (after the header block's CRLF CRLF). */
  dataStart: number;
  /** Where the delimiter after the data (CRLF `--boundary`) starts. */
  next: number;
}

/**
 * Where the first part's data lies, when the body opens with `--boundary` CRLF, the first part's header
 * block ends (CRLF CRLF) within busboy's 16 KiB header limit, and the next delimiter (CRLF `--boundary`,
 * as busboy's search sees it) starts after that header block; otherwise undefined.
 */
function locateFirstPart(body: Uint8Array, contentType: string): FirstPart | undefined {
  const boundary = formBoundary(contentType);
  if (!boundary) return undefined; // none, empty, or not plainly written: busboy alone reads it
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  // busboy searches for this exact string (UTF-8: its search makes a Buffer of it).
  const needle = Buffer.from(`\r\n--${boundary}`);
  const open = needle.subarray(2);
  const headers = open.length + 2;
  if (b.length < headers || !b.subarray(0, open.length).equals(open) || b[open.length] !== 13 || b[open.length + 1] !== 10) return undefined;
  const headerEnd = b.indexOf('\r\n\r\n', headers - 2, 'latin1');
  if (headerEnd < 0 || headerEnd + 4 - headers > 16 * 1024) return undefined;
  const dataStart = headerEnd + 4;
  const next = findDelimiter(b, needle, headers);
  if (next < dataStart) return undefined; // none, or one inside (or overlapping the end of) the header block
  return { dataStart, next };
}

/** The form busboy is handed on the short cut: the first part's data replaced by one marker byte. */
function splitAt(body: Uint8Array, first: FirstPart): FirstPartSplit {
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const { dataStart, next } = first;
  const form = Buffer.allocUnsafe(dataStart + 1 + (b.length - next));
  b.copy(form, 0, 0, dataStart);
  form[dataStart] = MARKER;
  b.copy(form, dataStart + 1, next);
  return { form, markerAt: dataStart, data: body.subarray(dataStart, next) };
}

/**
 * Where the first part's data lies (see locateFirstPart), and the form busboy is handed instead of the
 * body: that data replaced by one marker byte; otherwise undefined.
 */
export function splitFirstPart(body: Uint8Array, contentType: string): FirstPartSplit | undefined {
  const first = locateFirstPart(body, contentType);
  return first && splitAt(body, first);
}

/**
 * The file name as the client's file had it. Browsers (the WHATWG HTML form-data encoding) and curl
 * (7.81 and later) escape three characters of a file name as `%22` ("), `%0D` and `%0A` and leave every
 * other `%` alone; those three are decoded, nothing else (a `%41` stays as it is). A name that truly held
 * `%22` reads as `"`: the encoding cannot tell them apart, and a browser would have sent that name so too.
 */
export function formFileName(sent: string): string {
  return sent.includes('%') ? sent.replace(/%(?:22|0D|0A)/g, (e) => (e === '%22' ? '"' : e === '%0D' ? '\r' : '\n')) : sent;
}
/** The leftmost `needle` at or after `from`: the one scan of the whole upload the short cut makes. */
function findDelimiter(body: Buffer, needle: Buffer, from: number): number {
  const native = bytesAddon();
  return native ? native.indexOf(body, needle, from) : body.indexOf(needle, from);
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
  /** `done` has resolved or rejected. */
  #settled = false;
  /** The check that the form ended, pending from end() until the receiver settles. */
  #endCheck: NodeJS.Immediate | undefined;
  /** Where the image starts in the destination: 0 when copied in, its own offset when found in place. */
  #start = 0;
  #length = 0;
  #filename: string | undefined;
  #mimeType = '';
  #imageParts = 0;
  #fileEnded = false;
  /** Request body bytes seen so far. */
  received = 0;
  /** The marker of `elided` came back as image data and was replaced by the data it stands for. */
  elidedUsed = false;

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
        // RFC 7578: a part without a Content-Type header is text/plain (Python requests sends a file so).
        const untyped = info.mimeType === 'text/plain' ? ' (a part without a Content-Type header counts as text/plain)' : '';
        return this.#fail(
          new OptmarkError('unsupported_media_type', `The "image" part is ${info.mimeType}${untyped}; send it as image/jpeg, image/png or image/webp.`),
        );
      }
      this.#filename = info.filename === undefined ? undefined : formFileName(info.filename);
      this.#mimeType = info.mimeType;
      // Flowing mode: busboy hands data over synchronously inside write(), while the chunk is valid.
      stream.on('data', (data: Buffer) => this.#append(data));
      stream.on('end', () => {
        this.#fileEnded = true;
      });
    });
    this.#parser.on('field', (name) => {
      this.#fail(
        new OptmarkError(
          name === 'image' ? 'missing_image' : 'unexpected_part',
          name === 'image' ? 'The "image" part must be a file, not a text field.' : `Unexpected field "${name}"; send only the "image" file part.`,
        ),
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
  push(chunk: ArrayBuffer | Uint8Array, isLast: boolean): void {
    if (this.#failed) throw this.#failed;
    this.received += chunk.byteLength;
    const limit = this.#options.maxImageBytes + MULTIPART_SLACK_BYTES;
    if (this.received > limit) this.#fail(new OptmarkError('payload_too_large', `The upload exceeds ${this.#options.maxImageBytes} bytes.`));
    else {
      if (chunk.byteLength > 0)
        this.#parser.write(chunk instanceof Uint8Array ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.from(chunk));
      if (isLast) {
        this.#parser.end();
        // busboy settles a finished form within the ticks that follow end(). Some malformed bodies leave
        // it waiting forever for the end of a part (found by test/upload.test.ts: a part whose data
        // holds "--boundary\r\n--boundar"); one still open once the loop turns is refused, never held.
        // Settling clears the check: an image worker's event loop may not turn between tasks (piscina
        // waits for the next one in Atomics.wait), and a pending check holds this receiver, its parser
        // and its buffers until it does: about 3 KB per protect, never freed under protect-only traffic.
        if (!this.#settled) {
          this.#endCheck = setImmediate(() => {
            this.#endCheck = undefined;
            if (!this.#settled) this.#fail(new OptmarkError('malformed_multipart', 'The multipart body does not end where its last part does.'));
          });
        }
      }
    }
    if (this.#failed) throw this.#failed;
  }

  /** Stops parsing; the destination is released. */
  abandon(reason: OptmarkError): void {
    this.#fail(reason);
  }

  #append(data: Buffer): void {
    const dest = this.#dest;
    if (this.#failed || !dest || data.length === 0) return;
    const elided = this.#options.elided;
    if (elided) {
      // The short cut writes nothing into the destination (the body, which a plain parse may need
      // next): image data other than the marker means the image is not the first part, so decline.
      if (data.length !== 1 || data.buffer !== elided.form.buffer || data.byteOffset !== elided.form.byteOffset + elided.markerAt) {
        this.#fail(new OptmarkError('malformed_multipart', 'The short cut does not apply to this form.'));
        return;
      }
      this.elidedUsed = true;
      if (elided.data.length === 0) return;
      data = Buffer.from(elided.data.buffer, elided.data.byteOffset, elided.data.byteLength);
    }
    const need = this.#length + data.length;
    const limit = this.#options.maxImageBytes;
    if (need > limit || (data.buffer !== dest.buffer && need > dest.length)) {
      this.#fail(new OptmarkError('payload_too_large', `The image exceeds ${Math.min(dest.length, limit)} bytes.`));
      return;
    }
    if (data.buffer === dest.buffer) {
      // A view of the destination's own memory (parseUpload): the image stays where its first piece is;
      // a later piece that does not follow on is moved down to follow it (never up: framing only ever
      // precedes a piece, so the bytes it lands on were parsed already).
      const from = data.byteOffset - dest.byteOffset;
      if (this.#length === 0) this.#start = from;
      else if (from !== this.#start + this.#length) dest.copyWithin(this.#start + this.#length, from, from + data.length);
    } else {
      // Buffer#fill copies with memcpy (TypedArray#set into shared memory copies byte by byte).
      dest.fill(data, this.#start + this.#length, this.#start + need);
    }
    this.#length = need;
  }

  #settle(): void {
    this.#settled = true;
    if (this.#endCheck) clearImmediate(this.#endCheck);
    this.#endCheck = undefined;
  }

  #fail(err: OptmarkError): void {
    if (this.#failed || this.#settled) return;
    this.#settle();
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
    this.#settle();
    this.#resolve({ bytes: this.#dest.subarray(this.#start, this.#start + this.#length), filename: this.#filename, mimeType: this.#mimeType });
  }
}

/**
 * Runs the multipart path on a synthetic upload so the worker's parser is compiled before the first real
 * request; throws if the parser does not hand back exactly what went in.
 */
export async function warmUpUpload(rounds = 30): Promise<void> {
  const boundary = '----optmark-warmup';
  const image = Buffer.alloc(256 * 1024, 0x5a);
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="w.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const work = new Uint8Array(body.length);
  for (let i = 0; i < rounds; i++) {
    work.set(body);
    const got = await parseUpload(work, `multipart/form-data; boundary=${boundary}`, body.length);
    if (!Buffer.from(got.bytes.buffer, got.bytes.byteOffset, got.bytes.length).equals(image)) throw new Error('multipart warm-up: bytes differ');
  }
}

const MAX_BASENAME = 100;
const DEFAULT_BASENAME = 'image';

/**
 * The suggested file name of a produced image: keeps the last path segment of the client's file name,
 * drops its extension, control characters and characters that are unsafe in file names or headers, and
 * bounds its length (the caller appends the produced format's extension); a default when nothing is left.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to strip control characters from the name.
const UNSAFE_NAME_CHARS = /[\u0000-\u001f\u007f-\u009f"*:<>?|]/g;
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

export function safeBasename(filename: string | undefined): string {
  if (!filename) return DEFAULT_BASENAME;
  let name = filename.split(/[/\\]/).pop() ?? '';
  // Printable ASCII (what nearly every client sends) is its own NFC form and one code unit a code point.
  const ascii = PRINTABLE_ASCII.test(name);
  name = (ascii ? name : name.normalize('NFC')).replace(UNSAFE_NAME_CHARS, '').trim();
  const dot = name.lastIndexOf('.');
  if (dot > 0) name = name.slice(0, dot);
  name = name.replace(/^[.\s]+/, '').replace(/[.\s]+$/, '');
  // Bound by code points, never splitting a surrogate pair.
  name = ascii ? name.slice(0, MAX_BASENAME) : Array.from(name).slice(0, MAX_BASENAME).join('');
  return name || DEFAULT_BASENAME;
}
