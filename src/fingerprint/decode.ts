/** Shared sharp plumbing for the fingerprint: header probe and the shrink-on-load decode to the base resolution. */
import sharp from 'sharp';
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
 * A decode that takes longer is abandoned (verify then answers 422 processing_timeout: the detector did
 * not look), so that verify's task deadline (30 s) is never what stops one. Measured here: a noisy 100 MP
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
 * so a 12 MP JPEG costs about half of a 1024-wide decode; only the first page/frame is read.
 */
export async function decodeBase(bytes: Uint8Array, width: number, height: number): Promise<BasePixels> {
  const ws = workSize(width, height);
  const { data, info } = await sharp(bytes, { failOn: 'none', limitInputPixels: false })
    .timeout({ seconds: DECODE_TIMEOUT_SECONDS })
    .resize(ws.width, ws.height, { fit: 'fill', fastShrinkOnLoad: true })
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { pixels: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height, channels: info.channels };
}
