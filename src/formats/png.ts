/**
 * PNG container: 8-byte signature, then chunks of u32 BE length, 4-letter type, data, CRC-32 over
 * type and data. IHDR comes first; image data is one or more IDAT chunks; IEND ends the stream.
 *
 * XMP is an `iTXt` chunk with keyword `XML:com.adobe.xmp` (XMP Specification Part 3 §1.1.5): we write
 * it uncompressed with empty language and translated keyword, before the first IDAT, where every reader
 * looks. We read it anywhere, compressed or not. Writers also put XMP under that keyword in `zTXt`
 * (libvips, so every sharp-made PNG with XMP) and `tEXt`; ExifTool reads those too, so we read them,
 * but keep them byte for byte like any other text chunk. Spec: PNG (Third Edition) §5, §11.3.3.4.
 */
import { crc32, inflateSync } from 'node:zlib';
import { DamagedImageError, LimitExceededError } from '../errors.js';
import { Pieces, addRange, assemble, ascii, startsWith, u32be, writeU32be } from './bytes.js';
import { InflateBudget, MAX_CONTAINER_ENTRIES, MAX_XMP_PACKETS, OutputTooLargeError, checkOutputEntries, countEntry, countPacket } from './limits.js';
import type { ByteRange, ContainerFormat, ManifestStore, Need, ParsedImage, XmpPayload, XmpToWrite } from './types.js';
import { walked } from './walks.js';

const SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
const XMP_KEYWORD = ascii('XML:com.adobe.xmp\0');
/** PNG caps chunk lengths at 2^31 - 1. */
const MAX_CHUNK_LENGTH = 0x7fffffff;
/** The C2PA manifest store's chunk (C2PA 2.1 §A.3.3). */
const C2PA_CHUNK = 'caBX';
/** Chunk types whose payload may hold XMP (under XMP_KEYWORD). */
const TEXT_TYPES = new Set(['iTXt', 'zTXt', 'tEXt']);

interface Chunk {
  type: string;
  start: number;
  data: number;
  length: number;
  /** One past the CRC. */
  end: number;
  /** An iTXt XMP chunk: the one kind we replace. */
  xmp: boolean;
  /** A zTXt or tEXt chunk under the XMP keyword: read, never rewritten. */
  textXmp: boolean;
}

interface Layout {
  chunks: Chunk[];
  /** Index of the first IDAT in `chunks`; chunks.length when the first IDAT is itself cut short. */
  firstIdat: number;
  /** Offset from which the rest of the file is kept as it is (after IEND, or an unreadable stretch after image data). */
  tail: number;
}

function isChunkType(bytes: Uint8Array, at: number): boolean {
  for (let i = at; i < at + 4; i++) {
    const c = bytes[i]!;
    if (!((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a))) return false;
  }
  return true;
}

/** Chunk type names seen so far: a PNG repeats a handful (IDAT thousands of times), so no string per chunk. */
const typeNames = new Map<number, string>();
const MAX_TYPE_NAMES = 256;

function chunkType(bytes: Uint8Array, at: number): string {
  const code = u32be(bytes, at);
  let name = typeNames.get(code);
  if (name === undefined) {
    name = String.fromCharCode(bytes[at]!, bytes[at + 1]!, bytes[at + 2]!, bytes[at + 3]!);
    if (typeNames.size < MAX_TYPE_NAMES) typeNames.set(code, name);
  }
  return name;
}

