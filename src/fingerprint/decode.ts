/** Shared sharp plumbing for the fingerprint: header probe and the shrink-on-load decode to the base resolution. */
import sharp from 'sharp';
import { jpegAddon } from '../native/index.js';
import { MAX_WORK_LONG_SIDE, MIN_SIDE, WORK_SHORT_SIDE } from './params.js';

export interface Probe {
  width: number;
  height: number;
  format: string;
  pages: number;
}

/** Header-only probe; undefined when sharp cannot read the header. */
export async function probe(bytes: Uint8Array): Promise<Probe | undefined> {
  try {
    const m = await sharp(bytes, { failOn: 'none', limitInputPixels: false }).metadata();
    if (!m.width || !m.height || !m.format) return undefined;
    return { width: m.width, height: m.height, format: m.format, pages: m.pages ?? 1 };
  } catch {
    return undefined;
  }
}

/** Work-resolution size for an image: short side WORK_SHORT_SIDE, aspect kept. */
export function workSize(width: number, height: number): { width: number; height: number } {
  if (width <= height) return { width: WORK_SHORT_SIDE, height: Math.max(WORK_SHORT_SIDE, Math.round((height * WORK_SHORT_SIDE) / width)) };
  return { width: Math.max(WORK_SHORT_SIDE, Math.round((width * WORK_SHORT_SIDE) / height)), height: WORK_SHORT_SIDE };
}

/** Whether an image of this size can carry / be examined for the mark. */
export function examinable(width: number, height: number): boolean {
  const ws = workSize(width, height);
  return Math.min(width, height) >= MIN_SIDE && Math.max(ws.width, ws.height) <= MAX_WORK_LONG_SIDE;
}

/**
 * The detector's default time limit: a decode that takes longer is abandoned (verify then reports the
 * fingerprint not examined, with the warning fingerprint_timeout), so that verify's task deadline (30 s)
 * is never what stops one. Measured here: a noisy 100 MP
 * PNG of 372 MB, far over any upload limit, decodes to the work resolution in 8.6 s.
 */
export const DECODE_TIMEOUT_SECONDS = 10;

/** True for sharp's error when a decode ran past its `timeout` (libvips: "timeout: N% complete"). */
export function isDecodeTimeout(err: unknown): boolean {
  return err instanceof Error && /^timeout: /.test(err.message);
}

export interface BasePixels {
  pixels: Uint8Array;
  width: number;
  height: number;
  channels: number;
}

/**
 * Decodes straight to the work resolution. libvips shrinks JPEG in the DCT domain (and WebP at load),
 * so a 12 MP JPEG costs about half of a 1024-wide decode; only the first page/frame is read. A JPEG the
 * native scaled decode takes (`decodeJpegScaled`) is only resized by sharp: bitwise the same pixels.
 */
export async function decodeBase(bytes: Uint8Array, width: number, height: number, timeoutSeconds = DECODE_TIMEOUT_SECONDS): Promise<BasePixels> {
  const scaled = decodeJpegScaled(bytes, width, height);
  if (!scaled) return decodeWithSharp(bytes, width, height, timeoutSeconds);
  const ws = workSize(width, height);
  return resizeRaw(scaled, ws.width, ws.height, timeoutSeconds);
}

/** decodeBase with sharp alone (what it does for any input the native scaled decode declines). */
export async function decodeWithSharp(bytes: Uint8Array, width: number, height: number, timeoutSeconds = DECODE_TIMEOUT_SECONDS): Promise<BasePixels> {
  const ws = workSize(width, height);
  const { data, info } = await sharp(bytes, { failOn: 'none', limitInputPixels: false })
    .timeout({ seconds: timeoutSeconds })
    .resize(ws.width, ws.height, { fit: 'fill', fastShrinkOnLoad: true })
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { pixels: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height, channels: info.channels };
}

/**
 * The JPEG shrink-on-load sharp asks libvips for when `decodeBase` resizes a `width` x `height` JPEG (its
 * pipeline.cc, `fit: 'fill'` with fastShrinkOnLoad): the largest of 8, 4 and 2 that the smaller of the two
 * axes' factors reaches, halved when that factor truncates to it exactly (libjpeg rounding); 1 for none.
 */
