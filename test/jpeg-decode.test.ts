/**
 * The fingerprint's native scaled JPEG decode (native/src/jpeg.cc, `decodeJpegScaled`): bitwise the pixels of
 * sharp's shrink-on-load decode for every JPEG it takes, and sharp's decode for every one it declines.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { type BasePixels, decodeBase, decodeJpegScaled, decodeWithSharp, jpegShrinkOnLoad, workSize } from '../src/fingerprint/decode.js';
import { jpegAddon } from '../src/native/index.js';
import { texturedImage } from './helpers/fingerprint.js';

const KODIM = fileURLToPath(new URL('../../shared/natural/kodim05.png', import.meta.url));
const native = jpegAddon();

async function source(): Promise<Buffer> {
  // A photograph when ../shared is there (edges, texture: many AC coefficients), else a synthetic texture.
  return existsSync(KODIM) ? sharp(KODIM).png().toBuffer() : texturedImage(768, 512, 7);
}

function same(a: BasePixels, b: BasePixels): boolean {
  return a.width === b.width && a.height === b.height && a.channels === b.channels && Buffer.compare(Buffer.from(a.pixels), Buffer.from(b.pixels)) === 0;
}

/** decodeBase against sharp alone, and whether the native decode took the file (or why it declined). */
async function compare(jpeg: Buffer): Promise<{ same: boolean; taken: string }> {
  const m = await sharp(jpeg).metadata();
  const denom = jpegShrinkOnLoad(m.width!, m.height!);
  const probe = denom > 1 && native ? native.decodeScaled(jpeg, denom as 2 | 4 | 8, 64, new Uint8Array(m.width! * m.height! * 3)) : 'no shrink-on-load';
  const [ours, theirs] = await Promise.all([decodeBase(jpeg, m.width!, m.height!), decodeWithSharp(jpeg, m.width!, m.height!)]);
  return { same: same(ours, theirs), taken: typeof probe === 'string' ? probe : 'native' };
}

describe('the shrink-on-load sharp picks (fit fill, fastShrinkOnLoad)', () => {
  it('is the largest of 8, 4, 2 under the smaller factor, halved when the factor truncates to it', () => {
    expect(jpegShrinkOnLoad(4000, 3000)).toBe(8); // 11.7
    expect(jpegShrinkOnLoad(2048, 1536)).toBe(4); // exactly 6: 4
    expect(jpegShrinkOnLoad(2730, 2048)).toBe(4); // 8.0: halved
    expect(jpegShrinkOnLoad(3001, 2001)).toBe(4); // 7.8
    expect(jpegShrinkOnLoad(1500, 1000)).toBe(2); // 3.9
    expect(jpegShrinkOnLoad(1024, 768)).toBe(2); // exactly 3: 2 (truncates to 3, not 2)
    expect(jpegShrinkOnLoad(1100, 700)).toBe(1); // 2.7, truncates to 2
    expect(jpegShrinkOnLoad(768, 512)).toBe(1);
    expect(workSize(3001, 2001)).toEqual({ width: 384, height: 256 });
  });
});