function parse(bytes: Uint8Array, need: Need | undefined): Layout {
  walked(bytes);
  const size = bytes.length;
  need?.(0, Math.min(size, SIGNATURE.length));
  if (!startsWith(bytes, SIGNATURE)) throw new DamagedImageError('PNG: bad signature');
  const chunks: Chunk[] = [];
  let firstIdat = -1;
  let pos = SIGNATURE.length;
  while (pos < size) {
    need?.(pos, Math.min(size, pos + 8));
    const valid = pos + 8 <= size && isChunkType(bytes, pos + 4);
    const length = valid ? u32be(bytes, pos) : 0;
    const type = valid ? chunkType(bytes, pos + 4) : '';
    const end = pos + 12 + length;
    if (chunks.length === 0 && type !== 'IHDR') throw new DamagedImageError('PNG: the first chunk is not IHDR');
    if (!valid || length > MAX_CHUNK_LENGTH || end > size) {
      // Once image data has begun, a cut or garbled stretch is the image's problem, not ours: keep it
      // verbatim. Before that, there is no safe place to put metadata.
      if (firstIdat >= 0 || type === 'IDAT') return { chunks, firstIdat: firstIdat >= 0 ? firstIdat : chunks.length, tail: pos };
      throw new DamagedImageError(`PNG: chunk at byte ${pos} is cut short or garbled before the image data`);
    }
    if (chunks.length >= MAX_CONTAINER_ENTRIES) countEntry(chunks.length, 'PNG');
    // Image data is never read here: a file-backed caller copies it (copyRanges).
    if (type !== 'IDAT') need?.(pos + 8, end);
    // The keyword first: it rules out most chunks at their first byte (an unread IDAT's bytes are never taken for text).
    const keyword = startsWith(bytes, XMP_KEYWORD, pos + 8) && TEXT_TYPES.has(type);
    const xmp = keyword && type === 'iTXt';
    const textXmp = keyword && (type === 'zTXt' || type === 'tEXt');
    chunks.push({ type, start: pos, data: pos + 8, length, end, xmp, textXmp });
    if (type === 'IDAT' && firstIdat < 0) firstIdat = chunks.length - 1;
    pos = end; // advances by at least 12
    if (type === 'IEND') break;
  }
  if (firstIdat < 0) throw new DamagedImageError('PNG: no image data (IDAT)');
  return { chunks, firstIdat, tail: pos };
}

/**
 * The text of an XMP iTXt chunk, inflated within the file's budget when compressed; undefined when
 * unreadable. Throws LimitExceededError when the file's compressed XMP inflates past its budget.
 */
function itxtText(bytes: Uint8Array, c: Chunk, budget: InflateBudget): { text: Uint8Array; compressed: boolean } | undefined {
  const data = bytes.subarray(c.data, c.data + c.length);
  let at = XMP_KEYWORD.length;
  if (at + 2 > data.length) return undefined;
  const compressed = data[at] === 1;
  const method = data[at + 1];
  at += 2;
  for (let nulls = 0; nulls < 2; nulls++) {
    const z = data.indexOf(0, at);
    if (z < 0) return undefined;
    at = z + 1; // language tag, then translated keyword
  }
  const text = data.subarray(at);
  if (!compressed) return { text, compressed };
  if (method !== 0) return undefined;
  const inflated = budget.inflate(text);
  return inflated && { text: inflated, compressed };
}

/** The text of a tEXt or zTXt XMP chunk (zTXt: method byte, then zlib data, inflated within the budget). */
function legacyText(bytes: Uint8Array, c: Chunk, budget: InflateBudget): Uint8Array | undefined {
  const text = bytes.subarray(c.data + XMP_KEYWORD.length, c.data + c.length);
  if (c.type === 'tEXt') return text;
  if (text[0] !== 0) return undefined;
  return budget.inflate(text.subarray(1));
}

