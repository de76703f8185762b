/**
 * The generators that found the holes of issue #20, as fast-check arbitraries, and the property every
 * generated file must keep. Shared by the bounded run in `npm test` (test/hostile-fuzz.test.ts) and the
 * longer one in `npm run test:long` (test/long/hostile-fuzz.test.ts).
 *
 * - compressed-chunk bombs: PNG chunks (iTXt/zTXt XMP, zTXt under other keywords, iCCP) whose zlib data
 *   inflates to sizes around the per-file budget, in any number and place;
 * - segment floods: JPEG segments (COM, APPn, XMP) up to and past the segment limit;
 * - size amplification: compressed packets around protect's growth bound, and upload limits around
 *   the input's size.
 *
 * The property: read and protect return or throw a typed input/output code; the per-file budget and
 * packet count decide exactly when a file is refused; what protect returns is within its growth bound
 * and the upload limit, reads back opted out and is a fixed point of protect; the decoder's input keeps
 * only the chunks and segments a decoder needs.
 */
import { deflateSync } from 'node:zlib';
import fc from 'fast-check';
import { expect } from 'vitest';
import { OptmarkError } from '../../src/errors.js';
import { hasManifestStore } from '../../src/c2pa/detect.js';
import { requireFormat } from '../../src/formats/index.js';
import { MAX_CONTAINER_ENTRIES, MAX_INFLATED_XMP_BYTES, MAX_PROTECT_GROWTH_BYTES, MAX_XMP_PACKETS } from '../../src/formats/limits.js';
import { protect, read } from '../../src/marking/engine.js';
import {
  app1Xmp,
  jpegLayout,
  jpegSegment,
  jpegWith,
  pngChunk,
  pngChunks,
  pngWith,
  type PngPlace,
  webpChunks,
  webpUnknownChunk,
  webpWith,
} from './containers.js';
import { NS } from './fixtures.js';

const MiB = 1024 * 1024;
/** Inflated sizes around the budget and the growth bound. */
export const INFLATED_SIZES = [
  0,
  1024,
  MAX_PROTECT_GROWTH_BYTES - 4096,
  MAX_PROTECT_GROWTH_BYTES + 4096,
  4 * MiB,
  8 * MiB,
  MAX_INFLATED_XMP_BYTES - 64,
  MAX_INFLATED_XMP_BYTES + 1,
] as const;

const packetCache = new Map<number, Buffer>();
/** zlib data of an XMP packet that inflates to exactly `size` bytes (at least the packet's frame). */
function compressedPacket(size: number): Buffer {
  let z = packetCache.get(size);
  if (!z) {
    const pre = Buffer.from(
      `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="${NS.rdf}"><rdf:Description rdf:about="" xmlns:plus="${NS.plus}" plus:Z="`,
    );
    const post = Buffer.from('"/></rdf:RDF></x:xmpmeta>');
    const fill = Math.max(0, size - pre.length - post.length);
    z = deflateSync(Buffer.concat([pre, Buffer.alloc(fill, 0x41), post]), { level: 9 });
    packetCache.set(size, z);
  }
  return z;
}
/** What a generated packet really inflates to: the requested size, or its XML frame when that is larger. */
function inflatedSize(size: number): number {
  const frame = Buffer.byteLength(
    `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="${NS.rdf}"><rdf:Description rdf:about="" xmlns:plus="${NS.plus}" plus:Z=""/></rdf:RDF></x:xmpmeta>`,
  );
  return Math.max(size, frame);
}

export type BombKind = 'itxt' | 'ztxt-xmp' | 'ztxt-other' | 'iccp';
export interface Bomb {
  kind: BombKind;
  size: (typeof INFLATED_SIZES)[number];
}

function bombChunk(b: Bomb): Buffer {
  const z = compressedPacket(b.size);
  switch (b.kind) {
    case 'itxt':
      return pngChunk('iTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\x01\x00\0\0', 'latin1'), z]));
    case 'ztxt-xmp':
      return pngChunk('zTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\0', 'latin1'), z]));
    case 'ztxt-other':
      return pngChunk('zTXt', Buffer.concat([Buffer.from('Comment\0\0', 'latin1'), z]));
    case 'iccp':
      return pngChunk('iCCP', Buffer.concat([Buffer.from('icc\0\0', 'latin1'), z]));
  }
}

export const bombArb = fc.record({ kind: fc.constantFrom<BombKind>('itxt', 'ztxt-xmp', 'ztxt-other', 'iccp'), size: fc.constantFrom(...INFLATED_SIZES) });

export interface BombCase {
  bombs: Bomb[];
  place: PngPlace;
  /** The upload limit protect is given, as an offset from the input's length (undefined: none). */
  limitOffset: number | undefined;
}

export const bombCaseArb: fc.Arbitrary<BombCase> = fc.record({
  bombs: fc.array(bombArb, { minLength: 1, maxLength: 6 }),
  place: fc.constantFrom<PngPlace>('afterIhdr', 'beforeIdat', 'afterIdat'),
  limitOffset: fc.option(fc.integer({ min: -1024, max: MAX_PROTECT_GROWTH_BYTES + 1024 }), { nil: undefined }),
});

export function bombFile(png: Buffer, c: BombCase): Buffer {
  return pngWith(png, c.bombs.map(bombChunk), c.place, false);
}

/** What the reader must do with a bomb case: refuse it exactly when the XMP budget or count is passed. */
export function expectedRead(c: BombCase): 'limit_exceeded' | 'ok' {
  let inflated = 0;
  let packets = 0;
  for (const b of c.bombs) {
    if (b.kind !== 'itxt' && b.kind !== 'ztxt-xmp') continue;
    packets++;
    if (packets > MAX_XMP_PACKETS) return 'limit_exceeded';
    inflated += inflatedSize(b.size);
    if (inflated > MAX_INFLATED_XMP_BYTES) return 'limit_exceeded';
  }
  return 'ok';
}

