/**
 * JPEG container: SOI, then marker segments (FF xx, u16 big-endian length that counts itself), then
 * the first SOS, after which everything (scan data, later segments, EOI, trailers such as MPF
 * secondary images and gain maps) is kept as one opaque tail.
 *
 * XMP lives in APP1 segments: the main packet after `http://ns.adobe.com/xap/1.0/\0`, Extended XMP
 * after `http://ns.adobe.com/xmp/extension/\0` + 32-char GUID + full length (u32 BE) + offset (u32 BE).
 * Spec: XMP Specification Part 3 (2020) §1.1.3; ITU T.81 Annex B; CIPA DC-007 (MPF).
 */
import { createRequire } from 'node:module';
import { DamagedImageError, LimitExceededError } from '../errors.js';
import { Pieces, addRange, assemble, ascii, copyRange, startsWith, u16be, u32be, writeU32be } from './bytes.js';
import { MAX_CONTAINER_ENTRIES, checkOutputEntries, countEntry, countPacket } from './limits.js';
import { type AbsoluteOffset, absoluteOffsets, shiftedCopy } from './jpeg-trailers.js';
import type { ByteRange, ContainerFormat, ManifestStore, Need, ParsedImage, QuantTable, XmpPayload, XmpToWrite } from './types.js';
import { walked } from './walks.js';

