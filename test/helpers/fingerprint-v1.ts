/**
 * Version-1 marks for the tests of their detection. optmark writes version 2 only; this is version 1's
 * embedder as it shipped (its strength, mask and PSNR rule frozen here), so that a test holds marks of
 * the kind found in the wild: the picture's luma residual alpha * mask * (sqrt(1/2) sync + sqrt(1/2)
 * count), scaled so that its mean square on the work grid keeps PSNR >= 40.5 dB, upsampled bilinearly
 * and added to R, G and B. Output: PNG.
 */
import sharp from 'sharp';
import { luma } from '../../src/fingerprint/common/filters.js';
import { workSize } from '../../src/fingerprint/decode.js';
import { areaDownsample, landUpsampled, workResidual } from '../../src/fingerprint/embed.js';
import { keyTileFor } from '../../src/fingerprint/v1/key.js';

const ALPHA = 2.1;
const MASK_DIV = 6;
const MIN_PSNR_DB = 40.5;

/** Marks `bytes` with version 1's mark for `secret` (pixels as optmark's version-1 embedder wrote them). */
export async function embedVersion1(bytes: Uint8Array, secret: Uint8Array): Promise<Buffer> {
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  const { width: w, height: h, channels: ch } = info;
  const px = new Uint8Array(data.buffer, data.byteOffset, data.length);
  const ws = workSize(w, h);
  const key = keyTileFor(secret);
  const tile = key.sync.map((s, i) => Math.SQRT1_2 * s + Math.SQRT1_2 * key.count[i]!);
  const r = workResidual(areaDownsample(luma(px, w, h, ch), w, h, ws.width, ws.height), ws.width, ws.height, tile, ALPHA, MASK_DIV);
  // Version 1's PSNR rule: the work grid's mean square plus 1/12 for rounding, before the pixels land.
  let sq = 0;
  for (const v of r) sq += v * v;
  const maxMse = (255 * 255) / 10 ** (MIN_PSNR_DB / 10) - 1 / 12;
  if (sq / r.length > maxMse) {
    const k = Math.sqrt(maxMse / (sq / r.length));
    for (let i = 0; i < r.length; i++) r[i]! *= k;
  }
  landUpsampled(px, w, h, ch, ch >= 3 ? 3 : 1, r, ws.width, ws.height);
  return sharp(px, { raw: { width: w, height: h, channels: ch } })
    .png()
    .toBuffer();
}
