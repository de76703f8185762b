/**
 * Oracles shared by the marking tests: ExifTool's reading of a file, sharp's decoded pixels, and the
 * structural checks every protected file must pass whatever its origin (generated or corpus).
 */
import type { ExifTool } from 'exiftool-vendored';
import sharp from 'sharp';
import { expect } from 'vitest';
import {
  type Format,
  isJpegExt,
  isJpegXmp,
  jpegExtPortions,
  jpegLayout,
  nonXmpParts,
  pngChunks,
  pngXmpChunks,
  sniff,
  webpCanvas,
  webpChunks,
  xmpPackets,
} from './containers.js';
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';

/** ExifTool's tags of a file, `-n` (raw values) and `-G1` (family-1 groups), without bookkeeping. */
export async function exiftoolTags(et: ExifTool, path: string, args: string[]): Promise<Record<string, unknown>> {
  const tags = (await et.readRaw(path, { readArgs: [...args, '-n', '-G1'] })) as Record<string, unknown>;
  for (const k of ['SourceFile', 'errors', 'warnings']) delete tags[k];
  return tags;
}

/** What ExifTool reads as XMP-plus:DataMining (the bare token, as `-n` prints it). */
export async function exiftoolDataMining(et: ExifTool, path: string): Promise<unknown> {
  return (await exiftoolTags(et, path, ['-XMP-plus:DataMining']))['XMP-plus:DataMining'];
}

/**
 * Tags that protect changes on purpose: DataMining in whatever group ExifTool files it (an https
 * namespace lands in XMP-tmp0, and protect replaces it too) and the Extended XMP GUID.
 */
const changedOnPurpose = (tag: string): boolean => tag.endsWith(':DataMining') || tag === 'XMP-xmpNote:HasExtendedXMP';

/** ExifTool's XMP tags of a file, minus the ones protect changes on purpose. */
export async function exiftoolXmp(et: ExifTool, path: string): Promise<Record<string, unknown>> {
  const tags = await exiftoolTags(et, path, ['-XMP:all']);
  for (const k of Object.keys(tags)) if (changedOnPurpose(k)) delete tags[k];
  return tags;
}

const DECODE = { failOn: 'none', limitInputPixels: false, animated: true } as const;

/** Raw decoded pixels (every frame), as the acceptance check compares them. */
export async function pixels(bytes: Uint8Array): Promise<Buffer> {
  return sharp(bytes, DECODE).raw().toBuffer();
}

/**
 * Structure every protected file must have, checked with the independent walker: same format, every
 * non-XMP part byte-equal, exactly one XMP packet where the format wants it, and the bookkeeping right.
 */
export function expectMarkedStructure(format: Format, original: Uint8Array, out: Uint8Array): void {
  expect(sniff(out)).toBe(format);
  // Each part by name, length and SHA-256: the same check as comparing the bytes (vitest's deep
  // equality walks a Buffer byte by byte, seconds for a megabyte of scan data), with a readable diff.
  const digest = (parts: Array<[string, Buffer]>): Array<[string, number, string]> =>
    parts.map(([name, b]) => [name, b.length, createHash('sha256').update(b).digest('hex')]);
  expect(digest(nonXmpParts(format, out))).toEqual(digest(nonXmpParts(format, original)));
  expect(xmpPackets(format, out)).toHaveLength(1);
  if (format === 'jpeg') expectJpeg(out);
  if (format === 'png') expectPng(out);
  if (format === 'webp') expectWebp(original, out);
}

function expectJpeg(out: Uint8Array): void {
  const { segments } = jpegLayout(out);
  const main = segments.findIndex(isJpegXmp);
  const sof = segments.findIndex((s) => s.marker >= 0xc0 && s.marker <= 0xcf && s.marker !== 0xc4 && s.marker !== 0xc8 && s.marker !== 0xcc);
  if (sof >= 0) expect(main).toBeLessThan(sof);
  // Extended XMP, when written, follows the main packet, tiles its length, and is named by its MD5.
  const ext = segments.map((s, i) => (isJpegExt(s) ? i : -1)).filter((i) => i >= 0);
  if (ext.length === 0) return;
  expect(ext).toEqual(ext.map((_, k) => main + 1 + k));
  const portions = jpegExtPortions(out);
  const guid = portions[0]!.guid;
  const full = Buffer.alloc(portions[0]!.full);
  let covered = 0;
  for (const p of portions) {
    expect(p.guid).toBe(guid);
    expect(p.offset).toBe(covered);
    p.data.copy(full, p.offset);
    covered += p.data.length;
  }
  expect(covered).toBe(full.length);
  expect(createHash('md5').update(full).digest('hex').toUpperCase()).toBe(guid);
  expect(xmpPackets('jpeg', out)[0]!.toString('utf8')).toContain(guid);
}

function expectPng(out: Uint8Array): void {
  const { chunks } = pngChunks(out);
  for (const c of chunks) expect(crc32(Buffer.concat([Buffer.from(c.type, 'latin1'), c.data]))).toBe(c.crc.readUInt32BE(0));
  const [xmp] = pngXmpChunks(out);
  expect(xmp).toMatchObject({ beforeIdat: true, compressed: false });
  expect(xmp!.index).toBeGreaterThan(0); // after IHDR
  const types = chunks.map((c) => c.type);
  const firstIdat = types.indexOf('IDAT');
  for (const early of ['acTL', 'iCCP', 'PLTE']) if (types.includes(early)) expect(types.indexOf(early)).toBeLessThan(firstIdat);
  if (types.includes('iCCP') && types.includes('PLTE')) expect(types.indexOf('iCCP')).toBeLessThan(types.indexOf('PLTE'));
}

function expectWebp(original: Uint8Array, out: Uint8Array): void {
  const { riffSize, chunks, tail } = webpChunks(out);
  expect(riffSize).toBe(out.length - 8 - tail.length);
  for (const c of chunks) expect(c.end - c.start).toBe(8 + c.size + (c.size & 1));
  expect(chunks[0]!.fourcc).toBe('VP8X');
  const before = webpCanvas(original);
  const after = webpCanvas(out);
  expect({ width: after.width, height: after.height }).toEqual({ width: before.width, height: before.height });
  if (before.flags === undefined) expect(after.flags).toBe(0x04 | (before.alpha ? 0x10 : 0));
  else expect(after.flags).toBe(before.flags | 0x04);
}
