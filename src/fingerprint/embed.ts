/**
 * Layer-path embedding: decode, add the keyed luma residual (built at the work resolution, masked by
 * local contrast, upsampled bilinearly) equally to R, G and B, re-encode in the input's format and
 * keep the input's metadata. Runs in TypeScript: it is off the hot path, and decode/encode dominate.
 */
import sharp, { type OutputInfo, type Sharp } from 'sharp';
import { OptmarkError } from '../errors.js';
import { examinable, probe, workSize } from './decode.js';
import { estimateJpegQuality } from './jpeg-quality.js';
import { webp } from '../formats/webp.js';
import { luma } from './common/filters.js';
import { MASK_MAX, MASK_MIN, TILE } from './params.js';
import { keyTileV2For } from './v2/key.js';
import { V2_ALPHA, V2_MASK_DIV, V2_MIN_PSNR_DB } from './v2/params.js';

/** JPEG re-encode quality bounds: at least this to keep the look, at most this to stay near the input's size. */
const JPEG_QUALITY_MIN = 88;
const JPEG_QUALITY_MAX = 97;
const JPEG_QUALITY_DEFAULT = 92;
const WEBP_LOSSY_QUALITY = 92;

/** Area (box) downsample of a full-resolution plane to the work grid. */
export function areaDownsample(src: Float32Array, w: number, h: number, ow: number, oh: number): Float32Array {
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

/** Texture mask clip(localstd5x5 / div, MASK_MIN, MASK_MAX): stronger mark where texture hides it. */
function textureMask(y: Float32Array, w: number, h: number, div: number): Float32Array {
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
      m[j * w + i] = Math.min(MASK_MAX, Math.max(MASK_MIN, sd / div));
    }
  }
  return m;
}

/** The work-resolution residual for a luma plane, `alpha * mask * tile` (its PSNR is held as it lands: landUpsampled). */
export function workResidual(yWork: Float32Array, w: number, h: number, tile: Float32Array, alpha: number, maskDiv: number): Float32Array {
  const mask = textureMask(yWork, w, h, maskDiv);
  const r = new Float32Array(w * h);
  for (let j = 0; j < h; j++) {
    const trow = (j & (TILE - 1)) * TILE;
    for (let i = 0; i < w; i++) r[j * w + i] = alpha * mask[j * w + i]! * tile[trow + (i & (TILE - 1))]!;
  }
  return r;
}

/** Bilinear resampling of a work-grid residual onto the w x h picture, one row at a time (as it lands). */
class Upsampler {
  private readonly xi: Int32Array;
  private readonly xf: Float32Array;
  readonly row: Float64Array;
  constructor(
    private readonly r: Float32Array,
    private readonly rw: number,
    private readonly rh: number,
    w: number,
    private readonly h: number,
  ) {
    const sx = rw / w;
    this.xi = new Int32Array(w);
    this.xf = new Float32Array(w);
    this.row = new Float64Array(w);
    for (let x = 0; x < w; x++) {
      const b = Math.min(rw - 1, Math.max(0, (x + 0.5) * sx - 0.5));
      const i = Math.min(rw - 2, Math.floor(b));
      this.xi[x] = Math.max(0, i);
      this.xf[x] = rw > 1 ? b - this.xi[x]! : 0;
    }
  }

  /** Fills `row` with picture row y of the resampled residual. */
  at(y: number): Float64Array {
    const { r, rw, rh, xi, xf, row } = this;
    const b = Math.min(rh - 1, Math.max(0, (y + 0.5) * (rh / this.h) - 0.5));
    const j = Math.max(0, Math.min(rh - 2, Math.floor(b)));
    const fy = rh > 1 ? b - j : 0;
    const r0 = j * rw;
    const r1 = Math.min(rh - 1, j + 1) * rw;
    for (let x = 0; x < row.length; x++) {
      const i = xi[x]!;
      const fx = xf[x]!;
      const top = r[r0 + i]! + fx * (r[r0 + i + 1]! - r[r0 + i]!);
      const bot = r[r1 + i]! + fx * (r[r1 + i + 1]! - r[r1 + i]!);
      row[x] = top + fy * (bot - top);
    }
    return row;
  }
}

