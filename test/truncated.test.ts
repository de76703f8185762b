// Images cut off in their pixel data are marked (the container up to the image data is intact and the
// metadata edit is exact; docs/marking.md), and protect and verify say so with the shared warning
// `truncated_image_data`. Checked on the real cut-off files of ../shared/corpus (its README lists them)
// and on files cut here at every kind of place, against their whole originals.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { OptmarkError } from '../src/errors.js';
import { truncationWarnings } from '../src/formats/complete.js';
import { parseImage } from '../src/formats/index.js';
import { protect, read } from '../src/marking/engine.js';
import { jpegLayout } from './helpers/containers.js';
import { texture } from './helpers/fixtures.js';

const imageDataWarnings = (bytes: Uint8Array): ReturnType<typeof truncationWarnings> => truncationWarnings(parseImage(bytes));

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const corpus = (name: string): Buffer => readFileSync(join(CORPUS, name));

const codes = (w: { code: string }[]): string[] => w.map((x) => x.code);

describe.skipIf(!existsSync(join(CORPUS, 'README.md')))('the cut-off files of ../shared/corpus', () => {
  it.each(['pillow_truncated_jpeg.jpg', 'sharp_truncated.jpg', 'pillow_truncated_image.png', 'pillow_broken_data_stream.png'])(
    '%s: protect marks it and warns; the marked file reads opted out with the same warning',
    (name) => {
      const input = corpus(name);
      const p = protect(input);
      expect(codes(p.warnings)).toEqual(['truncated_image_data']);
      expect(p.warnings[0]!.message).toMatch(/cut off/);
      const r = read(p.bytes);
      expect(r.optedOut).toBe(true);
      expect(codes(r.warnings)).toEqual(['truncated_image_data']);
      expect(codes(read(input).warnings)).toEqual(['truncated_image_data']);
    },
  );

  it.each(['sharp_corrupt-header.jpg', 'pillow_broken.png', 'danbooru_truncated.webp'])('%s: broken before the image data, still 422 damaged_image', (name) => {
    expect(() => protect(corpus(name))).toThrow(OptmarkError);
    try {
      protect(corpus(name));
    } catch (e) {
      expect((e as OptmarkError).code).toBe('damaged_image');
    }
  });

  it.each(['exiftool_Writer.jpg', 'c2pa_CA.jpg', 'pillow_icc_profile_big.jpg'])('%s (whole): no warning', (name) => {
    expect(protect(corpus(name)).warnings).toEqual([]);
    expect(read(corpus(name)).warnings).toEqual([]);
  });
});

describe('files cut here', async () => {
  const raw = await sharp(texture(64, 48, 3, 7), { raw: { width: 64, height: 48, channels: 3 } });
  const jpeg = await raw.clone().jpeg({ quality: 90 }).toBuffer();
  const progressive = await raw.clone().jpeg({ quality: 90, progressive: true }).toBuffer();
  const png = await raw.clone().png().toBuffer();
  const webp = await raw.clone().webp().toBuffer();

  it('JPEG: whole (baseline and progressive) no warning; cut anywhere in the scans, a warning; ff d9 only as the end marker counts', () => {
    for (const whole of [jpeg, progressive]) {
      expect(imageDataWarnings(whole)).toEqual([]);
      const { scan } = jpegLayout(whole);
      for (const at of [scan + 20, Math.floor((scan + whole.length) / 2), whole.length - 1]) {
        const cut = whole.subarray(0, at);
        expect(codes(protect(cut).warnings), `cut at ${at} of ${whole.length}`).toEqual(['truncated_image_data']);
      }
    }
    // Bytes after the end marker (a trailer) do not make a whole file look cut.
    expect(imageDataWarnings(Buffer.concat([jpeg, Buffer.from('trailer')]))).toEqual([]);
  });

  it('PNG: whole no warning; cut inside IDAT or before IEND, a warning', () => {
    expect(imageDataWarnings(png)).toEqual([]);
    const idat = png.indexOf('IDAT') - 4;
    for (const at of [idat + 10, png.length - 12, png.length - 1])
      expect(codes(protect(png.subarray(0, at)).warnings), `cut at ${at}`).toEqual(['truncated_image_data']);
  });

  it('WebP: cut short of its RIFF size it is refused (damaged_image), so no answer needs the warning', () => {
    expect(imageDataWarnings(webp)).toEqual([]);
    expect(() => protect(webp.subarray(0, webp.length - 5))).toThrow(/shorter than its RIFF size/);
  });
});
