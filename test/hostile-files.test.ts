/**
 * Hostile files (issue #20, points 1 to 3): compressed XMP that inflates into gigabytes, metadata that
 * only the decoder would have parsed, and protect outputs that optmark itself would refuse. Each case
 * asserts the code or the bytes; none times anything.
 */
import { deflateSync } from 'node:zlib';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORMATS as FORMAT_REGISTRY, requireFormat } from '../src/formats/index.js';
import { InflateBudget, MAX_INFLATED_XMP_BYTES, MAX_PROTECT_GROWTH_BYTES, MAX_XMP_PACKETS } from '../src/formats/limits.js';
import { protect, read } from '../src/marking/engine.js';
import { MAX_MARKUP_PER_FILE } from '../src/xmp/packet.js';
import { detectFingerprint, embedFingerprint } from '../src/fingerprint/index.js';
import { app1Xmp, jpegLayout, jpegSegment, jpegWith, pngChunk, pngChunks, pngWith, textXmp } from './helpers/containers.js';
import { FixtureSet, NS, packet, rawImage, vocab } from './helpers/fixtures.js';
import { pixels } from './helpers/oracle.js';

const fx = new FixtureSet();
afterAll(() => fx.close());

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');
const MiB = 1024 * 1024;

/** An iTXt XMP chunk whose packet (an attribute of `size` bytes in all) is stored compressed, as the fuzzer built them. */
function compressedXmpChunk(size: number): Buffer {
  const pre = utf8(`<x:xmpmeta xmlns:x="${NS.x}"><rdf:RDF xmlns:rdf="${NS.rdf}"><rdf:Description rdf:about="" xmlns:plus="${NS.plus}" plus:Z="`);
  const post = utf8('"/></rdf:RDF></x:xmpmeta>');
  const x = Buffer.concat([pre, Buffer.alloc(size - pre.length - post.length, 0x41), post]);
  return pngChunk('iTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\x01\x00\0\0', 'latin1'), deflateSync(x, { level: 9 })]));
}

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code ?? 'uncoded';
  }
}

let png: Buffer;
let jpg: Buffer;
beforeAll(async () => {
  png = await fx.bytes('base.png');
  jpg = await fx.bytes('base.jpg');
});