/**
 * Sum of squared changes of the colour channels when k times the resampled residual is added, rounded and
 * clipped to 8 bits (exactly what landUpsampled writes); with `write`, the pixels are changed in place.
 */
function landPass(px: Uint8Array, w: number, h: number, ch: number, colour: number, up: Upsampler, k: number, write: boolean): number {
  let se = 0;
  for (let y = 0; y < h; y++) {
    const d = up.at(y);
    for (let x = 0; x < w; x++) {
      const p = (y * w + x) * ch;
      const dk = k * d[x]!;
      for (let c = 0; c < colour; c++) {
        const o = px[p + c]!;
        const r = Math.round(o + dk);
        const v = r < 0 ? 0 : r > 255 ? 255 : r;
        se += (v - o) * (v - o);
        if (write) px[p + c] = v;
      }
    }
  }
  return se;
}

/**
 * Adds the bilinearly upsampled residual to the colour channels of interleaved pixels, in place. With
 * floorDb, the residual is first scaled by the largest k <= 1 found for which the 8-bit result keeps
 * PSNR >= floorDb on the colour channels, measured exactly (rounding and clipping included) before any
 * pixel is written: a first k from the mean square of the resampled residual, then corrected by the dB the
 * exact PSNR misses or leaves (two or three passes; the last k that kept the floor is written).
 */
export function landUpsampled(
  px: Uint8Array,
  w: number,
  h: number,
  ch: number,
  colour: number,
  r: Float32Array,
  rw: number,
  rh: number,
  floorDb?: number,
): void {
  const up = new Upsampler(r, rw, rh, w, h);
  let k = 1;
  if (floorDb !== undefined) {
    const n = w * h * colour;
    const maxSe = (n * 255 * 255) / 10 ** (floorDb / 10);
    // The first k from the mean square of the resampled residual on every row (every 3rd above 4 MP: 3 is
    // coprime with the usual 2x and 4x scale factors), plus about 1/12 per sample for rounding.
    const stride = w * h > 4_000_000 ? 3 : 1;
    let sq = 0;
    let rows = 0;
    for (let y = 0; y < h; y += stride, rows++) for (const v of up.at(y)) sq += v * v;
    const room = maxSe / n - 1 / 12;
    k = room <= 0 ? 0 : Math.min(1, Math.sqrt(room / Math.max(1e-12, sq / (rows * w))));
    // Clipping and rounding make the exact PSNR differ from the estimate either way: when it is under the
    // floor, k is lowered by the dB missed (a little more on each further pass; 0 after 8); when it is over,
    // one pass tries k raised by the dB left (kept only if it still keeps the floor).
    let best = 0;
    let raised = false;
    for (let pass = 0; pass < 10; pass++) {
      const se = landPass(px, w, h, ch, colour, up, k, false);
      if (se <= maxSe) {
        best = k;
        if (raised || k === 1 || se >= 0.995 * maxSe) break;
        raised = true;
        k = Math.min(1, k * Math.sqrt(maxSe / Math.max(se, 1e-12)) * 0.999);
      } else {
        if (raised || pass >= 8) break;
        k *= Math.sqrt(maxSe / se) * (1 - 0.002 * (pass + 1));
      }
    }
    k = best;
  }
  landPass(px, w, h, ch, colour, up, k, true);
}

/** Whether a WebP file's image data is lossless (VP8L), from the container's walk; false when it cannot be walked. */
function webpIsLossless(b: Uint8Array): boolean {
  try {
    return webp.parse(b).lossless;
  } catch {
    return false;
  }
}

/**
 * Embeds the mark (version 2: version 1 is detected but no longer written) and re-encodes in the input's
 * format, keeping EXIF/ICC/XMP/IPTC metadata.
 */
export async function embedFingerprint(bytes: Uint8Array, secret: Uint8Array, opts: { maxPixels: number }): Promise<Uint8Array> {
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
  const r = workResidual(yWork, ws.width, ws.height, keyTileV2For(secret).embed, V2_ALPHA, V2_MASK_DIV);
  landUpsampled(px, w, h, ch, colour, r, ws.width, ws.height, V2_MIN_PSNR_DB);

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
