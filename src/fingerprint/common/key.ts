/**
 * Key material both versions derive from the secret the same way: a seeded generator (xoshiro128** from
 * SHA-256, so every platform draws the same numbers), the cyclic band-pass that puts the key in its band,
 * the count part (CELL x CELL cells of independent material: the decision's cells), and the per-thread
 * cache of a version's key (a worker usually sees one secret; building one costs about 10 ms).
 */
import { createHash } from 'node:crypto';
import { BAND_SIGMA_HIGH, BAND_SIGMA_LOW, CELL, TILE } from '../params.js';
import { fft2d } from './fft.js';

/** xoshiro128** seeded from SHA-256; deterministic on every platform. */
export class Rng {
  private s: Uint32Array;
  private spare: number | undefined;
  constructor(seed: Uint8Array) {
    const h = createHash('sha256').update(seed).digest();
    this.s = new Uint32Array([h.readUInt32LE(0), h.readUInt32LE(4), h.readUInt32LE(8), h.readUInt32LE(12) | 1]);
  }
  private nextU32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0;
    const t = s[1]! << 9;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotl(s[3]!, 11);
    return result;
  }
  /** Uniform in (0, 1) with 53 random bits. */
  uniform(): number {
    const hi = this.nextU32() >>> 5;
    const lo = this.nextU32() >>> 6;
    return (hi * 67108864 + lo + 0.5) / 9007199254740992;
  }
  /** Standard normal (Box-Muller). */
  gaussian(): number {
    if (this.spare !== undefined) {
      const v = this.spare;
      this.spare = undefined;
      return v;
    }
    const r = Math.sqrt(-2 * Math.log(this.uniform()));
    const a = 2 * Math.PI * this.uniform();
    this.spare = r * Math.sin(a);
    return r * Math.cos(a);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** Cyclic difference-of-Gaussians band-pass of an n x n field, in place, via the FFT. */
export function bandPassCyclic(field: Float64Array, n: number): void {
  const im = new Float64Array(n * n);
  fft2d(field, im, n, -1);
  const a = 2 * Math.PI * Math.PI;
  for (let v = 0; v < n; v++) {
    const fy = (v < n / 2 ? v : v - n) / n;
    for (let u = 0; u < n; u++) {
      const fx = (u < n / 2 ? u : u - n) / n;
      const f2 = fx * fx + fy * fy;
      const g = Math.exp(-a * f2 * BAND_SIGMA_LOW * BAND_SIGMA_LOW) - Math.exp(-a * f2 * BAND_SIGMA_HIGH * BAND_SIGMA_HIGH);
      field[v * n + u]! *= g;
      im[v * n + u]! *= g;
    }
  }
  fft2d(field, im, n, 1);
  for (let i = 0; i < n * n; i++) field[i]! /= n * n;
}

/** A copy scaled to unit RMS. */
export function unitRms(src: Float64Array): Float32Array {
  let sq = 0;
  for (let i = 0; i < src.length; i++) sq += src[i]! * src[i]!;
  const k = 1 / Math.sqrt(sq / src.length);
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = src[i]! * k;
  return out;
}

/** An n x n field of the generator's normals, band-passed cyclically, at unit RMS. */
export function bandField(rng: Rng, n: number): Float32Array {
  const f = new Float64Array(n * n);
  for (let i = 0; i < f.length; i++) f[i] = rng.gaussian();
  bandPassCyclic(f, n);
  return unitRms(f);
}

/**
 * The count part, TILE x TILE at unit RMS: each CELL x CELL cell band-passed on its own (cyclically), so
 * that the cells' correlations are independent and sign-symmetric under "unmarked" whatever the image is.
 */
export function countPart(rng: Rng): Float32Array {
  const count = new Float64Array(TILE * TILE);
  const cell = new Float64Array(CELL * CELL);
  for (let cy = 0; cy < TILE; cy += CELL) {
    for (let cx = 0; cx < TILE; cx += CELL) {
      for (let i = 0; i < cell.length; i++) cell[i] = rng.gaussian();
      bandPassCyclic(cell, CELL);
      for (let y = 0; y < CELL; y++) for (let x = 0; x < CELL; x++) count[(cy + y) * TILE + cx + x] = cell[y * CELL + x]!;
    }
  }
  return unitRms(count);
}

/** The generator for one part of a version's key: `label` under the version's prefix, then the secret. */
export function deriveRng(version: string, secret: Uint8Array, label: string): Rng {
  return new Rng(Buffer.concat([Buffer.from(`optmark-fingerprint-${version}/${label}/`), secret]));
}

const CACHE_MAX = 4;

/** `build` cached per thread by the secret's SHA-256 (the CACHE_MAX last secrets; a worker usually sees one). */
export function perSecret<T>(build: (secret: Uint8Array) => T): (secret: Uint8Array) => T {
  const cache = new Map<string, T>();
  return (secret) => {
    const id = createHash('sha256').update(secret).digest('hex');
    let value = cache.get(id);
    if (value === undefined) {
      value = build(secret);
      if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string);
      cache.set(id, value);
    }
    return value;
  };
}
