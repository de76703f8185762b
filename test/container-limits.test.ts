/**
 * One set of container limits for every walk (issue #36 point 2): protect never answers with a file that
 * verify or protect refuse. A WebP of 100,000 chunks was marked by protect (200), then refused by verify
 * (`limit_exceeded` "while looking for Content Credentials"): the C2PA detection walked with a limit of
 * its own. Each case here is at, just under and just over the limit, for the three containers: protect
 * either refuses with the code its reader gives the input (limit_exceeded) or, when only its output
 * would break the limit, output_too_large; or it answers a file that verify's reads and protect accept.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
const MAX_CONTAINER_ENTRIES = 100_000;
import { requireFormat } from '../src/formats/index.js';
const parseImage = (b: Buffer) => ({ decoderInput: () => requireFormat(b).decoderInput(b) });
import { protect, read } from '../src/marking/engine.js';
import { otherDeclarations } from '../src/pipeline/verify.js';
import { jpegLayout, jpegSegment, jpegWith, pngChunk, pngChunks, pngWith, webpChunks, webpUnknownChunk, webpWith } from './helpers/containers.js';
import { texture } from './helpers/fixtures.js';

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code ?? `untyped: ${String(err)}`;
  }
}

/** What verify does with a file's structure, without the pixel and signature layers: the read, Content Credentials, the decoder's input. */
async function verifyCode(bytes: Buffer): Promise<string | undefined> {
  try {
    const reading = read(bytes);
    await otherDeclarations(reading, bytes);
    parseImage(bytes).decoderInput();
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code ?? `untyped: ${String(err)}`;
  }
}

/** The property of the issue, for one input: returns protect's answer ('ok' or its code). */
async function holds(input: Buffer): Promise<string> {
  const inputCode = await verifyCode(input);
  const p = codeOf(() => protect(input));
  if (p !== undefined) {
    expect(p).toBe(inputCode ?? 'output_too_large');
    return p;
  }
  const out = Buffer.from(protect(input).bytes);
  expect(await verifyCode(out), 'verify of what protect answered').toBeUndefined();
  expect(read(out).optedOut).toBe(true);
  expect(
    codeOf(() => protect(out)),
    'protect of what protect answered',
  ).toBeUndefined();
  expect(protect(out).changed).toBe(false);
  return 'ok';
}

let simpleWebp: Buffer;
let jpg: Buffer;
let png: Buffer;
beforeAll(async () => {
  const raw = sharp(texture(16, 16, 3, 3), { raw: { width: 16, height: 16, channels: 3 } });
  simpleWebp = await raw.clone().webp({ lossless: true }).toBuffer();
  jpg = await raw.clone().jpeg().toBuffer();
  png = await raw.clone().png().toBuffer();
});

/** A simple WebP (VP8L first, no VP8X) followed by unknown chunks, `total` chunks in all. */
function simpleWebpOf(total: number): Buffer {
  const riff = simpleWebp.subarray(0, 8 + simpleWebp.readUInt32LE(4));
  const have = webpChunks(riff).chunks.length;
  const body = Buffer.concat([riff, Buffer.concat(Array(total - have).fill(webpUnknownChunk('ZZZZ', Buffer.alloc(0))))]);
  body.writeUInt32LE(body.length - 8, 4);
  return body;
}

/** An extended WebP (VP8X, with XMP flagged but no XMP chunk yet) of `total` chunks. */
function extendedWebpOf(total: number): Buffer {
  const base = webpWith(simpleWebp, []);
  const have = webpChunks(base).chunks.length;
  return webpWith(simpleWebp, Array(total - have).fill(webpUnknownChunk('ZZZZ', Buffer.alloc(0))));
}

const AROUND = [-3, -2, -1, 0, 1];

describe('one limit for every walk: protect answers nothing verify or protect refuse', () => {
  it('the fuzzed WebP of 100,000 chunks (simple form): protect and verify agree', async () => {
    const outcomes: string[] = [];
    for (const d of AROUND) outcomes.push(await holds(simpleWebpOf(MAX_CONTAINER_ENTRIES + d)));
    // Under the limit it is marked; at it, the two chunks protect adds (VP8X, XMP) would pass it; over it, the input is refused.
    expect(outcomes).toEqual(['ok', 'ok', 'output_too_large', 'output_too_large', 'limit_exceeded']);
    expect(await verifyCode(simpleWebpOf(100_000))).toBeUndefined();
  });

  it('WebP, extended form', async () => {
    const outcomes: string[] = [];
    for (const d of AROUND) outcomes.push(await holds(extendedWebpOf(MAX_CONTAINER_ENTRIES + d)));
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'output_too_large', 'limit_exceeded']);
  });

  it('PNG chunks', async () => {
    const have = pngChunks(png).chunks.length;
    const empty = pngChunk('zzZz', Buffer.alloc(0));
    const outcomes: string[] = [];
    for (const d of AROUND) outcomes.push(await holds(pngWith(png, Array(MAX_CONTAINER_ENTRIES + d - have).fill(empty), 'afterIhdr')));
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'output_too_large', 'limit_exceeded']);
  });

  it('JPEG segments before the image data', async () => {
    const have = jpegLayout(jpg).segments.length;
    const com = jpegSegment(0xfe, Buffer.alloc(0));
    const outcomes: string[] = [];
    for (const d of AROUND) outcomes.push(await holds(jpegWith(jpg, Array(MAX_CONTAINER_ENTRIES + d - have).fill(com))));
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'output_too_large', 'limit_exceeded']);
  });
});