function readXmp(bytes: Uint8Array, { chunks, firstIdat }: Layout): XmpPayload {
  const packets: Uint8Array[] = [];
  const legacy: Uint8Array[] = [];
  const budget = new InflateBudget();
  let xmpChunks = 0;
  let seen = 0;
  let canonical = true;
  for (let i = 0; i < chunks.length; i++) {
    const c = chunks[i]!;
    if (!c.xmp && !c.textXmp) continue;
    // Counted before it is opened: packet 65 is refused before it costs anything.
    countPacket(++seen);
    if (c.textXmp) {
      const text = legacyText(bytes, c, budget);
      if (text) legacy.push(text);
      continue;
    }
    xmpChunks++;
    const t = itxtText(bytes, c, budget);
    if (t) packets.push(t.text);
    if (!t || t.compressed || i > firstIdat || insertIndex(chunks, firstIdat) !== i) canonical = false;
  }
  // iTXt packets first: the main packet is the one we write, whatever text chunks sit before it.
  return { packets: [...packets, ...legacy], extended: new Map(), canonical: canonical && xmpChunks === 1, keptOnRewrite: legacy.length };
}

function xmpChunk(packet: Uint8Array): Uint8Array {
  // keyword\0, compression flag 0, method 0, empty language\0, empty translated keyword\0, text
  const dataLength = XMP_KEYWORD.length + 4 + packet.length;
  if (dataLength > MAX_CHUNK_LENGTH) throw new LimitExceededError('PNG: XMP packet too large for a chunk');
  const out = new Uint8Array(12 + dataLength);
  writeU32be(out, 0, dataLength);
  out.set(ascii('iTXt'), 4);
  out.set(XMP_KEYWORD, 8);
  // the four bytes after the keyword are already zero
  out.set(packet, 8 + XMP_KEYWORD.length + 4);
  writeU32be(out, 8 + dataLength, crc32(out.subarray(4, 8 + dataLength)));
  return out;
}

/**
 * Where the XMP chunk goes: in place of the first iTXt XMP chunk before IDAT, else just before the
 * first IDAT. Also just before IDAT when a tEXt/zTXt XMP chunk follows that place: ExifTool lets a
 * later packet win, so ours must come after every text XMP chunk it can.
 */
function insertIndex(chunks: Chunk[], firstIdat: number): number {
  const existing = chunks.findIndex((c, i) => c.xmp && i < firstIdat);
  if (existing >= 0 && !chunks.some((c, i) => c.textXmp && i > existing && i < firstIdat)) return existing;
  // APNG: the default image's fcTL sits right before IDAT; keep that pair together.
  return firstIdat > 0 && chunks[firstIdat - 1]!.type === 'fcTL' ? firstIdat - 1 : firstIdat;
}

function writeXmp(bytes: Uint8Array, { chunks, firstIdat, tail }: Layout, xmp: XmpToWrite): Uint8Array[] {
  if (xmp.extended) throw new Error('PNG has no Extended XMP');
  const insertAt = insertIndex(chunks, firstIdat);
  // What the output will hold, checked before it is built: its reader must not refuse it.
  let kept = 0;
  let textXmp = 0;
  for (const c of chunks) {
    if (!c.xmp) kept++;
    if (c.textXmp) textXmp++;
  }
  checkOutputEntries(kept + 1, 'PNG');
  if (textXmp + 1 > MAX_XMP_PACKETS)
    throw new OutputTooLargeError(`PNG: with the XMP chunk the file would carry more than ${MAX_XMP_PACKETS} XMP packets, the processing limit.`);
  const out = new Pieces(bytes);
  out.keep(0, SIGNATURE.length);
  for (let i = 0; i <= chunks.length; i++) {
    if (i === insertAt) out.add(xmpChunk(xmp.main));
    const c = chunks[i];
    if (c && !c.xmp) out.keep(c.start, c.end);
  }
  out.keep(tail, bytes.length);
  return out.done();
}

function contentOutsideXmp(bytes: Uint8Array, { chunks, tail }: Layout): Uint8Array[] {
  // One slice per chunk, not merged like writeXmp's pieces: provenance digests length-prefix each slice.
  const out: Uint8Array[] = [bytes.subarray(0, SIGNATURE.length)];
  for (const c of chunks) if (!c.xmp) out.push(bytes.subarray(c.start, c.end));
  out.push(bytes.subarray(tail));
  return out;
}

