/**
 * An independent container walker and builder for tests. It shares no code with src/formats on
 * purpose: when a test asks "did protect keep every non-XMP byte?", the answer must not come from the
 * code under test. Written plainly over Buffers, the way checks/lib/containers.py is.
 */
import { crc32, deflateSync } from 'node:zlib';

export type Format = 'jpeg' | 'png' | 'webp';

const JPEG_XMP = Buffer.from('http://ns.adobe.com/xap/1.0/\0', 'latin1');
const JPEG_EXT = Buffer.from('http://ns.adobe.com/xmp/extension/\0', 'latin1');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const PNG_XMP_KEYWORD = Buffer.from('XML:com.adobe.xmp\0', 'latin1');

const buf = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));

export function sniff(b: Uint8Array): Format | undefined {
  const x = buf(b);
  if (x.length >= 3 && x[0] === 0xff && x[1] === 0xd8 && x[2] === 0xff) return 'jpeg';
  if (x.subarray(0, 8).equals(PNG_SIGNATURE)) return 'png';
  if (x.toString('latin1', 0, 4) === 'RIFF' && x.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return undefined;
}

// ---------------------------------------------------------------------------------------------- JPEG

export interface JpegSegment {
  marker: number;
  /** Offset of the 0xFF that starts the marker; `end` is one past the segment. */
  start: number;
  end: number;
  /** Payload after the length field (empty for standalone markers). */
  payload: Buffer;
  /** Offset of the length field, for mutation tests. */
  lengthAt: number | undefined;
}

export interface JpegLayout {
  segments: JpegSegment[];
  /** Offset of the first SOS marker, or the file length when there is none. */
  scan: number;
}

/** Segments between SOI and the first SOS; junk bytes between segments are skipped (not compared). */
export function jpegLayout(b: Uint8Array): JpegLayout {
  const d = buf(b);
  if (d[0] !== 0xff || d[1] !== 0xd8) throw new Error('not a JPEG');
  const segments: JpegSegment[] = [];
  let i = 2;
  while (i < d.length) {
    if (d[i] !== 0xff) {
      i++;
      continue;
    }
    const start = i;
    while (i < d.length && d[i] === 0xff) i++;
    if (i >= d.length) break;
    const marker = d[i++]!;
    if (marker === 0xda) return { segments, scan: start };
    if ((marker >= 0xd0 && marker <= 0xd9) || marker === 0x01) {
      segments.push({ marker, start, end: i, payload: Buffer.alloc(0), lengthAt: undefined });
      continue;
    }
    if (i + 2 > d.length) break;
    const n = d.readUInt16BE(i);
    segments.push({ marker, start, end: i + n, payload: d.subarray(i + 2, i + n), lengthAt: i });
    i += Math.max(n, 2);
  }
  return { segments, scan: d.length };
}

export const isJpegXmp = (s: JpegSegment): boolean => s.marker === 0xe1 && s.payload.subarray(0, JPEG_XMP.length).equals(JPEG_XMP);
export const isJpegExt = (s: JpegSegment): boolean => s.marker === 0xe1 && s.payload.subarray(0, JPEG_EXT.length).equals(JPEG_EXT);

/** The main XMP packets of a JPEG, in file order. */
export function jpegXmpPackets(b: Uint8Array): Buffer[] {
  return jpegLayout(b)
    .segments.filter(isJpegXmp)
    .map((s) => s.payload.subarray(JPEG_XMP.length));
}

export interface ExtPortion {
  guid: string;
  full: number;
  offset: number;
  data: Buffer;
}

export function jpegExtPortions(b: Uint8Array): ExtPortion[] {
  return jpegLayout(b)
    .segments.filter(isJpegExt)
    .map((s) => {
      const p = s.payload.subarray(JPEG_EXT.length);
      return { guid: p.toString('latin1', 0, 32), full: p.readUInt32BE(32), offset: p.readUInt32BE(36), data: p.subarray(40) };
    });
}

export function jpegSegment(marker: number, payload: Uint8Array): Buffer {
  if (payload.length > 65533) throw new Error('segment payload too large');
  const head = Buffer.from([0xff, marker, 0, 0]);
  head.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([head, payload]);
}

export const app1Xmp = (packet: Uint8Array): Buffer => jpegSegment(0xe1, Buffer.concat([JPEG_XMP, packet]));

export function app1Ext(guid: string, full: number, offset: number, data: Uint8Array): Buffer {
  const h = Buffer.alloc(40);
  h.write(guid, 0, 'latin1');
  h.writeUInt32BE(full, 32);
  h.writeUInt32BE(offset, 36);
  return jpegSegment(0xe1, Buffer.concat([JPEG_EXT, h, data]));
}

export const jpegCom = (text: string): Buffer => jpegSegment(0xfe, Buffer.from(text, 'latin1'));

/**
 * A JPEG with every XMP and Extended XMP segment removed and `segments` put in: right after SOI, or
 * after the segment at index `after` of the original layout.
 */
export function jpegWith(b: Uint8Array, segments: Uint8Array[], after = -1): Buffer {
  const d = buf(b);
  const { segments: all, scan } = jpegLayout(d);
  const out: Uint8Array[] = [d.subarray(0, 2)];
  if (after < 0) out.push(...segments);
  all.forEach((s, i) => {
    if (!isJpegXmp(s) && !isJpegExt(s)) out.push(d.subarray(s.start, s.end));
    if (i === after) out.push(...segments);
  });
  out.push(d.subarray(scan));
  return Buffer.concat(out);
}

// ----------------------------------------------------------------------------------------------- PNG

export interface PngChunk {
  type: string;
  start: number;
  /** Data and CRC. */
  data: Buffer;
  crc: Buffer;
  end: number;
}

export function pngChunks(b: Uint8Array): { chunks: PngChunk[]; tail: Buffer } {
  const d = buf(b);
  if (!d.subarray(0, 8).equals(PNG_SIGNATURE)) throw new Error('not a PNG');
  const chunks: PngChunk[] = [];
  let i = 8;
  while (i + 8 <= d.length) {
    const n = d.readUInt32BE(i);
    const type = d.toString('latin1', i + 4, i + 8);
    const end = i + 12 + n;
    chunks.push({ type, start: i, data: d.subarray(i + 8, i + 8 + n), crc: d.subarray(i + 8 + n, end), end });
    i = end;
    if (type === 'IEND') break;
  }
  return { chunks, tail: d.subarray(Math.min(i, d.length)) };
}

export const isPngXmp = (c: PngChunk): boolean => c.type === 'iTXt' && c.data.subarray(0, PNG_XMP_KEYWORD.length).equals(PNG_XMP_KEYWORD);

export function pngChunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  Buffer.from(data.buffer, data.byteOffset, data.byteLength).copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** An iTXt XMP chunk; `compressed` deflates the text (readers must inflate it). */
export function itxtXmp(packet: Uint8Array, compressed = false, keyword = 'XML:com.adobe.xmp'): Buffer {
  const text = compressed ? deflateSync(packet) : packet;
  return pngChunk('iTXt', Buffer.concat([Buffer.from(`${keyword}\0`, 'latin1'), Buffer.from([compressed ? 1 : 0, 0, 0, 0]), text]));
}

/** XMP in a tEXt chunk, or a zTXt one (method 0, deflated), under the XMP keyword, as libvips writes it. */
export function textXmp(type: 'tEXt' | 'zTXt', packet: Uint8Array): Buffer {
  const text = type === 'zTXt' ? Buffer.concat([Buffer.from([0]), deflateSync(packet)]) : packet;
  return pngChunk(type, Buffer.concat([PNG_XMP_KEYWORD, text]));
}

/** The XMP text of every iTXt XMP chunk, in order, with where it sits relative to the first IDAT. */
export function pngXmpChunks(b: Uint8Array): Array<{ beforeIdat: boolean; compressed: boolean; index: number }> {
  const { chunks } = pngChunks(b);
  const firstIdat = chunks.findIndex((c) => c.type === 'IDAT');
  return chunks.flatMap((c, index) => (isPngXmp(c) ? [{ beforeIdat: index < firstIdat, compressed: c.data[PNG_XMP_KEYWORD.length] === 1, index }] : []));
}

export type PngPlace = 'afterIhdr' | 'beforeIdat' | 'afterIdat' | 'beforeIend';

/** A PNG with `add` chunks placed at `where` (existing XMP chunks are kept unless `dropXmp`). */
export function pngWith(b: Uint8Array, add: Uint8Array[], where: PngPlace, dropXmp = true): Buffer {
  const d = buf(b);
  const { chunks, tail } = pngChunks(d);
  const firstIdat = chunks.findIndex((c) => c.type === 'IDAT');
  let lastIdat = firstIdat;
  while (chunks[lastIdat + 1]?.type === 'IDAT') lastIdat++;
  const at = { afterIhdr: 1, beforeIdat: firstIdat, afterIdat: lastIdat + 1, beforeIend: chunks.length - 1 }[where];
  const out: Uint8Array[] = [PNG_SIGNATURE];
  chunks.forEach((c, i) => {
    if (i === at) out.push(...add);
    if (!(dropXmp && isPngXmp(c))) out.push(d.subarray(c.start, c.end));
  });
  out.push(tail);
  return Buffer.concat(out);
}

// ---------------------------------------------------------------------------------------------- WebP

export interface WebpChunk {
  fourcc: string;
  start: number;
  size: number;
  data: Buffer;
  /** Offset of the size field, for mutation tests. */
  sizeAt: number;
  /** One past the pad byte. */
  end: number;
}

export function webpChunks(b: Uint8Array): { riffSize: number; chunks: WebpChunk[]; tail: Buffer } {
  const d = buf(b);
  if (sniff(d) !== 'webp') throw new Error('not a WebP');
  const riffSize = d.readUInt32LE(4);
  const end = Math.min(d.length, 8 + riffSize);
  const chunks: WebpChunk[] = [];
  let i = 12;
  while (i + 8 <= end) {
    const size = d.readUInt32LE(i + 4);
    chunks.push({
      fourcc: d.toString('latin1', i, i + 4),
      start: i,
      size,
      data: d.subarray(i + 8, i + 8 + size),
      sizeAt: i + 4,
      end: i + 8 + size + (size & 1),
    });
    i += 8 + size + (size & 1);
  }
  return { riffSize, chunks, tail: d.subarray(end) };
}

export interface Canvas {
  width: number;
  height: number;
  alpha: boolean;
}

/** Canvas size and alpha of a WebP as its bitstream or VP8X says, read independently of src. */
export function webpCanvas(b: Uint8Array): Canvas & { flags: number | undefined } {
  const { chunks } = webpChunks(b);
  const first = chunks[0]!;
  if (first.fourcc === 'VP8X') {
    const x = first.data;
    return { flags: x[0]!, width: 1 + x.readUIntLE(4, 3), height: 1 + x.readUIntLE(7, 3), alpha: (x[0]! & 0x10) !== 0 };
  }
  if (first.fourcc === 'VP8L') {
    const bits = first.data.readUInt32LE(1);
    return { flags: undefined, width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1, alpha: ((bits >>> 28) & 1) === 1 };
  }
  return { flags: undefined, width: first.data.readUInt16LE(6) & 0x3fff, height: first.data.readUInt16LE(8) & 0x3fff, alpha: false };
}

function webpChunk(fourcc: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.write(fourcc, 0, 'latin1');
  head.writeUInt32LE(data.length, 4);
  return Buffer.concat([head, data, Buffer.alloc(data.length & 1)]);
}

export const webpXmpChunk = (packet: Uint8Array): Buffer => webpChunk('XMP ', packet);
export const webpUnknownChunk = (fourcc: string, data: Uint8Array): Buffer => webpChunk(fourcc, data);

/**
 * An extended WebP holding the original's chunks (XMP ones dropped) and `add` appended at the end, with
 * VP8X made (from the bitstream) or updated, its flags or-ed with `flags`.
 */
export function webpWith(b: Uint8Array, add: Uint8Array[], flags = 0x04): Buffer {
  const d = buf(b);
  const { chunks } = webpChunks(d);
  const canvas = webpCanvas(d);
  const body: Uint8Array[] = [];
  const rest = chunks.filter((c) => c.fourcc !== 'VP8X' && c.fourcc !== 'XMP ');
  const vp8x = Buffer.alloc(10);
  vp8x[0] = (canvas.flags ?? (canvas.alpha ? 0x10 : 0)) | flags;
  vp8x.writeUIntLE(canvas.width - 1, 4, 3);
  vp8x.writeUIntLE(canvas.height - 1, 7, 3);
  body.push(webpChunk('VP8X', vp8x));
  for (const c of rest) body.push(webpChunk(c.fourcc, c.data));
  body.push(...add);
  const payload = Buffer.concat(body);
  const head = Buffer.alloc(12);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(payload.length + 4, 4);
  head.write('WEBP', 8, 'latin1');
  return Buffer.concat([head, payload]);
}

export function webpXmpPackets(b: Uint8Array): Buffer[] {
  return webpChunks(b)
    .chunks.filter((c) => c.fourcc === 'XMP ')
    .map((c) => c.data);
}

// ------------------------------------------------------------------------------------------ compare

/**
 * Everything but XMP, as labelled parts, for byte-for-byte comparison before and after protect. The
 * same rules as checks/lib/containers.py: JPEG segments before SOS and the whole tail; PNG chunks (data
 * and CRC) and what follows IEND; WebP chunk payloads except XMP and VP8X, and what follows the RIFF.
 */
export function nonXmpParts(format: Format, b: Uint8Array): Array<[string, Buffer]> {
  const d = buf(b);
  if (format === 'jpeg') {
    const { segments, scan } = jpegLayout(d);
    const out: Array<[string, Buffer]> = segments.filter((s) => !isJpegXmp(s) && !isJpegExt(s)).map((s) => [s.marker.toString(16), s.payload]);
    out.push(['SOS+', d.subarray(scan)]);
    return out;
  }
  if (format === 'png') {
    const { chunks, tail } = pngChunks(d);
    const out: Array<[string, Buffer]> = chunks.filter((c) => !isPngXmp(c)).map((c) => [c.type, Buffer.concat([c.data, c.crc])]);
    out.push(['tail', tail]);
    return out;
  }
  const { chunks, tail } = webpChunks(d);
  const out: Array<[string, Buffer]> = chunks.filter((c) => c.fourcc !== 'XMP ' && c.fourcc !== 'VP8X').map((c) => [c.fourcc, c.data]);
  out.push(['tail', tail]);
  return out;
}

/** The XMP packets a file holds, each as its container stores it (PNG: uncompressed text only). */
export function xmpPackets(format: Format, b: Uint8Array): Buffer[] {
  if (format === 'jpeg') return jpegXmpPackets(b);
  if (format === 'webp') return webpXmpPackets(b);
  return pngChunks(b)
    .chunks.filter(isPngXmp)
    .map((c) => {
      let at = PNG_XMP_KEYWORD.length + 2;
      at = c.data.indexOf(0, at) + 1;
      at = c.data.indexOf(0, at) + 1;
      return c.data.subarray(at);
    });
}

/** Puts one XMP packet into a file the way the fixture asks, removing any XMP it had. */
export function withXmp(format: Format, b: Uint8Array, packet: Uint8Array, place: PngPlace | 'compressed' = 'beforeIdat'): Buffer {
  if (format === 'jpeg') {
    const { segments } = jpegLayout(b);
    // after APP0/Exif, like most writers
    let after = -1;
    while (segments[after + 1] && (segments[after + 1]!.marker === 0xe0 || (segments[after + 1]!.marker === 0xe1 && !isJpegXmp(segments[after + 1]!)))) after++;
    return jpegWith(b, [app1Xmp(packet)], after);
  }
  if (format === 'png') {
    if (place === 'compressed') return pngWith(b, [itxtXmp(packet, true)], 'afterIdat');
    return pngWith(b, [itxtXmp(packet)], place);
  }
  return webpWith(b, [webpXmpChunk(packet)]);
}
