/**
 * Is the image data whole? The container parsers stop where the image data begins (JPEG: the first
 * SOS; PNG: the chunks after the first IDAT are walked but a cut or garbled stretch is kept verbatim),
 * because marking needs nothing past it and keeps it byte for byte. So a file cut off in its pixel data
 * is marked (200): the container up to the image data is intact and the metadata edit is exact
 * (docs/marking.md). This module says when that happened, so that protect and verify can add a
 * `truncated_image_data` warning and a pipeline can tell. It reads no pixels: a search for the end
 * marker (JPEG EOI), a walk over chunk headers (PNG), a size check (WebP).
 */
import type { ContainerFormat } from './types.js';

/** A warning of a protect or verify answer (the shared `warnings` array: docs/openapi.json). */
export interface Warning {
  code: string;
  message: string;
}

export const TRUNCATED_IMAGE_DATA = 'truncated_image_data';

const u32be = (b: Uint8Array, at: number): number => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const u32le = (b: Uint8Array, at: number): number => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;

/** Offset of the first SOS marker, walking the segments before it (undefined when there is none). */
function firstScan(bytes: Uint8Array): number | undefined {
  let pos = 2;
  while (pos + 1 < bytes.length) {
    if (bytes[pos] !== 0xff) {
      pos++;
      continue;
    }
    while (pos < bytes.length && bytes[pos] === 0xff) pos++;
    if (pos >= bytes.length) return undefined;
    const marker = bytes[pos]!;
    pos++;
    if (marker === 0xda) return pos;
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) continue;
    if (pos + 2 > bytes.length) return undefined;
    pos += (bytes[pos]! << 8) | bytes[pos + 1]!;
  }
  return undefined;
}

/**
 * JPEG: the entropy-coded data after SOS never holds ff d9 (a data byte ff is always followed by 00 or a
 * restart marker), so the image is whole exactly when an EOI marker follows the first SOS.
 */
function jpegCutOff(bytes: Uint8Array): string | undefined {
  const scan = firstScan(bytes);
  if (scan === undefined) return undefined; // the parser refuses such a file before this is asked
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.lastIndexOf(EOI) > scan) return undefined;
  return `The JPEG image data ends after ${bytes.length - scan} bytes without its end marker (EOI): the file is cut off in its pixel data.`;
}
const EOI = Buffer.from([0xff, 0xd9]);

/** PNG: whole when the chunks, header by header, reach IEND inside the file. */
function pngCutOff(bytes: Uint8Array): string | undefined {
  let pos = 8;
  while (pos + 12 <= bytes.length) {
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

/** WebP: whole when the file holds the size its RIFF header declares (the parser refuses less). */
function webpCutOff(bytes: Uint8Array): string | undefined {
  if (bytes.length < 12) return undefined;
  const declared = u32le(bytes, 4) + 8;
  return declared > bytes.length ? `The WebP file is ${bytes.length} bytes where its RIFF header declares ${declared}: it is cut off.` : undefined;
}

/** The warnings about the image data of a file the container parser accepted (empty when whole). */
export function imageDataWarnings(format: ContainerFormat['name'], bytes: Uint8Array): Warning[] {
  const message = format === 'jpeg' ? jpegCutOff(bytes) : format === 'png' ? pngCutOff(bytes) : webpCutOff(bytes);
  return message ? [{ code: TRUNCATED_IMAGE_DATA, message: `${message} It was marked anyway: the container up to the image data is intact.` }] : [];
}