describe('compressed XMP is bounded per file, as it is inflated (#20.1)', () => {
  it('64 compressed packets of just under 16 MiB each are refused at the second, not inflated and kept', () => {
    const bomb = compressedXmpChunk(MAX_INFLATED_XMP_BYTES - 64);
    const input = pngWith(png, Array(64).fill(bomb), 'beforeIdat');
    expect(input.length).toBeLessThan(2 * MiB);
    expect(codeOf(() => read(input))).toBe('limit_exceeded');
    expect(codeOf(() => protect(input))).toBe('limit_exceeded');
  });

  it('one compressed packet over the budget is refused, not silently dropped by protect', () => {
    const input = pngWith(png, [compressedXmpChunk(MAX_INFLATED_XMP_BYTES + 1)], 'beforeIdat');
    expect(codeOf(() => read(input))).toBe('limit_exceeded');
    expect(codeOf(() => protect(input))).toBe('limit_exceeded');
  });

  it('compressed packets within the budget together are read', () => {
    const small = pngChunk(
      'iTXt',
      Buffer.concat([
        Buffer.from('XML:com.adobe.xmp\0\x01\x00\0\0', 'latin1'),
        deflateSync(utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-PROHIBITED') } }))),
      ]),
    );
    const input = pngWith(png, [compressedXmpChunk(4 * MiB), small], 'beforeIdat');
    expect(read(input).optedOut).toBe(true);
  });

  it('the budget stops zlib at its bound, and charges what it inflated', () => {
    const budget = new InflateBudget(1000);
    expect(Buffer.from(budget.inflate(deflateSync(Buffer.alloc(600)))!).length).toBe(600);
    expect(budget.remaining).toBe(400);
    expect(codeOf(() => budget.inflate(deflateSync(Buffer.alloc(401))))).toBe('limit_exceeded');
    expect(budget.inflate(Buffer.from('not zlib'))).toBeUndefined();
  });

  it.each(['png', 'jpeg', 'webp'] as const)('%s: packet %i past the limit is refused as it is found', async (format) => {
    const x = utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-PROHIBITED') } }));
    const n = MAX_XMP_PACKETS + 1;
    let input: Buffer;
    if (format === 'png') input = pngWith(png, Array(n).fill(textXmp('tEXt', x)), 'beforeIdat', false);
    else if (format === 'jpeg') input = jpegWith(jpg, Array(n).fill(app1Xmp(x)));
    else {
      const { webpWith, webpXmpChunk } = await import('./helpers/containers.js');
      input = webpWith(await fx.bytes('base.webp'), Array(n).fill(webpXmpChunk(x)));
    }
    expect(codeOf(() => read(input))).toBe('limit_exceeded');
  });
});

describe('protect never answers with a file optmark would refuse (#20.3)', () => {
  it('a 16 MiB compressed packet would come back uncompressed, 16 MiB larger: output_too_large', () => {
    const input = pngWith(png, [compressedXmpChunk(MAX_INFLATED_XMP_BYTES - 64)], 'beforeIdat');
    expect(codeOf(() => read(input))).toBeUndefined();
    expect(codeOf(() => protect(input))).toBe('output_too_large');
  });

  it('growth up to the bound is answered, and the answer reads back opted out and stays as it is', () => {
    const input = pngWith(png, [compressedXmpChunk(MAX_PROTECT_GROWTH_BYTES / 2)], 'beforeIdat');
    const out = protect(input).bytes;
    expect(out.length - input.length).toBeLessThanOrEqual(MAX_PROTECT_GROWTH_BYTES);
    expect(read(out).optedOut).toBe(true);
    expect(protect(out).changed).toBe(false);
  });

  it('an output over the upload limit is refused (maxOutputBytes)', () => {
    expect(codeOf(() => protect(png, { maxOutputBytes: png.length }))).toBe('output_too_large');
    expect(protect(png, { maxOutputBytes: png.length + 64 * 1024 }).bytes.length).toBeGreaterThan(png.length);
  });

  it('a JPEG at the segment limit: one more segment (the XMP) would make a file its reader refuses', () => {
    const have = jpegLayout(jpg).segments.length;
    const com = jpegSegment(0xfe, Buffer.alloc(0));
    const atLimit = jpegWith(jpg, Array(100_000 - have).fill(com));
    expect(codeOf(() => read(atLimit))).toBeUndefined();
    expect(codeOf(() => protect(atLimit))).toBe('output_too_large');
    const below = jpegWith(jpg, Array(100_000 - have - 1).fill(com));
    const out = protect(below).bytes;
    expect(read(out).optedOut).toBe(true);
  });

  it('PNG text XMP kept beside ours counts: a rewrite that would pass the markup limit is refused', () => {
    const half = Math.ceil(MAX_MARKUP_PER_FILE / 2);
    const x = utf8(packet({ body: `<dc:x>${'<a/>'.repeat(half)}</dc:x>` }));
    const input = pngWith(png, [textXmp('tEXt', x)], 'beforeIdat', false);
    expect(codeOf(() => read(input))).toBeUndefined();
    expect(codeOf(() => protect(input))).toBe('output_too_large');
  });

  it('the packet limit counts kept text packets too', () => {
    const x = utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') } }));
    const input = pngWith(png, Array(MAX_XMP_PACKETS).fill(textXmp('tEXt', x)), 'beforeIdat', false);
    expect(codeOf(() => read(input))).toBeUndefined();
    expect(codeOf(() => protect(input))).toBe('output_too_large');
  });
});

describe('the decoder gets only what our parser bounded (#20.2)', () => {
  it('PNG: text, EXIF, private and APNG chunks are left out; the pixels are the same', async () => {
    const extra = [
      compressedXmpChunk(MAX_INFLATED_XMP_BYTES + 1),
      pngChunk('zTXt', Buffer.concat([Buffer.from('Comment\0\0', 'latin1'), deflateSync(Buffer.alloc(MiB))])),
      pngChunk('tEXt', Buffer.from('Title\0hello', 'latin1')),
      pngChunk('eXIf', Buffer.from('MM\0*\0\0\0\x08\0\0', 'latin1')),
      pngChunk('prVt', Buffer.alloc(16)),
    ];
    const input = pngWith(png, extra, 'beforeIdat', false);
    const clean = requireFormat(input).decoderInput(input);
    expect(
      pngChunks(clean)
        .chunks.map((c) => c.type)
        .filter((t) => t !== 'IDAT' && t !== 'pHYs'),
    ).toEqual(['IHDR', 'IEND']);
    expect(await pixels(clean)).toEqual(await pixels(input));
    const meta = await sharp(clean).metadata();
    expect(meta.xmp).toBeUndefined();
    expect(meta.comments ?? []).toEqual([]);
  });

  it('PNG: a colour profile within its bound stays; a compressed profile bomb is left out', async () => {
    const withIcc = await sharp(png).withIccProfile('p3').png().toBuffer();
    const icc = pngChunks(withIcc).chunks.find((c) => c.type === 'iCCP')!;
    expect(icc).toBeDefined();
    expect(pngChunks(requireFormat(withIcc).decoderInput(withIcc)).chunks.some((c) => c.type === 'iCCP')).toBe(true);
    const bombIcc = pngChunk('iCCP', Buffer.concat([Buffer.from('bomb\0\0', 'latin1'), deflateSync(Buffer.alloc(64 * MiB))]));
    const hostile = pngWith(png, [bombIcc], 'afterIhdr', false);
    expect(pngChunks(requireFormat(hostile).decoderInput(hostile)).chunks.some((c) => c.type === 'iCCP')).toBe(false);
  });

  it('JPEG: comments, EXIF, XMP, IPTC and private APPn are left out; ICC and Adobe stay; the pixels are the same', async () => {
    const withIcc = await sharp(jpg).withIccProfile('p3').jpeg().toBuffer();
    const extra = [
      jpegSegment(0xfe, Buffer.from('comment')),
      ...Array(1000).fill(jpegSegment(0xef, Buffer.alloc(100))),
      app1Xmp(utf8(packet())),
      jpegSegment(0xed, Buffer.from('Photoshop 3.0\0', 'latin1')),
      jpegSegment(0xee, Buffer.from('Adobe\0\x64\0\0\0\0\x01', 'latin1')),
    ];
    const input = jpegWith(withIcc, extra);
    const clean = requireFormat(input).decoderInput(input);
    const markers = jpegLayout(clean).segments.map((s) => s.marker);
    expect(markers.filter((m) => m === 0xfe || m === 0xe1 || m === 0xed || m === 0xef)).toEqual([]);
    expect(markers).toContain(0xe2);
    expect(markers).toContain(0xee);
    expect(Buffer.from(clean.subarray(clean.length - 1000)).equals(input.subarray(input.length - 1000))).toBe(true);
    expect(await pixels(clean)).toEqual(await pixels(input));
  });

  it('a file with nothing to leave out is handed over as it is (no copy)', async () => {
    const plain = await sharp(png).png().toBuffer();
    expect(FORMAT_REGISTRY.get('png')!.decoderInput(plain)).toBe(plain);
    const webp = await fx.bytes('base.webp');
    expect(FORMAT_REGISTRY.get('webp')!.decoderInput(webp)).toBe(webp);
  });

  it('the detector finds the mark in a PNG carrying compressed chunks only a decoder would inflate', async () => {
    const secret = new Uint8Array(32).fill(7);
    const base = await rawImage(768, 512, 3, 3).png().toBuffer();
    const marked = Buffer.from(await embedFingerprint(base, secret, { maxPixels: 1e8 }));
    const hostile = pngWith(marked, Array(2).fill(compressedXmpChunk(MAX_INFLATED_XMP_BYTES + 1)), 'beforeIdat', false);
    const clean = await detectFingerprint(marked, secret, { maxPixels: 1e8 });
    const found = await detectFingerprint(hostile, secret, { maxPixels: 1e8 });
    expect(clean.present).toBe(true);
    expect(found.present).toBe(true);
    expect(found.blocks).toBe(clean.blocks);
  });

  it('the embed path bounds compressed text under any keyword before the decoder reads the whole file', async () => {
    const { checkCompressedText } = await import('../src/formats/png.js');
    const { runMark } = await import('../src/pipeline/mark.js');
    const comment = (n: number): Buffer =>
      pngChunk('iTXt', Buffer.concat([Buffer.from('Comment\0\x01\x00\0\0', 'latin1'), deflateSync(Buffer.alloc(n, 0x41), { level: 9 })]));
    const hostile = pngWith(png, [comment(MAX_INFLATED_XMP_BYTES / 2 + 1), comment(MAX_INFLATED_XMP_BYTES / 2 + 1)], 'beforeIdat', false);
    expect(codeOf(() => checkCompressedText(hostile))).toBe('limit_exceeded');
    expect(codeOf(() => checkCompressedText(pngWith(png, [comment(MiB)], 'beforeIdat', false)))).toBeUndefined();
    const ctx = { maxPixels: 1e8, fingerprintSecret: async () => new Uint8Array(32).fill(7), signingKey: async () => Promise.reject(new Error('unused')) };
    await expect(runMark(hostile, { fingerprint: true, provenance: false }, ctx as never)).rejects.toMatchObject({ code: 'limit_exceeded' });
  });
});
