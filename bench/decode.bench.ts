/**
 * Decode paths on 12 MP JPEG, PNG and WebP: sharp full decode (the baseline), sharp shrink-on-load to
 * 1024 wide (what the verify floor and detector use), and @napi-rs/image full decode and decode +
 * resize. sharp runs with one libvips thread and no cache, as in the workers; @napi-rs/image runs its
 * synchronous calls on this thread, so both are one core's worth.
 *
 *   npm run build && node dist/bench/decode.bench.js        (BENCH_QUICK=1 for a smoke run)
 */
import { Transformer } from '@napi-rs/image';
import sharp from 'sharp';
import { compare } from './lib/report.js';
import { generatedCorpus } from './load/corpus.js';

sharp.concurrency(1);
sharp.cache(false);

const corpus = await generatedCorpus(['jpeg-12mp', 'png-12mp', 'webp-12mp']);
for (const img of corpus) {
  const buf = img.bytes;
  await compare(
    `decode ${img.name} (${img.width}x${img.height}, ${(buf.length / 1e6).toFixed(2)} MB)`,
    { name: 'sharp full decode, raw', fn: () => sharp(buf).raw().toBuffer() },
    [
      { name: 'sharp shrink-on-load, 1024 wide, raw', fn: () => sharp(buf).resize({ width: 1024 }).raw().toBuffer() },
      { name: '@napi-rs/image full decode, raw', fn: () => new Transformer(buf).rawPixelsSync() },
      { name: '@napi-rs/image decode + fastResize 1024 wide', fn: () => new Transformer(buf).fastResize({ width: 1024 }).rawPixelsSync() },
    ],
    {
      time: 2000,
      note: {
        jpeg: 'JPEG: libjpeg shrink-on-load decodes at 1/2, 1/4 or 1/8 scale, so the 1024-wide decode skips most of the IDCT work.',
        webp: 'WebP: libwebp can scale while decoding, which sharp uses; @napi-rs/image decodes in full first.',
        png: 'PNG: no shrink-on-load in the codec; the full image is inflated and unfiltered either way.',
      }[img.format],
    },
  );
}