/**
 * Chunks a decoder needs for the pixels: header, palette, transparency, colour (gamma, chromaticities,
 * sRGB, cICP, significant bits), pixel size (fixed, nine bytes) and image data. Everything else (text,
 * EXIF, APNG frames, private chunks) stays out; iCCP stays when its profile inflates within
 * MAX_DECODER_ICC_BYTES.
 */
const DECODER_CHUNKS = new Set(['IHDR', 'PLTE', 'tRNS', 'gAMA', 'cHRM', 'sRGB', 'cICP', 'sBIT', 'pHYs', 'IDAT', 'IEND']);
/** An ICC profile is tens of kilobytes, rarely a few hundred; a larger one is not handed to a decoder. */
const MAX_DECODER_ICC_BYTES = 4 * 1024 * 1024;
const IEND_CHUNK = Uint8Array.of(0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82);

function iccWithinBound(bytes: Uint8Array, c: Chunk): boolean {
  const data = bytes.subarray(c.data, c.data + c.length);
  const name = data.indexOf(0);
  if (name < 0 || name > 79 || data[name + 1] !== 0) return false;
  try {
    inflateSync(data.subarray(name + 2), { maxOutputLength: MAX_DECODER_ICC_BYTES });
    return true;
  } catch {
    return false;
  }
}

function decoderInput(bytes: Uint8Array, { chunks, tail }: Layout): Uint8Array {
  const out = new Pieces(bytes);
  out.keep(0, SIGNATURE.length);
  let dropped = false;
  for (const c of chunks) {
    if (DECODER_CHUNKS.has(c.type) || (c.type === 'iCCP' && iccWithinBound(bytes, c))) out.keep(c.start, c.end);
    else dropped = true;
  }
  const ended = chunks[chunks.length - 1]!.type === 'IEND';
  // Whatever follows IEND, or the stretch after image data where the chunks stop making sense, is no
  // image data a decoder can use: it is left out, and the file ends where the last whole chunk does.
  if (!ended) out.add(IEND_CHUNK);
  if (!dropped && ended && tail === bytes.length) return bytes;
  return assemble(out.done());
}

/**
 * Inflates, within one file's budget (MAX_INFLATED_XMP_BYTES), every compressed text chunk a decoder
 * would inflate when it reads the file's metadata (zTXt, compressed iTXt, under any keyword), and throws
 * LimitExceededError past it. For paths that hand the whole file to a decoder (the fingerprint embed,
 * which keeps the metadata): libvips inflated four 16 MiB iTXt comments in 8 s.
 */
export function checkCompressedText(bytes: Uint8Array): void {
  const { chunks } = parse(bytes, undefined);
  const budget = new InflateBudget();
  for (const c of chunks) {
    const data = bytes.subarray(c.data, c.data + c.length);
    const z = data.indexOf(0);
    if (z < 0) continue;
    if (c.type === 'zTXt' && data[z + 1] === 0) budget.inflate(data.subarray(z + 2));
    else if (c.type === 'iTXt' && data[z + 1] === 1 && data[z + 2] === 0) {
      let at = z + 3;
      for (let nulls = 0; nulls < 2 && at > 0; nulls++) at = data.indexOf(0, at) + 1;
      if (at > 0) budget.inflate(data.subarray(at));
    }
  }
}

/**
 * PNG: whole when the chunks reach IEND inside the file. Where the walk stopped short of it (a chunk cut
 * off or garbled after the image data), the chunk headers are followed on from there as their lengths say.
 */
