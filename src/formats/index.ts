/**
 * The one registry of container formats. Formats are told apart by their leading bytes only, never by
 * file names or declared media types.
 */
import { UnsupportedFormatError } from '../errors.js';
import { jpeg } from './jpeg.js';
import { png } from './png.js';
import { webp } from './webp.js';
import type { ContainerFormat, Need, ParsedImage } from './types.js';

export type { ByteRange, ContainerFormat, ManifestStore, Need, ParsedImage, QuantTable, XmpPayload, XmpToWrite } from './types.js';

export const FORMATS = new Map([
  ['jpeg', jpeg],
  ['png', png],
  ['webp', webp],
] as const);

export type FormatName = ContainerFormat['name'];

/** The format whose signature the bytes start with, or undefined. */
export function detectFormat(bytes: Uint8Array): ContainerFormat | undefined {
  for (const format of FORMATS.values()) if (format.sniff(bytes)) return format;
  return undefined;
}

/** Like detectFormat, but throws UnsupportedFormatError (415 at the edge) for anything else. */
export function requireFormat(bytes: Uint8Array): ContainerFormat {
  const format = detectFormat(bytes);
  if (!format) throw new UnsupportedFormatError();
  return format;
}

/** Sniffs the format (UnsupportedFormatError for anything else) and walks the file once (src/formats/types.ts). */
export function parseImage(bytes: Uint8Array, need?: Need): ParsedImage {
  need?.(0, Math.min(bytes.length, SNIFF_BYTES));
  return requireFormat(bytes).parse(bytes, need);
}

/** Bytes every format's signature fits in (WebP: `RIFF`, size, `WEBP`). */
const SNIFF_BYTES = 12;
