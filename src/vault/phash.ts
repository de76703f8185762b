/**
 * The vault's perceptual hash: PDQ (./pdq.ts) of an image file, and the distance that says "looks like".
 *
 * The file is decoded by sharp (the project's decoder) to 8-bit sRGB, first page or frame, alpha dropped,
 * no EXIF rotation (stripping metadata must not turn the picture), and shrunk to fit 512 x 512 with its
 * aspect kept, as the reference's Python hasher does (`thumbnail((512, 512))`; its C++ tool also resizes
 * to 512 before hashing, because the Jarosz filter at full size costs a pass over every pixel). libvips
 * shrinks a JPEG in the DCT domain while decoding, so a 12 MP photograph is never decoded at full size.
 */
import sharp from 'sharp';
import { DECODE_TIMEOUT_SECONDS } from '../fingerprint/decode.js';
import { type PdqResult, pdqFromPixels } from './pdq.js';

export type { PdqResult } from './pdq.js';

/** The long side the decoder shrinks to before PDQ's own filter (the reference tools' 512). */
export const PDQ_DECODE_SIDE = 512;

/**
 * Two hashes at most this many bits apart (of 256) are the same picture: "looks like your original".
 * Chosen from bench/recognition.bench.ts (docs/vault.md, "Recognition"): different pictures were never
 * closer than 102 bits (16,995 pairs; mean 127.8, sd 8.0), so 48 keeps twice its own distance to the
 * nearest different picture and 10 standard deviations to their mean, and takes in the copies the vault
 * is for (re-encoded, resized, metadata stripped, marked, cropped by up to 5% of the area: 97.6% of
 * them), where Meta's large-collection starting point of 31 took 89.7% (mild crops 57%).
 */
export const PDQ_MATCH_DISTANCE = 48;

/**
 * Below this quality (Meta: discard 49 or less) a hash says little about the picture (flat, featureless
 * images: their bits are noise around the median), so such an original is kept but never matched.
 */
export const PDQ_MIN_QUALITY = 50;

export interface DecodedForPdq {
  pixels: Uint8Array;
  width: number;
  height: number;
}

/** The pixels PDQ is computed on; undefined when sharp cannot decode the bytes. */
export async function decodeForPdq(bytes: Uint8Array, timeoutSeconds = DECODE_TIMEOUT_SECONDS): Promise<DecodedForPdq | undefined> {
  try {
    const { data, info } = await sharp(bytes, { failOn: 'none', limitInputPixels: false })
      .timeout({ seconds: timeoutSeconds })
      .resize(PDQ_DECODE_SIDE, PDQ_DECODE_SIDE, { fit: 'inside', withoutEnlargement: true })
      .removeAlpha()
      .toColourspace('srgb')
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) return undefined;
    return { pixels: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
  } catch {
    return undefined;
  }
}

/** PDQ of an image file; null when it is no image sharp can decode. */
export async function perceptualHash(bytes: Uint8Array): Promise<PdqResult | null> {
  const d = await decodeForPdq(bytes);
  if (!d) return null;
  return pdqFromPixels(d.pixels, d.width, d.height, 3);
}

const HEX64 = /^[0-9a-f]{64}$/;

/** Whether `s` is a PDQ hash as this module writes it (64 lower-case hex digits). */
export function isPdqHash(s: string): boolean {
  return HEX64.test(s);
}

/** Hamming distance of two PDQ hashes (0..256). */
export function distance(a: string, b: string): number {
  if (!isPdqHash(a) || !isPdqHash(b)) throw new RangeError('distance: not a PDQ hash (64 hex digits)');
  let d = 0;
  for (let i = 0; i < 64; i += 8) {
    let x = (Number.parseInt(a.slice(i, i + 8), 16) ^ Number.parseInt(b.slice(i, i + 8), 16)) >>> 0;
    x -= (x >>> 1) & 0x55555555;
    x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
    d += (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
  }
  return d;
}
