/**
 * The version-2 key, derived deterministically from the secret: three independent parts (see params.ts).
 * - a: V2_PERIOD x V2_PERIOD, band-passed cyclically, so that the embedded mark repeats every V2_PERIOD
 *   work pixels (a lattice the detector finds without the key), and keyed, so that the shift and the
 *   eight symmetries of the square are found by correlating with it;
 * - b: TILE x TILE band-passed cyclically; picks the tile phase among the (TILE / V2_PERIOD)^2 left open;
 * - c: CELL x CELL cells of independent key material (as in version 1): the decision alone reads them.
 * Each part has unit RMS; the embedded tile is sqrt(SHARE_A) tiled(a) + sqrt(SHARE_B) b + sqrt(SHARE_C) c.
 * Labels differ from version 1's, so the two versions' key material is independent.
 */
import { type Rng, bandField, countPart, deriveRng, perSecret, unitRms } from '../common/key.js';
import { TILE } from '../params.js';
import { V2_PERIOD, V2_SHARE_A, V2_SHARE_B, V2_SHARE_C, V2_TEMPLATE } from './params.js';

export interface KeyTileV2 {
  /** V2_PERIOD^2, row-major, unit RMS: the sync part, sqrt(1 - V2_TEMPLATE) noise + sqrt(V2_TEMPLATE) template. */
  a: Float32Array;
  /** The template's harmonics (m1, m2 pairs, cycles per V2_PERIOD), one of each +-m pair. */
  harmonics: Float64Array;
  /** TILE^2, unit RMS. */
  b: Float32Array;
  /** TILE^2, unit RMS, independent per CELL x CELL cell. */
  c: Float32Array;
  /** TILE^2: what is embedded. */
  embed: Float32Array;
}

const derive = (secret: Uint8Array, label: string): Rng => deriveRng('v2', secret, label);

/**
 * Base harmonics (a, b), a > b > 0, radius 7.2-9.1 cycles per period (high in the band, where photographs have least power): their orbits under the 8 symmetries
 * of the square are 4 +-pairs each, off the axes and the diagonals.
 */
const TEMPLATE_BASES: readonly (readonly [number, number])[] = [
  [7, 2],
  [7, 3],
  [6, 5],
  [7, 4],
  [8, 1],
  [8, 2],
  [8, 3],
  [7, 5],
  [8, 4],
  [9, 1],
];
const TEMPLATE_ORBITS = 3;

/**
 * The template: a few sinusoids of the period whose frequencies form whole orbits of the symmetries of
 * the square (so the lattice search needs no symmetry), with keyed choice and phases. Their power sits in
 * 12 spectral peaks, which is what makes the lattice visible even on textured photographs.
 */
function template(rng: Rng): { t: Float32Array; harmonics: Float64Array } {
  const order = TEMPLATE_BASES.map((b, i) => ({ b, r: rng.uniform(), i }));
  order.sort((x, y) => x.r - y.r);
  const harm: number[] = [];
  for (const { b } of order.slice(0, TEMPLATE_ORBITS)) harm.push(b[0], b[1], b[0], -b[1], b[1], b[0], b[1], -b[0]);
  const n = V2_PERIOD;
  const f = new Float64Array(n * n);
  for (let k = 0; k < harm.length; k += 2) {
    const phi = 2 * Math.PI * rng.uniform();
    for (let y = 0; y < n; y++) for (let x = 0; x < n; x++) f[y * n + x]! += Math.cos((2 * Math.PI * (harm[k]! * x + harm[k + 1]! * y)) / n + phi);
  }
  return { t: unitRms(f), harmonics: Float64Array.from(harm) };
}

/** Builds version 2's key from the secret (keyTileV2For caches it). */
export function buildKeyTileV2(secret: Uint8Array): KeyTileV2 {
  const noise = bandField(derive(secret, 'lattice'), V2_PERIOD);
  const tpl = template(derive(secret, 'template'));
  const mix = new Float64Array(V2_PERIOD * V2_PERIOD);
  for (let i = 0; i < mix.length; i++) mix[i] = Math.sqrt(1 - V2_TEMPLATE) * noise[i]! + Math.sqrt(V2_TEMPLATE) * tpl.t[i]!;
  const a = unitRms(mix);
  const b = bandField(derive(secret, 'phase'), TILE);
  const c = countPart(derive(secret, 'count'));
  const wa = Math.sqrt(V2_SHARE_A);
  const wb = Math.sqrt(V2_SHARE_B);
  const wc = Math.sqrt(V2_SHARE_C);
  const m = V2_PERIOD - 1;
  const embed = new Float32Array(TILE * TILE);
  for (let y = 0; y < TILE; y++) {
    for (let x = 0; x < TILE; x++) {
      const i = y * TILE + x;
      embed[i] = wa * a[(y & m) * V2_PERIOD + (x & m)]! + wb * b[i]! + wc * c[i]!;
    }
  }
  return { a, harmonics: tpl.harmonics, b, c, embed };
}

/** The version-2 key for a secret, cached per thread. */
export const keyTileV2For = perSecret(buildKeyTileV2);
