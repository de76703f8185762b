/**
 * The keyed tile, derived deterministically from the secret. Two independent parts:
 * - sync: a TILE x TILE band-passed Gaussian field, used only to find scale and shift;
 * - count: CELL x CELL cells, each band-passed on its own (cyclically), so that the cells' correlations
 *   are independent and sign-symmetric under "unmarked" whatever the image is. That is what makes the
 *   decision's false-positive bound exact, and it holds because the alignment never looks at them.
 * Both have unit RMS; the embedded tile is sqrt(SYNC_SHARE) * sync + sqrt(1 - SYNC_SHARE) * count.
 */
import { createHash } from 'node:crypto';
import { BAND_SIGMA_HIGH, BAND_SIGMA_LOW, CELL, SYNC_SHARE, TILE } from './params.js';
import { fft2d } from './fft.js';

export interface KeyTile {
  /** TILE*TILE, row-major, unit RMS. */
  sync: Float32Array;
  /** TILE*TILE, row-major, unit RMS, independent per CELL x CELL cell. */
  count: Float32Array;
  /** The tile that is embedded. */
  embed: Float32Array;
}

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

export function unitRms(src: Float64Array): Float32Array {
  let sq = 0;
  for (let i = 0; i < src.length; i++) sq += src[i]! * src[i]!;
  const k = 1 / Math.sqrt(sq / src.length);
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = src[i]! * k;
  return out;
}

function derive(secret: Uint8Array, label: string): Rng {
  return new Rng(Buffer.concat([Buffer.from(`optmark-fingerprint-v1/${label}/`), secret]));
}

/** Builds the key tile from the secret (about 10 ms; callers cache it, see keyTileFor). */
export function buildKeyTile(secret: Uint8Array): KeyTile {
  const rs = derive(secret, 'sync');
  const sync = new Float64Array(TILE * TILE);
  for (let i = 0; i < sync.length; i++) sync[i] = rs.gaussian();
  bandPassCyclic(sync, TILE);

  const rc = derive(secret, 'count');
  const count = new Float64Array(TILE * TILE);
  const cell = new Float64Array(CELL * CELL);
  for (let cy = 0; cy < TILE; cy += CELL) {
    for (let cx = 0; cx < TILE; cx += CELL) {
      for (let i = 0; i < cell.length; i++) cell[i] = rc.gaussian();
      bandPassCyclic(cell, CELL);
      for (let y = 0; y < CELL; y++) for (let x = 0; x < CELL; x++) count[(cy + y) * TILE + cx + x] = cell[y * CELL + x]!;
    }
  }
  const s = unitRms(sync);
  const c = unitRms(count);
  const ws = Math.sqrt(SYNC_SHARE);
  const wc = Math.sqrt(1 - SYNC_SHARE);
  const embed = new Float32Array(TILE * TILE);
  for (let i = 0; i < embed.length; i++) embed[i] = ws * s[i]! + wc * c[i]!;
  return { sync: s, count: c, embed };
}

const cache = new Map<string, KeyTile>();
const CACHE_MAX = 4;

/** The key tile for a secret, cached per thread (a worker usually sees one secret). */
export function keyTileFor(secret: Uint8Array): KeyTile {
  const id = createHash('sha256').update(secret).digest('hex');
  let tile = cache.get(id);
  if (!tile) {
    tile = buildKeyTile(secret);
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string);
    cache.set(id, tile);
  }
  return tile;
}
