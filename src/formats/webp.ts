/**
 * WebP container: `RIFF`, u32 LE size (file size - 8), `WEBP`, then chunks of FourCC, u32 LE size,
 * payload, and one zero pad byte after odd payloads. A simple file holds one `VP8 ` or `VP8L` chunk;
 * metadata needs the extended form, which starts with `VP8X` (flags, canvas width-1 and height-1 as
 * 24-bit LE). Extended order: VP8X, ICCP, ANIM, image data (ALPH+VP8 / VP8L / ANMF...), EXIF, XMP,
 * then unknown chunks. Spec: libwebp doc/webp-container-spec.txt.
 */
import { DamagedImageError } from '../errors.js';
import { Pieces, addRange, ascii, copyRange, startsWith, u32le, writeU32le } from './bytes.js';
import { MAX_CONTAINER_ENTRIES, OutputTooLargeError, checkOutputEntries, countEntry, countPacket } from './limits.js';
import type { ByteRange, ContainerFormat, ManifestStore, Need, ParsedImage, XmpPayload, XmpToWrite } from './types.js';
import { walked } from './walks.js';

const RIFF = ascii('RIFF');
const WEBP = ascii('WEBP');
const FLAG_XMP = 0x04;
const FLAG_ALPHA = 0x10;
const VP8_START_CODE = [0x9d, 0x01, 0x2a] as const;
const VP8L_SIGNATURE = 0x2f;
/** RIFF sizes are u32; keep the output's size representable. */
const MAX_RIFF_SIZE = 0xfffffff6;
const IMAGE_DATA = new Set(['ALPH', 'VP8 ', 'VP8L', 'ANMF']);
/**
 * Chunks whose payload nothing here reads past its first BITSTREAM_HEADER_BYTES (the frame tag and
 * dimensions simpleCanvas reads): a file-backed caller copies the rest (copyRanges).
 */
const BITSTREAMS = new Set(['VP8 ', 'VP8L', 'ANMF']);
const BITSTREAM_HEADER_BYTES = 32;
/** The C2PA manifest store's chunk (C2PA 2.1 §A.3.4). */
const C2PA_CHUNK = 'C2PA';

interface Chunk {
  fourcc: string;
  start: number;
  payload: number;
  size: number;
  /** One past the payload and its pad byte (the pad may be missing on the very last chunk). */
  end: number;
}

interface Layout {
  chunks: Chunk[];
  /** Offset where the RIFF payload ends; anything after it is kept as it is. */
  riffEnd: number;
}

function parse(bytes: Uint8Array, need: Need | undefined): Layout {
  walked(bytes);
  need?.(0, Math.min(bytes.length, 12));
  if (!startsWith(bytes, RIFF) || !startsWith(bytes, WEBP, 8)) throw new DamagedImageError('WebP: bad RIFF header');
  const riffEnd = 8 + u32le(bytes, 4);
  if (riffEnd > bytes.length) throw new DamagedImageError('WebP: the file is shorter than its RIFF size says (truncated)');
  const chunks: Chunk[] = [];
  let pos = 12;
  while (pos < riffEnd) {
    if (chunks.length >= MAX_CONTAINER_ENTRIES) countEntry(chunks.length, 'WebP');
    if (pos + 8 > riffEnd) throw new DamagedImageError(`WebP: chunk header at byte ${pos} is cut short`);
    need?.(pos, pos + 8);
    const size = u32le(bytes, pos + 4);
    const payloadEnd = pos + 8 + size;
    if (payloadEnd > riffEnd) throw new DamagedImageError(`WebP: chunk at byte ${pos} runs past the RIFF size`);
    const end = Math.min(payloadEnd + (size & 1), riffEnd);
    const fourcc = Buffer.from(bytes.buffer, bytes.byteOffset + pos, 4).toString('latin1');
    if (need) need(pos + 8, BITSTREAMS.has(fourcc) ? Math.min(end, pos + 8 + BITSTREAM_HEADER_BYTES) : end);
    chunks.push({ fourcc, start: pos, payload: pos + 8, size, end });
    pos = end; // advances by at least 8
  }
  const first = chunks[0]?.fourcc;
  if (first !== 'VP8X' && first !== 'VP8 ' && first !== 'VP8L') throw new DamagedImageError('WebP: first chunk is not VP8X, VP8 or VP8L');
  if (first === 'VP8X' && chunks[0]!.size < 10) throw new DamagedImageError('WebP: VP8X chunk too short');
  return { chunks, riffEnd };
}