let cryptoModule: typeof import('node:crypto') | undefined;
/** node:crypto, loaded on first use (a batch of files without Extended XMP never needs it). */
const nodeCrypto = (): typeof import('node:crypto') => (cryptoModule ??= createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto'));

const MARKER_SOI = 0xd8; // ff d8
const MARKER_EOI = 0xd9; // ff d9
const MARKER_SOS = 0xda; // ff da
const MARKER_TEM = 0x01; // ff 01, standalone
const MARKER_RST0 = 0xd0; // ff d0..d7, standalone
const MARKER_RST7 = 0xd7;
const MARKER_APP0 = 0xe0; // ff e0 (JFIF, JFXX)
const MARKER_APP1 = 0xe1; // ff e1 (Exif, XMP)
const MARKER_APP2 = 0xe2; // ff e2 (ICC, MPF, FPXR)
const MARKER_APP11 = 0xeb; // ff eb (JPEG XT boxes: JUMBF, so C2PA)
const MARKER_APP14 = 0xee; // ff ee (Adobe: colour transform of CMYK/YCCK)
const MARKER_APP15 = 0xef;
const MARKER_COM = 0xfe;
const MARKER_DQT = 0xdb;

const XMP_SIG = ascii('http://ns.adobe.com/xap/1.0/\0');
const EXT_SIG = ascii('http://ns.adobe.com/xmp/extension/\0');
const EXIF_SIG = ascii('Exif\0');
const MPF_SIG = ascii('MPF\0');
const ICC_SIG = ascii('ICC_PROFILE\0');
const ADOBE_SIG = ascii('Adobe');
/** JPEG XT (ISO 19566-5) APP11 payload: CI "JP"(2) En(2) Z(4), then the box: LBox(4) TBox(4) ... */
const JPEG_XT_CI = ascii('JP');
const JUMB = ascii('jumb');
const JUMD = ascii('jumd');
/** A C2PA JUMBF description box's type UUID starts with these four bytes (C2PA 2.1 §11.1.4.2). */
const C2PA_TYPE = ascii('c2pa');

/** A segment's length field counts itself: 65535 - 2 bytes of payload at most. */
const MAX_SEGMENT_PAYLOAD = 65533;
const EXT_HEADER = EXT_SIG.length + 32 + 4 + 4;
const MAX_EXT_PORTION = MAX_SEGMENT_PAYLOAD - EXT_HEADER;
/** Extended XMP bigger than this is not reassembled (the upload limit is far below it anyway). */
const MAX_EXTENDED_BYTES = 64 * 1024 * 1024;
type Kind = 'xmp' | 'ext' | 'mpf' | 'exif' | 'app0' | 'icc' | 'adobe' | 'jumbf' | 'metadata' | 'other' | 'standalone' | 'junk';

interface Piece {
  kind: Kind;
  /** Offset of the first byte (0xFF fill bytes included) and one past the last. */
  start: number;
  end: number;
  /** Offset of the payload after the length field (segments only). */
  payload: number;
}

interface Layout {
  /** Everything between SOI and the first SOS, in order, covering it without gaps. */
  pieces: Piece[];
  /** Offset of the first SOS marker: the tail from here on is kept as it is. */
  scan: number;
  /** One past the first SOS marker byte. */
  scanData: number;
  /** Absolute file offsets in trailers after the image data (jpeg-trailers.ts), in file order; filled by JpegImage. */
  offsets: AbsoluteOffset[];
}

function classify(bytes: Uint8Array, marker: number, payload: number): Kind {
  if (marker === MARKER_APP1) {
    if (startsWith(bytes, XMP_SIG, payload)) return 'xmp';
    if (startsWith(bytes, EXT_SIG, payload)) return 'ext';
    if (startsWith(bytes, EXIF_SIG, payload)) return 'exif';
  }
  if (marker === MARKER_APP2 && startsWith(bytes, MPF_SIG, payload)) return 'mpf';
  if (marker === MARKER_APP0) return 'app0';
  if (marker === MARKER_APP2 && startsWith(bytes, ICC_SIG, payload)) return 'icc';
  if (marker === MARKER_APP14 && startsWith(bytes, ADOBE_SIG, payload)) return 'adobe';
  if (marker === MARKER_APP11 && startsWith(bytes, JPEG_XT_CI, payload) && startsWith(bytes, JUMB, payload + 12)) return 'jumbf';
  // Other APPn and COM: metadata no decoder needs for the pixels.
  if ((marker >= MARKER_APP0 && marker <= MARKER_APP15) || marker === MARKER_COM) return 'metadata';
  return 'other';
}

/** Adds a piece, within MAX_CONTAINER_ENTRIES. */
function record(pieces: Piece[], piece: Piece): void {
  if (pieces.length >= MAX_CONTAINER_ENTRIES) countEntry(pieces.length, 'JPEG: before the image data');
  pieces.push(piece);
}

function parse(bytes: Uint8Array, need: Need | undefined): Layout {
  walked(bytes);
  const size = bytes.length;
  // The segments before the scan are read in order: `reached` is how far `need` has been asked.
  let reached = 0;
  const reach = (end: number): void => {
    if (need && end > reached) {
      need(reached, Math.min(end, size));
      reached = end;
    }
  };
  reach(4);
  if (size < 4 || bytes[0] !== 0xff || bytes[1] !== MARKER_SOI) throw new DamagedImageError('JPEG: no SOI marker');
  const pieces: Piece[] = [];
  let pos = 2;
  while (pos < size) {
    const start = pos;
    if (need) reach(pos + 4);
    if (bytes[pos] !== 0xff) {
      // Junk between segments (seen in the wild): kept as it is, never interpreted.
      for (; pos < size; pos++) {
        if (need) reach(pos + 4);
        if (bytes[pos] === 0xff) break;
      }
      record(pieces, { kind: 'junk', start, end: pos, payload: pos });
      continue;
    }
    // Fill bytes belong to the marker.
    for (; pos < size; pos++) {
      if (need) reach(pos + 4);
      if (bytes[pos] !== 0xff) break;
    }
    if (pos >= size) break;
    const marker = bytes[pos]!;
    pos++;
    if (marker === MARKER_SOS) return { pieces, scan: start, scanData: pos, offsets: [] };
    if (marker === MARKER_EOI) throw new DamagedImageError('JPEG: end of image before any image data');
    if (marker === MARKER_SOI || marker === MARKER_TEM || (marker >= MARKER_RST0 && marker <= MARKER_RST7)) {
      record(pieces, { kind: 'standalone', start, end: pos, payload: pos });
      continue;
    }
    const length = u16be(bytes, pos);
    if (length < 2) throw new DamagedImageError(`JPEG: segment ff${marker.toString(16)} has length ${length}`);
    const end = pos + length;
    if (end > size) throw new DamagedImageError(`JPEG: segment ff${marker.toString(16)} runs past the end of the file`);
    if (need) reach(end);
    const payload = pos + 2;
    record(pieces, { kind: classify(bytes, marker, payload), start, end, payload });
    pos = end; // advances by at least 2: the loop cannot stall
  }
  throw new DamagedImageError('JPEG: no image data (SOS) found');
}

interface ExtPortion {
  guid: string;
  full: number;
  offset: number;
  data: Uint8Array;
}

function extPortion(bytes: Uint8Array, p: Piece): ExtPortion | undefined {
  const at = p.payload + EXT_SIG.length;
  if (at + 40 > p.end) return undefined;
  const guid = Buffer.from(bytes.buffer, bytes.byteOffset + at, 32).toString('latin1');
  if (!/^[0-9A-Fa-f]{32}$/.test(guid)) return undefined;
  return { guid: guid.toUpperCase(), full: u32be(bytes, at + 32), offset: u32be(bytes, at + 36), data: bytes.subarray(at + 40, p.end) };
}

/** Reassembles each GUID's portions when they tile [0, full) exactly; incomplete sets are ignored. */
function reassemble(portions: ExtPortion[]): Map<string, Uint8Array> {
  const byGuid = new Map<string, ExtPortion[]>();
  for (const p of portions) {
    const list = byGuid.get(p.guid);
    if (list) list.push(p);
    else byGuid.set(p.guid, [p]);
  }
  const out = new Map<string, Uint8Array>();
  for (const [guid, list] of byGuid) {
    const full = list[0]!.full;
    if (full === 0 || full > MAX_EXTENDED_BYTES || list.some((p) => p.full !== full)) continue;
    list.sort((a, b) => a.offset - b.offset);
    let covered = 0;
    let ok = true;
    for (const p of list) {
      if (p.offset + p.data.length > full) {
        ok = false;
        break;
      }
      if (p.offset > covered) {
        ok = false; // a gap: some portion is missing
        break;
      }
      covered = Math.max(covered, p.offset + p.data.length);
    }
    if (!ok || covered !== full) continue;
    // Only now, with the total proven by the portions themselves, is it safe to allocate `full`.
    const data = new Uint8Array(full);
    for (const p of list) data.set(p.data, p.offset);
    out.set(guid, data);
  }
  return out;
}

function readXmp(bytes: Uint8Array, { pieces }: Layout): XmpPayload {
  const packets: Uint8Array[] = [];
  const portions: ExtPortion[] = [];
  const extAt: number[] = [];
  let firstMain = -1;
  let firstMpf = -1;
  for (let i = 0; i < pieces.length; i++) {
    const p = pieces[i]!;
    if (p.kind === 'xmp') {
      countPacket(packets.length + 1);
      if (firstMain < 0) firstMain = i;
      packets.push(bytes.subarray(p.payload + XMP_SIG.length, p.end));
    } else if (p.kind === 'ext') {
      extAt.push(i);
      const portion = extPortion(bytes, p);
      if (portion) portions.push(portion);
    } else if (p.kind === 'mpf' && firstMpf < 0) firstMpf = i;
  }
  const extended = reassemble(portions);
  // Canonical: what writeXmp produces. One main packet (before MPF), and either no Extended XMP or one
  // complete set whose segments follow the main one directly.
  const extInPlace = extAt.length === 0 || (extended.size === 1 && portions.length === extAt.length && extAt.every((at, k) => at === firstMain + 1 + k));
  const canonical = packets.length === 1 && extInPlace && (firstMpf < 0 || firstMain < firstMpf);
  return { packets, extended, canonical, keptOnRewrite: 0 };
}

function segment(marker: number, parts: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  if (n > MAX_SEGMENT_PAYLOAD) throw new LimitExceededError('JPEG: XMP packet does not fit one APP1 segment');
  // From Node's shared pool (a small segment is a view of it, every byte written below): one
  // ArrayBuffer per segment costs a file more in allocation and GC than the rest of its marking.
  const out = Buffer.allocUnsafe(4 + n);
  out[0] = 0xff;
  out[1] = marker;
  out[2] = ((n + 2) >> 8) & 0xff;
  out[3] = (n + 2) & 0xff;
  let at = 4;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function xmpSegments(xmp: XmpToWrite): Uint8Array[] {
  const out = [segment(MARKER_APP1, [XMP_SIG, xmp.main])];
  if (xmp.extended) {
    const { guid, data } = xmp.extended;
    if (!/^[0-9A-F]{32}$/.test(guid)) throw new Error('Extended XMP GUID must be 32 uppercase hex digits');
    const header = new Uint8Array(EXT_HEADER);
    header.set(EXT_SIG, 0);
    header.set(ascii(guid), EXT_SIG.length);
    writeU32be(header, EXT_SIG.length + 32, data.length);
    for (let offset = 0; offset < data.length; offset += MAX_EXT_PORTION) {
      const h = header.slice();
      writeU32be(h, EXT_SIG.length + 36, offset);
      out.push(segment(MARKER_APP1, [h.subarray(0), data.subarray(offset, offset + MAX_EXT_PORTION)]));
    }
  }
  return out;
}

/**
 * Where a new main segment goes when the file has none: after the leading APP0 (JFIF) and Exif APP1
 * segments, which readers expect first, and so always before MPF (APP2).
 */
function leadingInsertIndex(pieces: Piece[]): number {
  let i = 0;
  while (i < pieces.length && (pieces[i]!.kind === 'app0' || pieces[i]!.kind === 'exif')) i++;
  return i;
}

/**
 * MPF entries locate secondary images (after EOI) relative to the MPF header. When bytes between that
 * header and the images change size, those offsets move by `delta`; this rewrites them.
 */
function patchMpf(bytes: Uint8Array, p: Piece, delta: number): Uint8Array {
  const seg = copyRange(bytes, p.start, p.end);
  const tiff = p.payload - p.start + MPF_SIG.length;
  const le = seg[tiff] === 0x49 && seg[tiff + 1] === 0x49;
  if (!le && !(seg[tiff] === 0x4d && seg[tiff + 1] === 0x4d)) throw new DamagedImageError('JPEG: MPF header is not TIFF');
  const dv = new DataView(seg.buffer, seg.byteOffset, seg.byteLength);
  const u16 = (at: number): number => {
    if (at + 2 > seg.length) throw new DamagedImageError('JPEG: MPF index runs past its segment');
    return dv.getUint16(at, le);
  };
  const u32 = (at: number): number => {
    if (at + 4 > seg.length) throw new DamagedImageError('JPEG: MPF index runs past its segment');
    return dv.getUint32(at, le);
  };
  const ifd = tiff + u32(tiff + 4);
  const count = u16(ifd);
  for (let e = 0; e < count; e++) {
    const entry = ifd + 2 + e * 12;
    if (u16(entry) !== 0xb002) continue; // MPEntry
    const n = u32(entry + 4);
    const list = tiff + u32(entry + 8);
    for (let k = 0; k + 16 <= n; k += 16) {
      const off = u32(list + k + 8);
      if (off !== 0) dv.setUint32(list + k + 8, off + delta, le);
    }
  }
  return seg;
}

function writeXmp(bytes: Uint8Array, { pieces, scan, offsets }: Layout, xmp: XmpToWrite): Uint8Array[] {
  const fresh = xmpSegments(xmp);
  const firstMain = pieces.findIndex((p) => p.kind === 'xmp');
  let insertAt = firstMain >= 0 ? firstMain : leadingInsertIndex(pieces);
  // A JPEG must open with SOI and a marker: junk that dropping XMP segments would bring to the front
  // (the tail of a segment whose length field lied) goes after ours.
  const firstKept = pieces.findIndex((p) => p.kind !== 'xmp' && p.kind !== 'ext');
  if (firstKept >= 0 && firstKept < insertAt && pieces[firstKept]!.kind === 'junk') insertAt = firstKept;
  const mpf = pieces.findIndex((p) => p.kind === 'mpf');
  let delta = 0;
  if (mpf >= 0) {
    for (let i = mpf + 1; i < pieces.length; i++) {
      const p = pieces[i]!;
      if (p.kind === 'xmp' || p.kind === 'ext') delta -= p.end - p.start;
    }
    if (insertAt > mpf) for (const s of fresh) delta += s.length;
  }
  // The output's segment count, checked before it is built: its reader must not refuse it.
  let kept = fresh.length;
  for (const p of pieces) if (p.kind !== 'xmp' && p.kind !== 'ext') kept++;
  checkOutputEntries(kept, 'JPEG: before the image data');
  const out = new Pieces(bytes);
  out.keep(0, 2);
  for (let i = 0; i <= pieces.length; i++) {
    if (i === insertAt) out.add(...fresh);
    const p = pieces[i];
    if (!p || p.kind === 'xmp' || p.kind === 'ext') continue;
    if (i === mpf && delta !== 0) out.add(patchMpf(bytes, p, delta));
    else out.keep(p.start, p.end);
  }
  // The image data and what follows move by what the segments before it grew or shrank: trailers that
  // address the file absolutely (AFCP, Samsung) get their offsets moved with them, as ExifTool does.
  let shift = 0;
  for (const s of fresh) shift += s.length;
  for (const p of pieces) if (p.kind === 'xmp' || p.kind === 'ext') shift -= p.end - p.start;
  let at = scan;
  if (shift !== 0) {
    for (const o of offsets) {
      out.keep(at, o.at);
      out.add(shiftedCopy(bytes, o.at, o.at + 4, [o], shift));
      at = o.at + 4;
    }
  }
  out.keep(at, bytes.length);
  return out.done();
}

function contentOutsideXmp(bytes: Uint8Array, { pieces, scan }: Layout): Uint8Array[] {
  // One slice per segment, not merged like writeXmp's pieces: provenance digests length-prefix each slice.
  const out: Uint8Array[] = [bytes.subarray(0, 2)];
  // Junk between segments is not content, and tools that rewrite files drop it.
  for (const p of pieces) if (p.kind !== 'xmp' && p.kind !== 'ext' && p.kind !== 'junk') out.push(bytes.subarray(p.start, p.end));
  out.push(bytes.subarray(scan));
  return out;
}

/**
 * The file with only what a decoder needs before the scan (JFIF, ICC profile, Adobe colour transform,
 * tables, frame header); from the first SOS on it is kept as it is.
 */
function decoderInput(bytes: Uint8Array, { pieces, scan }: Layout): Uint8Array {
  const out = new Pieces(bytes);
  out.keep(0, 2);
  let dropped = false;
  for (const p of pieces) {
    if (p.kind === 'app0' || p.kind === 'icc' || p.kind === 'adobe' || p.kind === 'other' || p.kind === 'standalone') out.keep(p.start, p.end);
    else dropped = true;
  }
  if (!dropped) return bytes;
  out.keep(scan, bytes.length);
  return assemble(out.done());
}

/** SOFn markers (frame headers): c0-cf except DHT (c4), JPG (c8) and DAC (cc). */
const isFrameHeader = (marker: number): boolean => marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;

/**
 * Width and height from the first frame header (SOFn: precision u8, height u16, width u16), as a
 * decoder's header read gives them (before any EXIF orientation). Undefined when there is no frame header
 * before the scan or it leaves the height to a DNL marker (height 0). Throws like readXmp on a broken structure.
 */
export function jpegFrameSize(input: Uint8Array | ParsedImage): { width: number; height: number } | undefined {
  if (input instanceof JpegImage) return input.frameSize;
  return frameSize(input as Uint8Array, parse(input as Uint8Array, undefined));
}

function frameSize(bytes: Uint8Array, { pieces }: Layout): { width: number; height: number } | undefined {
  for (const p of pieces) {
    // A segment's marker is the byte before its length field.
    if (p.kind !== 'other' || !isFrameHeader(bytes[p.payload - 3]!) || p.payload + 5 > p.end) continue;
    const height = u16be(bytes, p.payload + 1);
    const width = u16be(bytes, p.payload + 3);
    return height > 0 && width > 0 ? { width, height } : undefined;
  }
  return undefined;
}

/**
 * JPEG: the entropy-coded data after SOS never holds ff d9 (a data byte ff is always followed by 00 or a
 * restart marker), so the image is whole exactly when an EOI marker follows the first SOS. The last two
 * bytes first (where a whole file has it, so a file-backed caller reads two bytes), then the whole scan.
 */
function cutOff(bytes: Uint8Array, { scanData }: Layout, need: Need | undefined): string | undefined {
  const size = bytes.length;
  if (size - 2 > scanData) {
    need?.(size - 2, size);
    if (bytes[size - 2] === 0xff && bytes[size - 1] === MARKER_EOI) return undefined;
  }
  need?.(scanData, size);
  if (Buffer.from(bytes.buffer, bytes.byteOffset, size).lastIndexOf(EOI) > scanData) return undefined;
  return `The JPEG image data ends after ${size - scanData} bytes without its end marker (EOI): the file is cut off in its pixel data.`;
}
const EOI = Buffer.from([0xff, MARKER_EOI]);

/** The C2PA store: the JUMBF segments of the box instance (En) whose description box has the C2PA type. */
function manifestStore(bytes: Uint8Array, { pieces }: Layout): ManifestStore | undefined {
  const jumbf = pieces.filter((p) => p.kind === 'jumbf');
  const first = jumbf.find((p) => startsWith(bytes, JUMD, p.payload + 20) && startsWith(bytes, C2PA_TYPE, p.payload + 24));
  if (!first) return undefined;
  const instance = u16be(bytes, first.payload + 2);
  return { ranges: jumbf.filter((p) => u16be(bytes, p.payload + 2) === instance).map((p) => ({ start: p.start, end: p.end })) };
}

/** Every table of every DQT segment before the scan; a table cut short ends its segment's list. */
function quantTables(bytes: Uint8Array, { pieces }: Layout): QuantTable[] {
  const tables: QuantTable[] = [];
  for (const p of pieces) {
    if (p.kind !== 'other' || bytes[p.payload - 3] !== MARKER_DQT) continue;
    for (let at = p.payload; at < p.end; ) {
      const precision = bytes[at]! >> 4 ? 16 : 8;
      const n = precision === 16 ? 128 : 64;
      if (at + 1 + n > p.end) break;
      const values: number[] = [];
      for (let i = 0; i < 64; i++) values.push(precision === 16 ? u16be(bytes, at + 1 + 2 * i) : bytes[at + 1 + i]!);
      tables.push({ id: bytes[at]! & 15, precision, values });
      at += 1 + n;
    }
  }
  return tables;
}

/** One walk of a JPEG (src/formats/types.ts). */
class JpegImage implements ParsedImage {
  readonly bytes: Uint8Array;
  readonly lossless = false;
  readonly #layout: Layout;
  readonly #need: Need | undefined;
  #xmp: XmpPayload | undefined;
  #cut: { message: string | undefined } | undefined;
  #quant: QuantTable[] | undefined;
  #store: { store: ManifestStore | undefined } | undefined;
  #copy: ByteRange[] | undefined;
  #trailersRead = false;

  constructor(bytes: Uint8Array, need: Need | undefined) {
    this.bytes = bytes;
    this.#need = need;
    this.#layout = parse(bytes, need);
  }

  /** jpegFrameSize from this walk. */
  get frameSize(): { width: number; height: number } | undefined {
    return frameSize(this.bytes, this.#layout);
  }

  get manifestStore(): ManifestStore | undefined {
    return (this.#store ??= { store: manifestStore(this.bytes, this.#layout) }).store;
  }

  /** From the first scan on, the file is kept as it is (scans, later segments, EOI, trailers), but for the trailers' absolute offsets. */
  get copyRanges(): readonly ByteRange[] {
    if (!this.#copy) {
      const copy: ByteRange[] = [];
      let at = this.#layout.scan;
      for (const o of this.#trailers().offsets) {
        addRange(copy, at, o.at);
        at = o.at + 4;
      }
      addRange(copy, at, this.bytes.length);
      this.#copy = copy;
    }
    return this.#copy;
  }

  /** The layout with the trailers' absolute offsets found (read from the file's end on first use). */
  #trailers(): Layout {
    if (!this.#trailersRead) {
      this.#layout.offsets = absoluteOffsets(this.bytes, this.#layout.scanData, this.#need);
      this.#trailersRead = true;
    }
    return this.#layout;
  }

  get format(): ContainerFormat {
    return jpeg;
  }

  get xmp(): XmpPayload {
    return (this.#xmp ??= readXmp(this.bytes, this.#layout));
  }

  get truncated(): string | undefined {
    return (this.#cut ??= { message: cutOff(this.bytes, this.#layout, this.#need) }).message;
  }

  get quantTables(): readonly QuantTable[] {
    return (this.#quant ??= quantTables(this.bytes, this.#layout));
  }

  writeXmp(xmp: XmpToWrite): Uint8Array[] {
    return writeXmp(this.bytes, this.#trailers(), xmp);
  }

  contentOutsideXmp(): Uint8Array[] {
    return contentOutsideXmp(this.bytes, this.#layout);
  }

  decoderInput(): Uint8Array {
    return decoderInput(this.bytes, this.#layout);
  }
}

export const jpeg: ContainerFormat = {
  name: 'jpeg',
  mimeType: 'image/jpeg',
  extension: 'jpg',
  maxMainPacketBytes: MAX_SEGMENT_PAYLOAD - XMP_SIG.length,
  extendedXmp: true,
  sniff: (bytes) => bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === MARKER_SOI && bytes[2] === 0xff,
  parse: (bytes, need) => new JpegImage(bytes, need),
  // Every segment of a store repeats `JP`, En, Z and the superbox's LBox/`jumb`.
  isManifestStoreSlice: (s) => s[0] === 0xff && s[1] === MARKER_APP11 && startsWith(s, JPEG_XT_CI, 4) && startsWith(s, JUMB, 16),
  readXmp: (bytes) => new JpegImage(bytes, undefined).xmp,
  writeXmp: (bytes, xmp) => new JpegImage(bytes, undefined).writeXmp(xmp),
  contentOutsideXmp: (bytes) => new JpegImage(bytes, undefined).contentOutsideXmp(),
  decoderInput: (bytes) => new JpegImage(bytes, undefined).decoderInput(),
};

/** MD5 of the full Extended XMP serialisation, as the GUID the XMP spec asks for. */
export function extendedXmpGuid(data: Uint8Array): string {
  return nodeCrypto().createHash('md5').update(data).digest('hex').toUpperCase();
}
