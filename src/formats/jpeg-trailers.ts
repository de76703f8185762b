/**
 * Trailers after a JPEG's image data that address the file by absolute offsets, and so must move with
 * it: protect changes the size of what comes before the scan, and everything after it shifts by that
 * much. Two such trailers are known (ExifTool's trailer handling, Image::ExifTool::ProcessTrailers):
 *
 * - AFCP (AXS File Concatenation Protocol): a header `AXS!` (big-endian) or `AXS*` (little-endian),
 *   version (2), entry count (2), 4 reserved bytes, then entries of tag (4), size (4) and absolute
 *   offset (4); the data; and a footer of the header's four bytes, the header's absolute offset (4) and
 *   4 zero bytes, the last 12 bytes of the trailer. ExifTool rewrites every offset when it writes.
 * - Samsung: blocks read backward from the end (`QDIOBS` or `\0\0SEFT` last); a QDIO block holds the
 *   absolute offsets of the audio file's start and end, which ExifTool sets when it writes.
 *
 * Trailers are found the way ExifTool finds them, from the end of the file back, each one's length
 * telling where the one before it ends: AFCP, FotoStation, PhotoMechanic, Canon VRD, MIE and Samsung
 * say their length at their end; a Vivo trailer is found by its footer and the start ExifTool searches
 * for after the end of the image. The walk stops at any other trailer (Insta360, Nikon, OnePlus, Google):
 * an AFCP trailer before one of those is not found here and is kept as it is (ExifTool reads such a file
 * with its own fix, "Adjusted AFCP offsets", as it reads any file whose AFCP offsets are stale).
 */
import { ascii, startsWith, u32be, u32le } from './bytes.js';
import type { Need } from './types.js';

/** A 4-byte field holding an absolute file offset, and its byte order. */
export interface AbsoluteOffset {
  at: number;
  littleEndian: boolean;
}

/** Trailers found from the end of the file back, at most this many (a file has one or two). */
const MAX_TRAILERS = 16;
/** Samsung blocks walked backward, at most. */
const MAX_SAMSUNG_BLOCKS = 64;
const FOTOSTATION_SIGNATURE = 0xa1b2c3d4;

const latin1 = (b: Uint8Array, at: number, n: number): string => String.fromCharCode(...b.subarray(at, at + n));
/** Byte signatures, compared in place: the walk runs on every JPEG, most of which have no trailer. */
const AXS = ascii('AXS');
const CBIPCBBL = ascii('cbipcbbl');
const CANON_VRD_SIG = ascii('CANON OPTIONAL DATA\0');
const QDIOBS = ascii('QDIOBS');
const SEFT_END = ascii('\0\0SEFT');
const SEFH = ascii('SEFH');
const read32 = (b: Uint8Array, at: number, le: boolean): number => (le ? u32le(b, at) : u32be(b, at));

/**
 * The absolute offsets in the trailers between `from` (where the image data begins) and the end of the
 * file, in file order. Reads only the trailers' headers and footers (through `need`).
 */
export function absoluteOffsets(bytes: Uint8Array, from: number, need: Need | undefined): AbsoluteOffset[] {
  const found: AbsoluteOffset[] = [];
  const get = (start: number, end: number): boolean => {
    if (start < from || end > bytes.length || start > end) return false;
    need?.(start, end);
    return true;
  };
  // Where ExifTool's trailers begin: after the end marker that ends the image (the first after the scan:
  // entropy-coded data never holds one). Searched for only when a trailer needs it.
  let eoi: number | undefined | null = null;
  const trailerStart = (): number | undefined => {
    if (eoi === null) {
      eoi = undefined;
      if (get(from, bytes.length)) {
        const at = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).indexOf(EOI, from);
        if (at >= 0) eoi = at + 2;
      }
    }
    return eoi;
  };
  let end = bytes.length;
  for (let n = 0; n < MAX_TRAILERS && end - from >= 12; n++) {
    const start =
      afcp(bytes, end, get, found, trailerStart) ??
      fotoStation(bytes, end, get) ??
      photoMechanic(bytes, end, get) ??
      canonVrd(bytes, end, get) ??
      mie(bytes, end, get) ??
      samsung(bytes, end, get, found) ??
      vivo(bytes, end, get, trailerStart);
    if (start === undefined || start >= end || start < from) break;
    end = start;
  }
  return found.sort((a, b) => a.at - b.at);
}