export function jpegShrinkOnLoad(width: number, height: number): 1 | 2 | 4 | 8 {
  const ws = workSize(width, height);
  const shrink = Math.min(width / ws.width, height / ws.height);
  let s: 1 | 2 | 4 | 8 = shrink >= 8 ? 8 : shrink >= 4 ? 4 : shrink >= 2 ? 2 : 1;
  if (s > 1 && Math.trunc(shrink) === s) s = (s / 2) as 1 | 2 | 4;
  return s;
}

/**
 * A progressive JPEG with more scans than this is left to sharp (whose decode has a time limit): each scan
 * is a pass over the whole picture, and the native decode runs in the worker's thread without one. Encoders
 * write about 10 (libjpeg's and mozjpeg's progressive scripts: 10 and 7 here).
 */
export const NATIVE_JPEG_MAX_SCANS = 64;

/**
 * libvips's shrink-on-load of a JPEG, done by the native addon on the system's libjpeg-turbo in this thread:
 * the same pixels as sharp's jpegload at that shrink (the 1x1, 2x2 and 4x4 scaled inverse DCTs and the colour
 * conversion are exact integer arithmetic), without sharp's second header read, libvips's pipeline and its
 * threads' hand-overs (docs/fingerprint.md, "Speed"). Undefined when sharp should decode instead: not a
 * JPEG, no shrink-on-load, the addon not built, or declined by it (an ICC profile, which sharp converts
 * through; CMYK; 12-bit; damaged data; more than NATIVE_JPEG_MAX_SCANS scans), or a frame size other
 * than the one given.
 */
export function decodeJpegScaled(bytes: Uint8Array, width: number, height: number): BasePixels | undefined {
  if (bytes.length < 2 || bytes[0] !== 0xff || bytes[1] !== 0xd8) return undefined;
  const denom = jpegShrinkOnLoad(width, height);
  const native = denom > 1 ? jpegAddon() : undefined;
  if (!native) return undefined;
  const into = takeScratch(Math.floor(width / denom) * Math.floor(height / denom) * 3);
  const r = native.decodeScaled(bytes, denom as 2 | 4 | 8, NATIVE_JPEG_MAX_SCANS, into);
  if (typeof r === 'string' || r.imageWidth !== width || r.imageHeight !== height) {
    giveScratch(into);
    return undefined;
  }
  return { pixels: into.subarray(0, r.width * r.height * r.channels), width: r.width, height: r.height, channels: r.channels };
}

/**
 * One buffer per thread for the native decode's output, taken while a decode's resize is under way (a
 * second decode meanwhile gets a fresh one; pixels handed to a caller are never given back): a fresh 0.5 MB
 * per 12 MP picture cost 0.3 ms of page faults and zeroing (2.7% of the decode). Kept up to 8 MiB (a 100 MP
 * picture at 1/8 needs 4.7 MB).
 */
let scratch: Uint8Array | undefined;
const SCRATCH_KEPT_BYTES = 8 << 20;

function takeScratch(n: number): Uint8Array {
  const s = scratch && scratch.length >= n ? scratch : new Uint8Array(n);
  if (s === scratch) scratch = undefined;
  return s;
}

function giveScratch(s: Uint8Array): void {
  if (s.buffer.byteLength <= SCRATCH_KEPT_BYTES && (!scratch || scratch.length < s.buffer.byteLength)) scratch = new Uint8Array(s.buffer);
}

/** sharp's resize of decodeBase, from pixels already shrunk on load: the same kernel on the same input. */
async function resizeRaw(base: BasePixels, width: number, height: number, timeoutSeconds: number): Promise<BasePixels> {
  // The very size already (and three channels): the pixels are the answer, and their buffer the caller's.
  if (base.width === width && base.height === height && base.channels === 3) return base;
  try {
    const { data, info } = await sharp(base.pixels, {
      raw: { width: base.width, height: base.height, channels: base.channels as 1 | 3 },
      limitInputPixels: false,
    })
      .timeout({ seconds: timeoutSeconds })
      .resize(width, height, { fit: 'fill' })
      .toColourspace('srgb')
      .raw()
      .toBuffer({ resolveWithObject: true });
    return { pixels: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height, channels: info.channels };
  } finally {
    giveScratch(base.pixels);
  }
}