function cutOff(bytes: Uint8Array, { chunks, tail }: Layout, need: Need | undefined): string | undefined {
  if (chunks[chunks.length - 1]!.type === 'IEND') return undefined;
  let pos = tail;
  while (pos + 12 <= bytes.length) {
    need?.(pos, pos + 8);
    const length = u32be(bytes, pos);
    const type = String.fromCharCode(bytes[pos + 4]!, bytes[pos + 5]!, bytes[pos + 6]!, bytes[pos + 7]!);
    const end = pos + 12 + length;
    if (end > bytes.length) {
      return `The PNG ${/^[A-Za-z]{4}$/.test(type) ? `${type} chunk at byte ${pos}` : `chunk at byte ${pos}`} runs past the end of the file, and no IEND follows: the file is cut off in its image data.`;
    }
    if (type === 'IEND') return undefined;
    pos = end;
  }
  return `The PNG file ends at byte ${bytes.length} before its IEND chunk: it is cut off in its image data.`;
}

/** Chunks of `type` as ranges, consecutive ones merged. */
function rangesOf(chunks: readonly Chunk[], type: string): ByteRange[] {
  const out: ByteRange[] = [];
  for (const c of chunks) if (c.type === type) addRange(out, c.start, c.end);
  return out;
}

/** One walk of a PNG (src/formats/types.ts). */
class PngImage implements ParsedImage {
  readonly bytes: Uint8Array;
  readonly quantTables = [];
  readonly lossless = true;
  readonly #layout: Layout;
  readonly #need: Need | undefined;
  #xmp: XmpPayload | undefined;
  #cut: { message: string | undefined } | undefined;
  #store: { store: ManifestStore | undefined } | undefined;
  #copy: ByteRange[] | undefined;

  constructor(bytes: Uint8Array, need: Need | undefined) {
    this.bytes = bytes;
    this.#need = need;
    this.#layout = parse(bytes, need);
  }

  get manifestStore(): ManifestStore | undefined {
    if (!this.#store) {
      const ranges = rangesOf(this.#layout.chunks, C2PA_CHUNK);
      this.#store = { store: ranges.length > 0 ? { ranges } : undefined };
    }
    return this.#store.store;
  }

  /** The image data, and whatever follows the last whole chunk (after IEND, or a stretch cut or garbled). */
  get copyRanges(): readonly ByteRange[] {
    if (!this.#copy) {
      this.#copy = rangesOf(this.#layout.chunks, 'IDAT');
      addRange(this.#copy, this.#layout.tail, this.bytes.length);
    }
    return this.#copy;
  }

  get format(): ContainerFormat {
    return png;
  }

  get xmp(): XmpPayload {
    return (this.#xmp ??= readXmp(this.bytes, this.#layout));
  }

  get truncated(): string | undefined {
    return (this.#cut ??= { message: cutOff(this.bytes, this.#layout, this.#need) }).message;
  }

  writeXmp(xmp: XmpToWrite): Uint8Array[] {
    return writeXmp(this.bytes, this.#layout, xmp);
  }

  contentOutsideXmp(): Uint8Array[] {
    return contentOutsideXmp(this.bytes, this.#layout);
  }

  decoderInput(): Uint8Array {
    return decoderInput(this.bytes, this.#layout);
  }
}

const C2PA_TYPE = ascii(C2PA_CHUNK);

export const png: ContainerFormat = {
  name: 'png',
  mimeType: 'image/png',
  extension: 'png',
  maxMainPacketBytes: MAX_CHUNK_LENGTH - XMP_KEYWORD.length - 4,
  extendedXmp: false,
  sniff: (bytes) => startsWith(bytes, SIGNATURE),
  parse: (bytes, need) => new PngImage(bytes, need),
  isManifestStoreSlice: (slice) => startsWith(slice, C2PA_TYPE, 4),
  readXmp: (bytes) => new PngImage(bytes, undefined).xmp,
  writeXmp: (bytes, xmp) => new PngImage(bytes, undefined).writeXmp(xmp),
  contentOutsideXmp: (bytes) => new PngImage(bytes, undefined).contentOutsideXmp(),
  decoderInput: (bytes) => new PngImage(bytes, undefined).decoderInput(),
};