type Get = (start: number, end: number) => boolean;

/**
 * AFCP ending at `end`: records its offsets, returns where it starts. A header that is not where the
 * footer says (offsets already stale, as another tool left them) is searched for from the end of the
 * image, as ExifTool does; its offsets then stay as stale as they were, by the same amount.
 */
function afcp(b: Uint8Array, end: number, get: Get, found: AbsoluteOffset[], trailerStart: () => number | undefined): number | undefined {
  if (!get(end - 12, end) || !startsWith(b, AXS, end - 12)) return undefined;
  const order = b[end - 9];
  if (order !== 0x21 && order !== 0x2a) return undefined; // '!' big-endian, '*' little-endian
  const le = order === 0x2a;
  const hdr = latin1(b, end - 12, 4);
  let start: number | undefined = read32(b, end - 8, le);
  if (!get(start, start + 12) || latin1(b, start, 4) !== hdr) {
    const from = trailerStart();
    start = from === undefined || !get(from, end) ? undefined : Buffer.from(b.buffer, b.byteOffset, end - 12).indexOf(hdr, from, 'latin1');
    if (start === undefined || start < 0) return undefined;
  }
  if (start + 24 > end) return undefined;
  const count = le ? b[start + 6]! | (b[start + 7]! << 8) : (b[start + 6]! << 8) | b[start + 7]!;
  if (start + 12 + 12 * count > end - 12 || !get(start + 12, start + 12 + 12 * count)) return undefined;
  for (let i = 0; i < count; i++) found.push({ at: start + 12 + 12 * i + 8, littleEndian: le });
  found.push({ at: end - 8, littleEndian: le });
  return start;
}

/** FotoStation records ending at `end` (tag 2, size 4 counting the 10-byte footer, signature 4, big-endian). */
function fotoStation(b: Uint8Array, end: number, get: Get): number | undefined {
  let at = end;
  while (get(at - 10, at) && read32(b, at - 4, false) === FOTOSTATION_SIGNATURE) {
    const size = read32(b, at - 8, false);
    if (size < 10 || at - size < 0) break;
    at -= size;
  }
  return at < end ? at : undefined;
}

/** PhotoMechanic: a footer of size (4, big-endian) and `cbipcbbl`, after `size` bytes of IPTC. */
function photoMechanic(b: Uint8Array, end: number, get: Get): number | undefined {
  if (!get(end - 12, end) || !startsWith(b, CBIPCBBL, end - 8)) return undefined;
  const size = read32(b, end - 12, false);
  return size < 0x80000000 && end - 12 - size >= 0 ? end - 12 - size : undefined;
}

/** Canon VRD: its last 0x40 bytes open with the signature and the data length (big-endian); header and footer add 0x5c. */
function canonVrd(b: Uint8Array, end: number, get: Get): number | undefined {
  if (!get(end - 0x40, end) || !startsWith(b, CANON_VRD_SIG, end - 0x40)) return undefined;
  const length = read32(b, end - 0x40 + CANON_VRD_SIG.length, false) + 0x5c;
  const start = end - length;
  return length < 0x80000000 && get(start, start + CANON_VRD_SIG.length) && startsWith(b, CANON_VRD_SIG, start) ? start : undefined;
}