export interface FloodCase {
  /** Segments added, as an offset from what would bring the file exactly to the segment limit. */
  offset: number;
  marker: number;
  withXmp: boolean;
}

export const floodCaseArb: fc.Arbitrary<FloodCase> = fc.record({
  offset: fc.integer({ min: -3, max: 1 }),
  marker: fc.constantFrom(0xfe, 0xe3, 0xed, 0xef),
  withXmp: fc.boolean(),
});

export const MAX_JPEG_SEGMENTS = 100_000;

export function floodFile(jpg: Buffer, c: FloodCase): Buffer {
  const have = jpegLayout(jpg).segments.length + (c.withXmp ? 1 : 0);
  const n = Math.max(0, MAX_JPEG_SEGMENTS - have + c.offset);
  const add = Array<Buffer>(n).fill(jpegSegment(c.marker, Buffer.alloc(0)));
  if (c.withXmp)
    add.unshift(
      app1Xmp(Buffer.from(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="${NS.rdf}"><rdf:Description rdf:about=""/></rdf:RDF></x:xmpmeta>`)),
    );
  return jpegWith(jpg, add);
}

export interface ChunkFloodCase {
  format: 'png' | 'webp-simple' | 'webp-extended';
  /** Chunks in the file, as an offset from the container limit. */
  offset: number;
}

export const chunkFloodCaseArb: fc.Arbitrary<ChunkFloodCase> = fc.record({
  format: fc.constantFrom('png' as const, 'webp-simple' as const, 'webp-extended' as const),
  offset: fc.integer({ min: -3, max: 1 }),
});

/** A PNG or WebP (`webp`: a simple lossless one) of MAX_CONTAINER_ENTRIES + offset chunks, empty unknown ones added. */
export function chunkFloodFile(png: Buffer, webp: Buffer, c: ChunkFloodCase): Buffer {
  const total = MAX_CONTAINER_ENTRIES + c.offset;
  if (c.format === 'png') return pngWith(png, Array(total - pngChunks(png).chunks.length).fill(pngChunk('zzZz', Buffer.alloc(0))), 'afterIhdr');
  const empty = webpUnknownChunk('ZZZZ', Buffer.alloc(0));
  if (c.format === 'webp-extended') return webpWith(webp, Array(total - webpChunks(webpWith(webp, [])).chunks.length).fill(empty));
  const riff = webp.subarray(0, 8 + webp.readUInt32LE(4));
  const out = Buffer.concat([riff, ...Array<Buffer>(total - webpChunks(riff).chunks.length).fill(empty)]);
  out.writeUInt32LE(out.length - 8, 4);
  return out;
}

const INPUT_CODES = new Set(['unsupported_format', 'damaged_image', 'limit_exceeded']);
const PNG_DECODER_CHUNKS = new Set(['IHDR', 'PLTE', 'tRNS', 'gAMA', 'cHRM', 'sRGB', 'cICP', 'sBIT', 'pHYs', 'IDAT', 'IEND', 'iCCP']);
const JPEG_DROPPED = (m: number): boolean => m === 0xfe || m === 0xe1 || (m >= 0xe3 && m <= 0xed) || m === 0xef;

function outcome<T>(f: () => T): { ok: T } | { code: string } {
  try {
    return { ok: f() };
  } catch (err) {
    if (!(err instanceof OptmarkError)) throw new Error(`untyped error: ${String(err)}`, { cause: err });
    return { code: err.code };
  }
}

/**
 * The property every hostile file keeps. Returns what happened, for the run's tally. `expectedReadCode`
 * is the reader's exact answer when the generator knows it.
 */
export function checkHostile(input: Buffer, maxOutputBytes: number | undefined, expectedReadCode?: 'ok' | 'limit_exceeded'): string {
  const r = outcome(() => read(input));
  if ('code' in r) expect(INPUT_CODES).toContain(r.code);
  if (expectedReadCode) expect('code' in r ? r.code : 'ok').toBe(expectedReadCode);
  const p = outcome(() => protect(input, maxOutputBytes === undefined ? {} : { maxOutputBytes }));
  if ('code' in p) {
    expect([...INPUT_CODES, 'output_too_large']).toContain(p.code);
    // A file the reader accepts is refused by protect only for its output.
    if (!('code' in r)) expect(p.code).toBe('output_too_large');
  } else {
    expect('code' in r).toBe(false);
    const out = Buffer.from(p.ok.bytes);
    expect(out.length - input.length).toBeLessThanOrEqual(MAX_PROTECT_GROWTH_BYTES);
    if (maxOutputBytes !== undefined) expect(out.length).toBeLessThanOrEqual(maxOutputBytes);
    expect(read(out).optedOut).toBe(true);
    // verify also walks the output for Content Credentials and hands it to the decoder: neither refuses it.
    expect(outcome(() => hasManifestStore(requireFormat(out).name, out))).not.toHaveProperty('code');
    expect(outcome(() => requireFormat(out).decoderInput(out))).not.toHaveProperty('code');
    expect(protect(out).changed).toBe(false);
  }
  const d = outcome(() => requireFormat(input).decoderInput(input));
  if (!('code' in d)) {
    const clean = Buffer.from(d.ok);
    if (clean[0] === 0x89) for (const c of pngChunks(clean).chunks) expect(PNG_DECODER_CHUNKS).toContain(c.type);
    if (clean[0] === 0xff) for (const s of jpegLayout(clean).segments) expect(JPEG_DROPPED(s.marker)).toBe(false);
  }
  return 'code' in p ? p.code : 'ok';
}