function readXmp(bytes: Uint8Array, { chunks }: Layout): XmpPayload {
  const xmp = chunks.filter((c) => c.fourcc === 'XMP ');
  countPacket(xmp.length);
  const extended = chunks[0]!.fourcc === 'VP8X';
  const flagged = extended && (bytes[chunks[0]!.payload]! & FLAG_XMP) !== 0;
  return {
    packets: xmp.map((c) => bytes.subarray(c.payload, c.payload + c.size)),
    extended: new Map(),
    canonical: xmp.length === 1 && flagged,
    keptOnRewrite: 0,
  };
}

/** Canvas and alpha of a simple file, from its bitstream header. */
function simpleCanvas(bytes: Uint8Array, c: Chunk): { width: number; height: number; alpha: boolean } {
  const p = c.payload;
  if (c.fourcc === 'VP8L') {
    if (c.size < 5 || bytes[p] !== VP8L_SIGNATURE) throw new DamagedImageError('WebP: bad VP8L header');
    const bits = u32le(bytes, p + 1);
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1, alpha: ((bits >>> 28) & 1) === 1 };
  }
  // VP8: 3-byte frame tag (bit 0 clear on key frames), start code 9d 01 2a, 14-bit width and height
  if (c.size < 10 || (bytes[p]! & 1) !== 0) throw new DamagedImageError('WebP: VP8 data does not start with a key frame');
  if (bytes[p + 3] !== VP8_START_CODE[0] || bytes[p + 4] !== VP8_START_CODE[1] || bytes[p + 5] !== VP8_START_CODE[2]) {
    throw new DamagedImageError('WebP: bad VP8 start code');
  }
  const width = (bytes[p + 6]! | (bytes[p + 7]! << 8)) & 0x3fff;
  const height = (bytes[p + 8]! | (bytes[p + 9]! << 8)) & 0x3fff;
  if (width === 0 || height === 0) throw new DamagedImageError('WebP: VP8 frame has a zero dimension');
  return { width, height, alpha: false };
}

function vp8x(flags: number, width: number, height: number): Uint8Array {
  const out = new Uint8Array(18);
  out.set(ascii('VP8X'), 0);
  writeU32le(out, 4, 10);
  out[8] = flags;
  const w = width - 1;
  const h = height - 1;
  out[12] = w & 0xff;
  out[13] = (w >> 8) & 0xff;
  out[14] = (w >> 16) & 0xff;
  out[15] = h & 0xff;
  out[16] = (h >> 8) & 0xff;
  out[17] = (h >> 16) & 0xff;
  return out;
}

function xmpChunk(packet: Uint8Array): Uint8Array {
  const pad = packet.length & 1;
  const out = new Uint8Array(8 + packet.length + pad);
  out.set(ascii('XMP '), 0);
  writeU32le(out, 4, packet.length);
  out.set(packet, 8);
  return out;
}

function writeXmp(bytes: Uint8Array, { chunks, riffEnd }: Layout, xmp: XmpToWrite): Uint8Array[] {
  if (xmp.extended) throw new Error('WebP has no Extended XMP');
  const first = chunks[0]!;
  const out = new Pieces(bytes);
  if (first.fourcc === 'VP8X') {
    const header = copyRange(bytes, first.start, first.start + 18);
    header[8] = header[8]! | FLAG_XMP;
    out.add(header);
    out.keep(first.start + 18, first.end);
  } else {
    const { width, height, alpha } = simpleCanvas(bytes, first);
    out.add(vp8x(FLAG_XMP | (alpha ? FLAG_ALPHA : 0), width, height));
  }
  const rest = first.fourcc === 'VP8X' ? chunks.slice(1) : chunks;
  // Replace the first XMP chunk where it stands; otherwise after EXIF, else right after the image data.
  let insertAfter = -1;
  const existing = rest.findIndex((c) => c.fourcc === 'XMP ');
  if (existing < 0) {
    rest.forEach((c, i) => {
      if (IMAGE_DATA.has(c.fourcc) || c.fourcc === 'EXIF') insertAfter = i;
    });
  }
  // The output's chunk count (VP8X first, every chunk but XMP, ours), checked before it is built.
  const keptChunks = rest.filter((c) => c.fourcc !== 'XMP ').length;
  checkOutputEntries(keptChunks + 2, 'WebP');
  const fresh = xmpChunk(xmp.main);
  for (let i = 0; i < rest.length; i++) {
    const c = rest[i]!;
    if (i === existing) out.add(fresh);
    if (c.fourcc !== 'XMP ') {
      out.keep(c.start, c.end);
      // a last odd chunk that lacked its pad byte gets one
      if (c.end - c.payload < c.size + (c.size & 1)) out.add(new Uint8Array(1));
    }
    if (i === insertAfter) out.add(fresh);
  }
  if (existing < 0 && insertAfter < 0) out.add(fresh);
  const body = out.done();
  let size = 4;
  for (const b of body) size += b.length;
  if (size > MAX_RIFF_SIZE) throw new OutputTooLargeError('WebP: file would exceed the RIFF size limit');
  const header = new Uint8Array(12);
  header.set(RIFF, 0);
  writeU32le(header, 4, size);
  header.set(WEBP, 8);
  return riffEnd < bytes.length ? [header, ...body, bytes.subarray(riffEnd)] : [header, ...body];
}

