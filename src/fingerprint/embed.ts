/**
 * Layer-path embedding: decode, add the keyed luma residual (built at the work resolution, masked by
 * local contrast, upsampled bilinearly) equally to R, G and B, re-encode in the input's format and
 * keep the input's metadata. Runs in TypeScript: it is off the hot path, and decode/encode dominate.
 */
import sharp, { type OutputInfo, type Sharp } from 'sharp';
import { OptmarkError } from '../errors.js';
import { examinable, probe, workSize } from './decode.js';
import { estimateJpegQuality } from './jpeg-quality.js';
import { keyTileFor } from './pattern.js';
import { keyTileV2For } from './pattern-v2.js';
import { luma } from './reference.js';
import { ALPHA, MASK_DIV, MASK_MAX, MASK_MIN, MIN_PSNR_DB, TILE, V2_ALPHA, V2_MIN_PSNR_DB } from './params.js';

/** JPEG re-encode quality bounds: at least this to keep the look, at most this to stay near the input's size. */
const JPEG_QUALITY_MIN = 88;
const JPEG_QUALITY_MAX = 97;
const JPEG_QUALITY_DEFAULT = 92;
const WEBP_LOSSY_QUALITY = 92;

/** Area (box) downsample of a full-resolution plane to the work grid. */
function areaDownsample(src: Float32Array, w: number, h: number, ow: number, oh: number): Float32Array {
  const out = new Float32Array(ow * oh);
  const sx = w / ow;
  const sy = h / oh;
  for (let j = 0; j < oh; j++) {
    const y0 = Math.floor(j * sy);
    const y1 = Math.max(y0 + 1, Math.floor((j + 1) * sy));
    for (let i = 0; i < ow; i++) {
      const x0 = Math.floor(i * sx);
      const x1 = Math.max(x0 + 1, Math.floor((i + 1) * sx));
      let s = 0;
      for (let y = y0; y < y1 && y < h; y++) for (let x = x0; x < x1 && x < w; x++) s += src[y * w + x]!;
      out[j * ow + i] = s / ((Math.min(y1, h) - y0) * (Math.min(x1, w) - x0));
    }
  }
  return out;
}

/** Texture mask clip(localstd5x5 / MASK_DIV, MASK_MIN, MASK_MAX): stronger mark where texture hides it. */
function textureMask(y: Float32Array, w: number, h: number): Float32Array {
  const m = new Float32Array(w * h);
  for (let j = 0; j < h; j++) {
    for (let i = 0; i < w; i++) {
      let s = 0;
      let s2 = 0;
      let n = 0;
      for (let dy = -2; dy <= 2; dy++) {
        const yy = j + dy;
        if (yy < 0 || yy >= h) continue;
        for (let dx = -2; dx <= 2; dx++) {
          const xx = i + dx;
          if (xx < 0 || xx >= w) continue;
          const v = y[yy * w + xx]!;
          s += v;
          s2 += v * v;
          n++;
        }
      }
      const sd = Math.sqrt(Math.max(0, s2 / n - (s / n) * (s / n)));
      m[j * w + i] = Math.min(MASK_MAX, Math.max(MASK_MIN, sd / MASK_DIV));
    }
  }
  return m;
}

/**
 * The work-resolution residual for a luma plane, scaled down if needed so that the residual as it lands
 * on the full-size image (bilinearly resampled, then rounded) keeps PSNR >= floorDb. The landed mean square
 * is measured on every row of the resampled residual (every 3rd above 4 MP: 3 is coprime with the usual
 * 2x and 4x scale factors, so the rows do not all sit at one interpolation phase); rounding adds about 1/12.
 */