/** MIE groups, each ending in a 10-byte trailer element whose length (4 bytes) counts the group. */
function mie(b: Uint8Array, end: number, get: Get): number | undefined {
  let at = end;
  for (let n = 0; n < MAX_TRAILERS && get(at - 10, at); n++) {
    // `~`, format 0, tag length 0, value length 6, then the group length and its byte order, and 4.
    if (b[at - 10] !== 0x7e || b[at - 9] !== 0 || b[at - 8] !== 0 || b[at - 7] !== 6 || b[at - 1] !== 4) break;
    const order = b[at - 2];
    if (order !== 0x10 && order !== 0x18) break;
    const length = read32(b, at - 6, order === 0x18);
    if (length < 12 || length > at) break;
    at -= length;
  }
  return at < end ? at : undefined;
}

/**
 * Vivo: its footer has no length; ExifTool takes it to start at `streamdata` or `vivo{"`, searched for
 * from the end of the image (the first end marker after the scan).
 */
function vivo(b: Uint8Array, end: number, get: Get, trailerStart: () => number | undefined): number | undefined {
  if (!get(end - VIVO_FOOTER.length, end) || !VIVO_FOOTER.every((x, i) => b[end - VIVO_FOOTER.length + i] === x)) return undefined;
  const from = trailerStart();
  if (from === undefined || !get(from, end)) return undefined;
  const view = Buffer.from(b.buffer, b.byteOffset, end);
  const starts = [view.indexOf('streamdata', from, 'latin1'), view.indexOf('vivo{"', from, 'latin1')].filter((x) => x >= 0);
  return starts.length > 0 ? Math.min(...starts) : undefined;
}
const VIVO_FOOTER = [0xff, 0xff, 0xff, 0xff, 0x1b, 0x2a, 0x39, 0x48, 0x57, 0x66, 0x75, 0x84, 0x93, 0xa2, 0xb1];
const EOI = Buffer.from([0xff, 0xd9]);

/** Samsung blocks ending at `end` (little-endian): records a QDIO block's audio offsets, returns where the trailer starts. */
function samsung(b: Uint8Array, end: number, get: Get, found: AbsoluteOffset[]): number | undefined {
  if (!get(end - 6, end)) return undefined;
  const qdioLast = startsWith(b, QDIOBS, end - 6);
  if (!qdioLast && !startsWith(b, SEFT_END, end - 6)) return undefined;
  let blockEnd = qdioLast ? end - 2 : end;
  const qdio: AbsoluteOffset[] = [];
  for (let n = 0; n < MAX_SAMSUNG_BLOCKS && get(blockEnd - 8, blockEnd); n++) {
    const len = read32(b, blockEnd - 8, true);
    const type = latin1(b, blockEnd - 4, 4);
    if (!/^\w+$/.test(type) || len < 4 || len >= 0x10000 || len + 8 >= blockEnd) return undefined;
    const data = blockEnd - 8 - len;
    if (!get(data, blockEnd - 8)) return undefined;
    blockEnd = data;
    if (type === 'QDIO' && len === 20) qdio.push({ at: data + 12, littleEndian: true }, { at: data + 16, littleEndian: true });
    if (type !== 'SEFT') continue;
    if (!startsWith(b, SEFH, data) || len < 12) return undefined;
    const count = read32(b, data + 8, true);
    if (12 + 12 * count > len) return undefined;
    let first = 0;
    for (let i = 0; i < count; i++) first = Math.max(first, read32(b, data + 12 + 12 * i + 4, true));
    found.push(...qdio);
    return data - first;
  }
  return undefined;
}

/** A copy of bytes[start, end) with each absolute offset inside it moved by `delta`. */
export function shiftedCopy(bytes: Uint8Array, start: number, end: number, offsets: readonly AbsoluteOffset[], delta: number): Uint8Array {
  const out = new Uint8Array(end - start);
  out.set(bytes.subarray(start, end));
  const view = new DataView(out.buffer);
  for (const o of offsets) {
    if (o.at < start || o.at + 4 > end) continue;
    const value = view.getUint32(o.at - start, o.littleEndian);
    if (value !== 0) view.setUint32(o.at - start, (value + delta) >>> 0, o.littleEndian);
  }
  return out;
}