function contentOutsideXmp(bytes: Uint8Array, { chunks, riffEnd }: Layout): Uint8Array[] {
  // One slice per chunk, not merged like writeXmp's pieces: provenance digests length-prefix each slice.
  const out: Uint8Array[] = [];
  // VP8X flags and the RIFF size change whenever XMP is added; the chunks that carry content do not.
  for (const c of chunks) if (c.fourcc !== 'XMP ' && c.fourcc !== 'VP8X') out.push(bytes.subarray(c.start, c.payload + c.size));
  out.push(bytes.subarray(riffEnd));
  return out;
}

/** Chunks of the given FourCCs as ranges, consecutive ones merged. */
function rangesOf(chunks: readonly Chunk[], fourccs: ReadonlySet<string>): ByteRange[] {
  const out: ByteRange[] = [];
  for (const c of chunks) if (fourccs.has(c.fourcc)) addRange(out, c.start, c.end);
  return out;
}

/** One walk of a WebP (src/formats/types.ts). */
class WebpImage implements ParsedImage {
  readonly bytes: Uint8Array;
  readonly quantTables = [];
  /** The parser refuses a file shorter than its RIFF size, the one cut a container walk can see. */
  readonly truncated = undefined;
  readonly #layout: Layout;
  #xmp: XmpPayload | undefined;
  #store: { store: ManifestStore | undefined } | undefined;
  #copy: ByteRange[] | undefined;

  constructor(bytes: Uint8Array, need: Need | undefined) {
    this.bytes = bytes;
    this.#layout = parse(bytes, need);
  }

  get manifestStore(): ManifestStore | undefined {
    if (!this.#store) {
      const ranges = rangesOf(this.#layout.chunks, C2PA_CHUNKS);
      this.#store = { store: ranges.length > 0 ? { ranges } : undefined };
    }
    return this.#store.store;
  }

  /** The bitstreams, and whatever follows the RIFF payload. */
  get copyRanges(): readonly ByteRange[] {
    if (!this.#copy) {
      this.#copy = rangesOf(this.#layout.chunks, BITSTREAMS);
      addRange(this.#copy, this.#layout.riffEnd, this.bytes.length);
    }
    return this.#copy;
  }

  get lossless(): boolean {
    return this.#layout.chunks.find((c) => c.fourcc === 'VP8L' || c.fourcc === 'VP8 ')?.fourcc === 'VP8L';
  }

  get format(): ContainerFormat {
    return webp;
  }

  get xmp(): XmpPayload {
    return (this.#xmp ??= readXmp(this.bytes, this.#layout));
  }

  writeXmp(xmp: XmpToWrite): Uint8Array[] {
    return writeXmp(this.bytes, this.#layout, xmp);
  }

  contentOutsideXmp(): Uint8Array[] {
    return contentOutsideXmp(this.bytes, this.#layout);
  }

  /** WebP metadata chunks are stored as they are (nothing a decoder inflates); the chunk count is bounded. */
  decoderInput(): Uint8Array {
    return this.bytes;
  }
}

const C2PA_CHUNKS: ReadonlySet<string> = new Set([C2PA_CHUNK]);
const C2PA_TYPE = ascii(C2PA_CHUNK);

export const webp: ContainerFormat = {
  name: 'webp',
  mimeType: 'image/webp',
  extension: 'webp',
  maxMainPacketBytes: MAX_RIFF_SIZE,
  extendedXmp: false,
  sniff: (bytes) => startsWith(bytes, RIFF) && startsWith(bytes, WEBP, 8),
  parse: (bytes, need) => new WebpImage(bytes, need),
  isManifestStoreSlice: (slice) => startsWith(slice, C2PA_TYPE),
  readXmp: (bytes) => new WebpImage(bytes, undefined).xmp,
  writeXmp: (bytes, xmp) => new WebpImage(bytes, undefined).writeXmp(xmp),
  contentOutsideXmp: (bytes) => new WebpImage(bytes, undefined).contentOutsideXmp(),
  // Nothing to drop (see WebpImage.decoderInput), so no walk either.
  decoderInput: (bytes) => bytes,
};