export function workResidual(
  yWork: Float32Array,
  w: number,
  h: number,
  tile: Float32Array,
  alpha = ALPHA,
  floorDb = MIN_PSNR_DB,
  full?: { width: number; height: number },
): Float32Array {
  const mask = textureMask(yWork, w, h);
  const r = new Float32Array(w * h);
  let sq = 0;
  for (let j = 0; j < h; j++) {
    const trow = (j & (TILE - 1)) * TILE;
    for (let i = 0; i < w; i++) {
      const v = alpha * mask[j * w + i]! * tile[trow + (i & (TILE - 1))]!;
      r[j * w + i] = v;
      sq += v * v;
    }
  }
  const maxMse = (255 * 255) / 10 ** (floorDb / 10) - 1 / 12;
  const mse = full ? landedMse(r, w, h, full.width, full.height) : sq / r.length;
  if (mse > maxMse) {
    const k = Math.sqrt(maxMse / mse);
    for (let i = 0; i < r.length; i++) r[i]! *= k;
  }
  return r;
}

/** Mean square of the residual bilinearly resampled to w x h (as addUpsampled does), on a set of rows. */
function landedMse(r: Float32Array, rw: number, rh: number, w: number, h: number): number {
  const sx = rw / w;
  const sy = rh / h;
  let sq = 0;
  let n = 0;
  const stride = w * h > 4_000_000 ? 3 : 1;
  for (let y = 0; y < h; y += stride) {
    const b = Math.min(rh - 1, Math.max(0, (y + 0.5) * sy - 0.5));
    const j = Math.max(0, Math.min(rh - 2, Math.floor(b)));
    const fy = rh > 1 ? b - j : 0;
    const r0 = j * rw;
    const r1 = Math.min(rh - 1, j + 1) * rw;
    for (let x = 0; x < w; x++) {
      const bx = Math.min(rw - 1, Math.max(0, (x + 0.5) * sx - 0.5));
      const i = Math.max(0, Math.min(rw - 2, Math.floor(bx)));
      const fx = rw > 1 ? bx - i : 0;
      const top = r[r0 + i]! + fx * (r[r0 + i + 1]! - r[r0 + i]!);
      const bot = r[r1 + i]! + fx * (r[r1 + i + 1]! - r[r1 + i]!);
      const d = top + fy * (bot - top);
      sq += d * d;
      n++;
    }
  }
  return n ? sq / n : 0;
}

/** Adds the bilinearly upsampled residual to the colour channels of interleaved pixels, in place. */
function addUpsampled(px: Uint8Array, w: number, h: number, ch: number, colour: number, r: Float32Array, rw: number, rh: number): void {
  const sx = rw / w;
  const sy = rh / h;
  const xi = new Int32Array(w);
  const xf = new Float32Array(w);
  for (let x = 0; x < w; x++) {
    const b = Math.min(rw - 1, Math.max(0, (x + 0.5) * sx - 0.5));
    const i = Math.min(rw - 2, Math.floor(b));
    xi[x] = Math.max(0, i);
    xf[x] = rw > 1 ? b - xi[x]! : 0;
  }
  for (let y = 0; y < h; y++) {
    const b = Math.min(rh - 1, Math.max(0, (y + 0.5) * sy - 0.5));
    const j = Math.max(0, Math.min(rh - 2, Math.floor(b)));
    const fy = rh > 1 ? b - j : 0;
    const r0 = j * rw;
    const r1 = Math.min(rh - 1, j + 1) * rw;
    for (let x = 0; x < w; x++) {
      const i = xi[x]!;
      const fx = xf[x]!;
      const top = r[r0 + i]! + fx * (r[r0 + i + 1]! - r[r0 + i]!);
      const bot = r[r1 + i]! + fx * (r[r1 + i + 1]! - r[r1 + i]!);
      const d = top + fy * (bot - top);
      const p = (y * w + x) * ch;
      for (let c = 0; c < colour; c++) {
        const v = Math.round(px[p + c]! + d);
        px[p + c] = v < 0 ? 0 : v > 255 ? 255 : v;
      }
    }
  }
}

/** Whether a WebP file's image data is lossless (VP8L), found by walking its RIFF chunks. */
function webpIsLossless(b: Uint8Array): boolean {
  let pos = 12;
  for (let n = 0; n < 64 && pos + 8 <= b.length; n++) {
    const tag = String.fromCharCode(b[pos]!, b[pos + 1]!, b[pos + 2]!, b[pos + 3]!);
    if (tag === 'VP8L') return true;
    if (tag === 'VP8 ') return false;
    const size = (b[pos + 4]! | (b[pos + 5]! << 8) | (b[pos + 6]! << 16) | (b[pos + 7]! << 24)) >>> 0;
    pos += 8 + size + (size & 1); // always advances
  }
  return false;
}

