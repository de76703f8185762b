/**
 * Fixtures of the fingerprint tests: a deterministic photo-like image made on the spot (nothing binary in
 * the repository), the PSNR the embedding is held to, and the check that an attack keeps the mark.
 */
import sharp from 'sharp';
import { expect } from 'vitest';
import type { AttackFn } from '../../bench/lib/fingerprint-attacks.js';
import { type FingerprintDetail, detectFingerprint } from '../../src/fingerprint/index.js';

/** Deterministic photo-like fixture: smooth gradients plus multi-scale value noise, RGB, as PNG. */
export async function texturedImage(width: number, height: number, seed: number): Promise<Buffer> {
  let a = seed >>> 0;
  const rnd = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const octaves = [4, 16, 64].map((g) => ({ g, v: Float32Array.from({ length: (g + 2) * (g + 2) }, rnd) }));
  const px = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let n = 0;
      let amp = 1;
      for (const { g, v } of octaves) {
        const fx = (x / width) * g;
        const fy = (y / height) * g;
        const i = Math.floor(fx);
        const j = Math.floor(fy);
        const u = fx - i;
        const w = fy - j;
        const at = (ii: number, jj: number): number => v[jj * (g + 2) + ii]!;
        n += amp * ((1 - w) * ((1 - u) * at(i, j) + u * at(i + 1, j)) + w * ((1 - u) * at(i, j + 1) + u * at(i + 1, j + 1)));
        amp *= 0.6;
      }
      const base = 40 + 120 * (x / width) + 60 * n;
      const p = (y * width + x) * 3;
      px[p] = Math.max(0, Math.min(255, base + 20 * Math.sin(y / 37)));
      px[p + 1] = Math.max(0, Math.min(255, base));
      px[p + 2] = Math.max(0, Math.min(255, base - 25 * (y / height)));
    }
  }
  return sharp(px, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer();
}

/** PSNR (dB) of b against a over RGB (alpha dropped). */
export async function psnr(a: Uint8Array, b: Uint8Array): Promise<number> {
  const [x, y] = await Promise.all([a, b].map((v) => sharp(v).removeAlpha().raw().toBuffer()));
  let se = 0;
  for (let i = 0; i < x!.length; i++) se += (x![i]! - y![i]!) ** 2;
  return 10 * Math.log10((255 * 255) / (se / x!.length));
}

/**
 * The lattice is found after an attack: the attacked marked image is present as version 2, and the same
 * attack on the unmarked original stays absent (examined: 256 cells).
 */
export async function expectFoundAfter(
  fn: AttackFn,
  marked: Buffer,
  orig: Buffer,
  secret: Uint8Array,
  maxPixels: number,
  rng: () => number = () => 0.5,
): Promise<FingerprintDetail> {
  const hit = await detectFingerprint(await fn(marked, rng), secret, { maxPixels });
  expect(hit.present, `z=${hit.z} sync=${hit.syncZ} lattice=${hit.lattice.join(',')}`).toBe(true);
  expect(hit.scheme).toBe(2);
  const miss = await detectFingerprint(await fn(orig, rng), secret, { maxPixels });
  expect(miss.present).toBe(false);
  expect(miss.blocks).toBe(256);
  return hit;
}