describe.skipIf(!native)('native scaled JPEG decode', () => {
  it('gives bitwise the pixels of sharp for the JPEGs it takes: subsamplings, progressive, greyscale, odd sizes, every shrink', async () => {
    const src = await source();
    const cases: [string, number, number, sharp.JpegOptions, boolean?][] = [
      ['4:2:0 q92, shrink 8', 4000, 3000, { quality: 92 }],
      ['4:4:4 q95, shrink 8', 2600, 2400, { quality: 95, chromaSubsampling: '4:4:4' }],
      ['progressive, shrink 8', 2400, 2400, { quality: 85, progressive: true }],
      ['mozjpeg (progressive, trellis), shrink 8', 2700, 2400, { quality: 80, mozjpeg: true }],
      ['odd sides, cropped by 1/4 (3001 x 2001)', 3001, 2001, { quality: 85 }],
      ['odd sides, cropped by 3/4 (3003 x 2003)', 3003, 2003, { quality: 85 }],
      ['portrait, shrink 8', 2999, 4001, { quality: 85 }],
      ['factor exactly 8: shrink 4', 2730, 2048, { quality: 90 }],
      ['shrink 2', 1500, 1000, { quality: 85 }],
      ['one component (greyscale), shrink 8', 2400, 2500, { quality: 85 }, true],
      ['one component, progressive, shrink 4', 2100, 2100, { quality: 85, progressive: true }, true],
    ];
    for (const [name, w, h, options, grey] of cases) {
      let img = sharp(src).resize(w, h, { fit: 'fill' });
      if (grey) img = img.toColourspace('b-w');
      const r = await compare(await img.jpeg(options).toBuffer());
      expect(`shrink ${jpegShrinkOnLoad(w, h)}`, name).toBe(name.match(/shrink \d/)?.[0] ?? `shrink ${jpegShrinkOnLoad(w, h)}`);
      expect(r, name).toEqual({ same: true, taken: 'native' });
    }
  });

  it('declines what libvips treats differently or libjpeg only warns about; decodeBase then gives sharp’s pixels', async () => {
    const src = await source();
    const big = sharp(src).resize(2048, 1365, { fit: 'fill' }); // shrink 4
    const baseline = await big.clone().jpeg({ quality: 90 }).toBuffer();
    const cases: [string, Buffer, string][] = [
      ['ICC profile (sharp converts through it)', await big.clone().withIccProfile('p3').jpeg({ quality: 90 }).toBuffer(), 'ICC profile'],
      ['CMYK', await big.clone().toColourspace('cmyk').jpeg({ quality: 90 }).toBuffer(), 'not YCbCr or greyscale'],
      ['truncated (premature end of data)', baseline.subarray(0, Math.floor(baseline.length * 0.6)), 'warning'],
    ];
    for (const [name, jpeg, why] of cases) expect(await compare(jpeg), name).toEqual({ same: true, taken: why });
  });

  it('stops a progressive JPEG past maxScans (sharp, with its time limit, decodes it then)', async () => {
    const src = await source();
    const progressive = await sharp(src).resize(4000, 3000, { fit: 'fill' }).jpeg({ quality: 85, progressive: true }).toBuffer();
    const into = new Uint8Array(500 * 375 * 3);
    expect(native!.decodeScaled(progressive, 8, 5, into)).toBe('too many scans');
    expect(native!.decodeScaled(progressive, 8, 64, into)).toMatchObject({ width: 500, height: 375, channels: 3, imageWidth: 4000, imageHeight: 3000 });
    expect(native!.decodeScaled(progressive, 8, 64, new Uint8Array(100))).toBe('output buffer too small');
    expect(native!.decodeScaled(Buffer.from('not a jpeg'), 8, 64, into)).toBe('libjpeg error');
    expect(() => native!.decodeScaled(progressive, 3 as 2, 64, into)).toThrow(RangeError);
  });

  it('leaves to sharp a JPEG whose frame size is not the one given, and one without shrink-on-load', async () => {
    const jpeg = await sharp(await source())
      .resize(4000, 3000, { fit: 'fill' })
      .jpeg({ quality: 85 })
      .toBuffer();
    expect(decodeJpegScaled(jpeg, 4000, 3000)).toMatchObject({ width: 500, height: 375, channels: 3 });
    expect(decodeJpegScaled(jpeg, 4000, 2999)).toBeUndefined();
    const small = await sharp(jpeg).resize(768, 512).jpeg().toBuffer();
    expect(decodeJpegScaled(small, 768, 512)).toBeUndefined();
    expect(decodeJpegScaled(await sharp(jpeg).png().toBuffer(), 4000, 3000)).toBeUndefined();
  });

  it('decodes concurrently in one thread: each call its own pixels (the reused output buffer is taken, not shared)', async () => {
    const src = await source();
    const a = await sharp(src).resize(4000, 3000, { fit: 'fill' }).jpeg({ quality: 90 }).toBuffer();
    const b = await sharp(src).resize(4000, 3000, { fit: 'fill' }).flop().jpeg({ quality: 90 }).toBuffer();
    const [ra, rb, rc] = await Promise.all([decodeBase(a, 4000, 3000), decodeBase(b, 4000, 3000), decodeBase(a, 4000, 3000)]);
    const [sa, sb] = await Promise.all([decodeWithSharp(a, 4000, 3000), decodeWithSharp(b, 4000, 3000)]);
    expect([same(ra, sa), same(rb, sb), same(rc, sa), same(ra, sb)]).toEqual([true, true, true, false]);
  });
});