/**
 * Embeds the mark and re-encodes in the input's format, keeping EXIF/ICC/XMP/IPTC metadata. New marks
 * use version 2; `scheme: 1` writes the first version's mark (kept for tests of its detection).
 */
export async function embedFingerprint(bytes: Uint8Array, secret: Uint8Array, opts: { maxPixels: number; scheme?: 1 | 2 }): Promise<Uint8Array> {
  const head = await probe(bytes);
  if (!head) throw new OptmarkError('damaged_image', 'The image cannot be decoded for the fingerprint.');
  if (!['jpeg', 'png', 'webp'].includes(head.format)) throw new OptmarkError('unsupported_format');
  if (head.width * head.height > opts.maxPixels) {
    throw new OptmarkError('limit_exceeded', `The image has ${head.width * head.height} pixels; the fingerprint limit is ${opts.maxPixels}.`);
  }
  if (head.pages > 1) throw new OptmarkError('unsupported_format', 'Animated images cannot carry the fingerprint.');
  if (!examinable(head.width, head.height)) {
    throw new OptmarkError('limit_exceeded', 'The image is too small (short side under 96 px) or too elongated (over 8:1) for the fingerprint.');
  }

  const meta = await sharp(bytes).metadata();
  // 8-bit throughout: 16-bit PNGs come out 8-bit (docs/fingerprint.md).
  let raw: { data: Buffer; info: OutputInfo };
  try {
    raw = await sharp(bytes, { limitInputPixels: false }).raw().toBuffer({ resolveWithObject: true });
  } catch (err) {
    throw new OptmarkError('damaged_image', 'The image cannot be decoded for the fingerprint.', { cause: err });
  }
  const { width: w, height: h, channels: ch } = raw.info;
  const px = new Uint8Array(raw.data.buffer, raw.data.byteOffset, raw.data.length);
  const colour = ch >= 3 ? 3 : 1;

  const ws = workSize(w, h);
  const yWork = areaDownsample(luma(px, w, h, ch), w, h, ws.width, ws.height);
  const r =
    opts.scheme === 1
      ? workResidual(yWork, ws.width, ws.height, keyTileFor(secret).embed, ALPHA)
      : workResidual(yWork, ws.width, ws.height, keyTileV2For(secret).embed, V2_ALPHA, V2_MIN_PSNR_DB, { width: w, height: h });
  addUpsampled(px, w, h, ch, colour, r, ws.width, ws.height);

  // The original stays the pipeline's input so that libvips carries its metadata; the marked pixels
  // replace it wholesale ('source' blend of an opaque, same-size overlay is exact).
  let out: Sharp = sharp(bytes, { limitInputPixels: false }).composite([
    { input: Buffer.from(px.buffer, px.byteOffset, px.byteLength), raw: { width: w, height: h, channels: ch as 1 | 2 | 3 | 4 }, blend: 'source' },
  ]);
  if (!meta.hasAlpha) out = out.removeAlpha();
  if (meta.exif) out = out.keepExif();
  if (meta.icc) out = out.keepIccProfile();
  if (meta.xmp) out = out.keepXmp();
  if (meta.iptc) out = out.keepMetadata();
  switch (head.format) {
    case 'jpeg': {
      const q = estimateJpegQuality(bytes) ?? JPEG_QUALITY_DEFAULT;
      out = out.jpeg({
        quality: Math.min(JPEG_QUALITY_MAX, Math.max(JPEG_QUALITY_MIN, q)),
        chromaSubsampling: meta.chromaSubsampling === '4:4:4' ? '4:4:4' : '4:2:0',
        progressive: meta.isProgressive === true,
      });
      break;
    }
    case 'png':
      out = out.png({ compressionLevel: 6 });
      break;
    default:
      out = webpIsLossless(bytes) ? out.webp({ lossless: true }) : out.webp({ quality: WEBP_LOSSY_QUALITY });
  }
  const buf = await out.toBuffer();
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.length);
}
