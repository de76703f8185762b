/**
 * Version-2 detection core in TypeScript (the reference; native/src/core2.cc ports it). One call per
 * image: luma at the base resolution in, the chosen alignment and the count cells out.
 *
 * 1. Lattice. The mark repeats every V2_PERIOD work pixels, so the autocorrelation of the prefiltered
 *    image has peaks at the integer combinations of two period vectors v1, v2, wherever the image was
 *    cropped and however it was scaled, rotated or stretched (translation does not move them). The
 *    autocorrelation comes from the power spectrum (whitened per radius, the image's axes and the JPEG
 *    8x8 grid notched out), on two pyramid levels; the best peak pairs near the two axes are scored on
 *    the whole lattice they generate and refined by least squares over its peaks. No key is used.
 * 2. Alignment. For each lattice candidate (plus the no-geometry one) the image is resampled on the
 *    lattice frame and folded onto one TILE x TILE tile; its V2_PERIOD fold is correlated (cyclic FFT)
 *    with part A of the key under each of the 8 symmetries of the square; the highest peak over its
 *    surface's RMS (sync z) picks the candidate, the symmetry and the shift mod V2_PERIOD. Part B then
 *    picks the tile phase among the (TILE / V2_PERIOD)^2 left.
 * 3. Count. The fold is redone at the sub-pixel shift and each CELL x CELL cell of part C is correlated
 *    with its own key material. Nothing in 1-2 reads part C, which keeps the decision's bound exact.
 */
import { TILE } from './params.js';
import { fft1d, fft2d } from './fft.js';
import { luma, parabolaPeak, prefilter } from './reference.js';

export interface Core2Params {
  period: number;
  cell: number;
  fastZ: number;
  pMin: number;
  pMax: number;
  angle: number;
  candidates: number;
  gate: number;
  refineZ: number;
  /** Part B's next choices of tile phase counted too (a fixed number; phaseCells). */
  phaseLooks: number;
  /** Sync z from which they are counted. */
  phasesZ: number;
  /** Self-normalised sum T of the count from which an unrefined spectrum lattice is refined and counted again. */
  secondT: number;
  /** Fine comb score from which the best hypothesis of the aspect lines is folded. */
  aspectGate: number;
  /** Fine comb score from which the best hypothesis of the rotation plane (refined) is folded. */
  rotationGate: number;
  /** Power of part A's amplitude in the sync correlation (its phase kept): 0 phase only, 1 matched filter. */
  syncPower: number;
  /** Spectrum lattices within this fraction of the no-geometry one are that one (not folded again). */
  sameAsIdentity: number;
  /** Runner-up alignments counted when the search's best sync z is under refineZ (a fixed number). */
  runners: number;
  /** Sync z from which a runner-up alignment is counted. */
  runnerZ: number;
  /** Identity looks counted when the search's best sync z is under refineZ (a fixed number). */
  identityLooks: number;
  /** Lattice looks counted when the lattice search ran (a fixed number), and the sync z they need. */
  latticeLooks: number;
  latticeLookZ: number;
  sigmaHighpass: number;
  sigmaLocal: number;
  localFloor: number;
  /** Floor of the local energy version 2 divides by (luma units squared): Detect step 2. */
  energyFloor: number;
}

export interface Core2Input {
  /** Decoded pixels at the base resolution (short side min(input, WORK_SHORT_SIDE)), 8-bit, interleaved. */
  pixels: Uint8Array;
  width: number;
  height: number;
  channels: number;
  /** Short side of the work resolution the base was scaled from (WORK_SHORT_SIDE, or less for small inputs). */
  workShort: number;
  /** 1 when the base is a JPEG at its own size: its 8 x 8 block grid is then at 8 px and is notched out of the spectrum. */
  native: number;
  /** Key parts: a is period^2, b and c TILE^2. */
  a: Float32Array;
  /** The template's harmonics (m1, m2 pairs), the only key material the lattice search reads. */
  harmonics: Float64Array;
  b: Float32Array;
  c: Float32Array;
  params: Core2Params;
  /** Optional, width*height: receives the prefiltered luma, for the version-1 core to reuse (same prefilter). */
  keepPrefiltered?: Float32Array;
}

export interface Core2Output {
  /** Period vectors of the chosen lattice, base pixels per `period` work pixels: [v1x, v1y, v2x, v2y]. */
  lattice: Float64Array;
  /** Index of the symmetry of the square (0-7, see DIHEDRAL). */
  dihedral: number;
  /** Tile phase of the chosen alignment, lattice-frame work pixels (integer plus sub-pixel). */
  dx: number;
  dy: number;
  /** Sync z of the chosen alignment (part A) and the phase choice's z (part B). */
  syncZ: number;
  phaseZ: number;
  /** 1 when the no-geometry hypothesis was accepted at once, 2 when the lattice search ran. */
  tier: number;
  /** Alignment hypotheses tried. */
  candidates: number;
  /** Best comb score of the lattice grid (-Infinity when the search did not run). */
  combScore: number;
  /** Best fine comb score of the aspect lines (-Infinity when the search did not run). */
  aspectScore: number;
  /** Fine comb score of the rotation plane's best hypothesis, refined (-Infinity when the search did not run). */
  rotationScore: number;
  /** Correlation of each count cell with the key at the chosen alignment. */
  cells: Float64Array;
  /**
   * The cells at part B's 2nd, 3rd, ... choices of tile phase for the chosen alignment (params.phaseLooks
   * blocks, in B's order); empty when the sync z is under params.phasesZ.
   */
  phaseCells: Float64Array;
  /**
   * The second look's cells (its own best tile phase): the refined lattice when the chosen one was not
   * refined, the unrefined one when it was; empty when it did not run.
   */
  refinedCells: Float64Array;
  refinedSyncZ: number;
  /**
   * Runner-up alignments (the next distinct peaks of the search by sync z, each at its own best tile
   * phase): params.runners blocks of cells, a block of zeros where the runner-up was not counted; empty
   * when none was. Their sync z, 0 where not counted.
   */
  runnerCells: Float64Array;
  runnerZ: Float64Array;
  /**
   * Identity looks (the best peaks of the identity symmetry's sync surface on the chosen lattice that are
   * neither the chosen alignment nor a runner-up, each at its own best tile phase): params.identityLooks
   * blocks of cells, zeros where not counted; empty when none was. Their sync z, 0 where not counted.
   */
  identityCells: Float64Array;
  identityZ: Float64Array;
  /**
   * Lattice looks (the best peak of each of the next lattices the search folded, by sync z from
   * params.latticeLookZ, each at its own best tile phase): params.latticeLooks blocks of cells, zeros where
   * not counted; empty when none was. Their sync z, 0 where not counted.
   */
  latticeCells: Float64Array;
  latticeZ: Float64Array;
}

/** The 8 symmetries of the square as integer matrices [a, b, c, d]: (x, y) -> (a x + b y, c x + d y). */
export const DIHEDRAL: readonly (readonly [number, number, number, number])[] = [
  [1, 0, 0, 1],
  [0, -1, 1, 0],
  [-1, 0, 0, -1],
  [0, 1, -1, 0],
  [-1, 0, 0, 1],
  [1, 0, 0, -1],
  [0, 1, 1, 0],
  [0, -1, -1, 0],
];

const T2 = TILE * TILE;
const TM = TILE - 1;

function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p <<= 1;
  return p;
}

/**
 * Whitened power spectrum of a prefiltered image for the lattice search: windowed (cosine taper), padded
 * to powers of two, each bin divided by the mean power at its radius, clipped at SPEC_CLIP and shifted by
 * -1 so that a bin with no periodic content is 0 on average. The axes (the straight edges of crops, borders
 * and rotated frames) and, for a base at the input's own size, the JPEG 8 x 8 grid lines are set to 0.
 * Returned lightly smoothed ([1 2 1]/4 each way) and box-smoothed 3 x 3 (for the coarse search).
 */
export interface Spectrum {
  nx: number;
  ny: number;
  /** Whether the JPEG grid lines were notched out (the comb then skips the peaks that fall on them). */
  notch: boolean;
  fine: Float32Array;
  coarse: Float32Array;
}

const SPEC_CLIP = 6;
/** Lattices this close (relative) are one alignment (runner-ups; the candidates' distance is params.sameAsIdentity). */
const SAME_AS_IDENTITY = 0.02;
/** Log step of the crop-only scale line of the lattice search. */
const CROP_STEP = Math.log(1.005);
/** Max filter radius (bins) of the plane the coarse pass of the lattice grid reads. */
const POOL_RADIUS = 1;
/** Coarse cells of the lattice grid whose fine points are scored. */
const COARSE_KEEP = 32;
/** The crop line starts at this times the no-geometry scale (a crop only enlarges the period). */
const CROP_MIN = 0.98;
/** Below the gate, grid hypotheses are tried from this times the no-geometry scale up. */
const GATED_SCALE_MIN = 0.85;
/** The aspect lines: one axis at the no-geometry scale, the other within this factor of it either way. */
const ASPECT_MAX = Math.log(1.36);
/** The rotation plane: scales within this factor of the no-geometry one either way (log). */
const ROT_SCALE = Math.log(1.45);
/** Coarse cells of the rotation plane whose fine points are scored. */
const ROT_KEEP = 4;
const WHITEN_BOX = 17;
/** Template peaks this close (bins) to a notched grid line are left out of the comb score. */
const GRID_SKIP = 2;

/**
 * Half spectra (bins 0 .. nx/2, rows hw = nx/2 + 1 wide) of the rows of the windowed picture, two rows per
 * complex transform: with Z = FFT(a + i b), A(k) = (Z(k) + conj Z(-k)) / 2 and B(k) = (Z(k) - conj Z(-k)) / 2i.
 */
function halfSpectrumRows(x: Float32Array, w: number, h: number, wy: Float64Array, wx: Float64Array, nx: number, re: Float64Array, im: Float64Array): void {
  const hw = nx / 2 + 1;
  const zr = new Float64Array(nx);
  const zi = new Float64Array(nx);
  for (let ya = 0; ya < h; ya += 2) {
    const yb = ya + 1;
    zr.fill(0);
    zi.fill(0);
    for (let k = 0; k < w; k++) {
      zr[k] = x[ya * w + k]! * wy[ya]! * wx[k]!;
      if (yb < h) zi[k] = x[yb * w + k]! * wy[yb]! * wx[k]!;
    }
    fft1d(zr, zi, -1);
    for (let k = 0; k < hw; k++) {
      const q = (nx - k) & (nx - 1);
      re[ya * hw + k] = 0.5 * (zr[k]! + zr[q]!);
      im[ya * hw + k] = 0.5 * (zi[k]! - zi[q]!);
      if (yb < h) {
        re[yb * hw + k] = 0.5 * (zi[k]! + zi[q]!);
        im[yb * hw + k] = 0.5 * (zr[q]! - zr[k]!);
      }
    }
  }
}

export function whitenedSpectrum(x: Float32Array, w: number, h: number, notchGrid: boolean): Spectrum {
  const nx = nextPow2(w);
  const ny = nextPow2(h);
  // The picture is real: only the half spectrum (columns 0 .. nx/2) is transformed; the other half of the
  // power is its mirror, |X(-u, -v)| = |X(u, v)|.
  const hw = nx / 2 + 1;
  const re = new Float64Array(hw * ny);
  const im = new Float64Array(hw * ny);
  const tx = Math.max(1, Math.round(w / 10));
  const ty = Math.max(1, Math.round(h / 10));
  const taper = (d: number, t: number): number => (d >= t ? 1 : 0.5 - 0.5 * Math.cos((Math.PI * (d + 0.5)) / t));
  const wx = Float64Array.from({ length: w }, (_, i) => taper(Math.min(i, w - 1 - i), tx));
  const wy = Float64Array.from({ length: h }, (_, y) => taper(Math.min(y, h - 1 - y), ty));
  halfSpectrumRows(x, w, h, wy, wx, nx, re, im);
  for (let u = 0; u < hw; u++) fft1d(re, im, -1, u, hw, ny);
  const gx = nx / 8;
  const gy = ny / 8;
  const pw = new Float32Array(nx * ny);
  const valid = new Float32Array(nx * ny);
  for (let v = 0; v < ny; v++) {
    const fv = v < ny / 2 ? v : v - ny;
    for (let u = 0; u < nx; u++) {
      const fu = u < nx / 2 ? u : u - nx;
      const i = v * nx + u;
      const du = Math.abs(fu) % gx;
      const dv = Math.abs(fv) % gy;
      const gridLine = notchGrid && (Math.min(du, gx - du) <= 1 || Math.min(dv, gy - dv) <= 1);
      const rr = Math.sqrt((fu / nx) ** 2 + (fv / ny) ** 2);
      if (Math.abs(fu) <= 1 || Math.abs(fv) <= 1 || gridLine || rr < 0.01) continue;
      // Bins past nx/2 from their mirror (-u, -v).
      const j = u < hw ? v * hw + u : ((ny - v) & (ny - 1)) * hw + (nx - u);
      pw[i] = re[j]! * re[j]! + im[j]! * im[j]!;
      valid[i] = 1;
    }
  }
  // Local whitening: each bin over the mean power of the valid bins in a WHITEN_BOX square around it.
  const boxSum = (src: Float32Array): Float32Array => {
    const r = WHITEN_BOX >> 1;
    const tmp = new Float32Array(nx * ny);
    const out = new Float32Array(nx * ny);
    for (let v = 0; v < ny; v++) {
      const row = v * nx;
      let acc = 0;
      for (let j = -r; j <= r; j++) acc += src[row + ((j + nx) & (nx - 1))]!;
      for (let u = 0; u < nx; u++) {
        tmp[row + u] = acc;
        acc += src[row + ((u + r + 1) & (nx - 1))]! - src[row + ((u - r + nx) & (nx - 1))]!;
      }
    }
    for (let u = 0; u < nx; u++) {
      let acc = 0;
      for (let j = -r; j <= r; j++) acc += tmp[((j + ny) & (ny - 1)) * nx + u]!;
      for (let v = 0; v < ny; v++) {
        out[v * nx + u] = acc;
        acc += tmp[((v + r + 1) & (ny - 1)) * nx + u]! - tmp[((v - r + ny) & (ny - 1)) * nx + u]!;
      }
    }
    return out;
  };
  const ps = boxSum(pw);
  const vs = boxSum(valid);
  for (let i = 0; i < nx * ny; i++) {
    const mean = vs[i]! > 0 ? ps[i]! / vs[i]! : 0;
    pw[i] = valid[i] && mean > 0 ? Math.min(SPEC_CLIP, pw[i]! / mean) - 1 : 0;
  }
  const smooth = (src: Float32Array, k: readonly number[]): Float32Array => {
    const r = (k.length - 1) >> 1;
    const tmp = new Float32Array(nx * ny);
    const out = new Float32Array(nx * ny);
    for (let v = 0; v < ny; v++) {
      for (let u = 0; u < nx; u++) {
        let s = 0;
        for (let j = -r; j <= r; j++) s += k[j + r]! * src[v * nx + ((u + j + nx) & (nx - 1))]!;
        tmp[v * nx + u] = s;
      }
    }
    for (let v = 0; v < ny; v++) {
      for (let u = 0; u < nx; u++) {
        let s = 0;
        for (let j = -r; j <= r; j++) s += k[j + r]! * tmp[((v + j + ny) & (ny - 1)) * nx + u]!;
        out[v * nx + u] = s;
      }
    }
    return out;
  };
  return { nx, ny, notch: notchGrid, fine: smooth(pw, [0.25, 0.5, 0.25]), coarse: smooth(pw, [1 / 3, 1 / 3, 1 / 3]) };
}

/**
 * Whether a frequency (in bins, any sign) lies within GRID_SKIP bins of a notched JPEG grid line: its bins
 * were set to 0, so a template peak there is not counted at all (rather than counted as absent).
 */
function onGrid(u: number, v: number, nx: number, ny: number): boolean {
  const gx = nx / 8;
  const gy = ny / 8;
  const du = Math.abs(u) % gx;
  const dv = Math.abs(v) % gy;
  return Math.min(du, gx - du) < GRID_SKIP || Math.min(dv, gy - dv) < GRID_SKIP;
}

/** Bilinear value of a spectrum plane at a frequency given in cycles per pixel (any sign). */
function specAt(plane: Float32Array, nx: number, ny: number, fx: number, fy: number): number {
  const u = fx * nx;
  const v = fy * ny;
  const u0 = Math.floor(u);
  const v0 = Math.floor(v);
  const a = u - u0;
  const b = v - v0;
  const mx = nx - 1;
  const my = ny - 1;
  const i00 = (v0 & my) * nx;
  const i10 = ((v0 + 1) & my) * nx;
  return (
    (1 - b) * ((1 - a) * plane[i00 + (u0 & mx)]! + a * plane[i00 + ((u0 + 1) & mx)]!) +
    b * ((1 - a) * plane[i10 + (u0 & mx)]! + a * plane[i10 + ((u0 + 1) & mx)]!)
  );
}

/** Harmonics (m1, m2) of the period lattice with rmin <= |m| <= rmax, one of each +-m pair. */
export function harmonics(rmin: number, rmax: number): Float64Array {
  const out: number[] = [];
  const r = Math.ceil(rmax);
  for (let m1 = 0; m1 <= r; m1++) {
    for (let m2 = -r; m2 <= r; m2++) {
      if (m1 === 0 && m2 <= 0) continue;
      const len = Math.hypot(m1, m2);
      if (len >= rmin && len <= rmax) out.push(m1, m2);
    }
  }
  return Float64Array.from(out);
}

/** Lattice hypothesis: the attack maps work pixels to base pixels by diag(sx, sy) R(theta), scaled by `scale`. */
interface Hypo {
  theta: number;
  sx: number;
  sy: number;
  score: number;
}

/** Steps of the pattern search (theta, log sx, log sy): free, and along the crop line. */
const FREE_STEPS = (dt: number, ds: number): (readonly [number, number, number])[] => [
  [dt, 0, 0],
  [-dt, 0, 0],
  [0, ds, 0],
  [0, -ds, 0],
  [0, 0, ds],
  [0, 0, -ds],
];
const LINE_STEPS = (ds: number): (readonly [number, number, number])[] => [
  [0, ds, ds],
  [0, -ds, -ds],
];

/** Comb score: the whitened spectrum summed at the hypothesis's reciprocal-lattice points, over sqrt(count). */
export function combScore(sp: Spectrum, plane: Float32Array, m: Float64Array, period: number, theta: number, sx: number, sy: number): number {
  return combScoreCS(sp, plane, m, period, Math.cos(theta), Math.sin(theta), sx, sy);
}

function combScoreCS(sp: Spectrum, plane: Float32Array, m: Float64Array, period: number, c: number, s: number, sx: number, sy: number): number {
  const kx = 1 / (period * sx);
  const ky = 1 / (period * sy);
  let sum = 0;
  let n = 0;
  for (let i = 0; i < m.length; i += 2) {
    const fx = (m[i]! * c - m[i + 1]! * s) * kx;
    const fy = (m[i]! * s + m[i + 1]! * c) * ky;
    if (Math.abs(fx) > 0.45 || Math.abs(fy) > 0.45 || (sp.notch && onGrid(fx * sp.nx, fy * sp.ny, sp.nx, sp.ny))) continue;
    sum += specAt(plane, sp.nx, sp.ny, fx, fy);
    n++;
  }
  return n ? sum / Math.sqrt(n) : -Infinity;
}

/**
 * Comb score with nearest-bin lookups (the grid's coarse pass, on the max-filtered plane). With `max3` each
 * lookup is the maximum of the 3 x 3 bins around (cyclic), as on the plane max-filtered with radius 1,
 * without filtering the whole plane (the rotation plane's coarse pass looks up a few thousand bins).
 */
function combNearest(
  plane: Float32Array,
  nx: number,
  ny: number,
  notch: boolean,
  m: Float64Array,
  period: number,
  c: number,
  s: number,
  sx: number,
  sy: number,
  max3 = false,
): number {
  const kx = 1 / (period * sx);
  const ky = 1 / (period * sy);
  const r = max3 ? 1 : 0;
  let sum = 0;
  let n = 0;
  for (let i = 0; i < m.length; i += 2) {
    const fx = (m[i]! * c - m[i + 1]! * s) * kx;
    const fy = (m[i]! * s + m[i + 1]! * c) * ky;
    if (Math.abs(fx) > 0.45 || Math.abs(fy) > 0.45 || (notch && onGrid(fx * nx, fy * ny, nx, ny))) continue;
    const u = Math.floor(fx * nx + 0.5);
    const v = Math.floor(fy * ny + 0.5);
    let best = -Infinity;
    for (let dv = -r; dv <= r; dv++) {
      const row = ((v + dv) & (ny - 1)) * nx;
      for (let du = -r; du <= r; du++) best = Math.max(best, plane[row + ((u + du) & (nx - 1))]!);
    }
    sum += best;
    n++;
  }
  return n ? sum / Math.sqrt(n) : -Infinity;
}

/** Separable cyclic max filter of radius r (nx, ny powers of two). */
function maxPool(src: Float32Array, nx: number, ny: number, r: number): Float32Array {
  const tmp = new Float32Array(nx * ny);
  const out = new Float32Array(nx * ny);
  for (let v = 0; v < ny; v++) {
    for (let u = 0; u < nx; u++) {
      let m = src[v * nx + u]!;
      for (let j = -r; j <= r; j++) m = Math.max(m, src[v * nx + ((u + j + nx) & (nx - 1))]!);
      tmp[v * nx + u] = m;
    }
  }
  for (let v = 0; v < ny; v++) {
    for (let u = 0; u < nx; u++) {
      let m = tmp[v * nx + u]!;
      for (let j = -r; j <= r; j++) m = Math.max(m, tmp[((v + j + ny) & (ny - 1)) * nx + u]!);
      out[v * nx + u] = m;
    }
  }
  return out;
}

/** Centres of the coarse pass along an axis of n fine points: 1, 3, 5, ... (each covers its neighbours). */
function coarseIndices(n: number): number[] {
  const c: number[] = [];
  for (let i = 1; i < n; i += 2) c.push(i);
  if (!c.length && n > 0) c.push(0);
  return c;
}

/**
 * Pattern search of a hypothesis on the fine plane (angle steps 0.75-0.04 degrees, scale 0.75-0.04%): free in
 * angle and both scales, or along the crop line (one scale, theta 0) when `line`.
 */
function refineHypo(sp: Spectrum, m: Float64Array, period: number, hy: Hypo, line: boolean): Hypo {
  let { theta, sx, sy } = hy;
  let best = combScore(sp, sp.fine, m, period, theta, sx, sy);
  for (const k of [0.5, 0.2, 0.07, 0.025]) {
    const dt = (1.5 * k * Math.PI) / 180;
    const ds = 0.015 * k;
    for (let iter = 0; iter < 12; iter++) {
      let moved = false;
      for (const [a, b, c] of line ? LINE_STEPS(ds) : FREE_STEPS(dt, ds)) {
        const t2 = theta + a;
        const x2 = sx * Math.exp(b);
        const y2 = sy * Math.exp(c);
        const sc = combScore(sp, sp.fine, m, period, t2, x2, y2);
        if (sc > best) {
          best = sc;
          theta = t2;
          sx = x2;
          sy = y2;
          moved = true;
        }
      }
      if (!moved) break;
    }
  }
  return { theta, sx, sy, score: best };
}

/**
 * Lattice period-vector pairs [v1x, v1y, v2x, v2y] (base pixels per period), best first, and the best
 * comb score of the grid. Below p.gate only the grid's best hypothesis that does not shrink the period
 * below GATED_SCALE_MIN is kept (and the crop line's, from cropMin, always is): the others are folded
 * only when the grid has a clear lattice. No key is read but the template's frequencies.
 */
export function latticeCandidates(
  x: Float32Array,
  w: number,
  h: number,
  notchGrid: boolean,
  harm: Float64Array,
  p: Core2Params,
  cropMin = 0,
): { cands: number[][]; top: number; aspect: number; rotation: number } {
  const sp = whitenedSpectrum(x, w, h, notchGrid);
  const period = p.period;
  const coarseM = harm;
  const fineM = harm;
  const thMax = (p.angle * Math.PI) / 180;
  const thStep = (0.75 * Math.PI) / 180;
  const sMin = Math.max(p.pMin / period, 0.4);
  const sMax = Math.min(p.pMax / period, Math.min(w, h) / (2.5 * period));
  const ls = Math.log(1.015);
  const lr = Math.log(1.02);
  const rMax = Math.log(1.4);
  // The grid (theta, log sx, log sy / sx), searched coarse to fine: every second point each way on the
  // max-filtered plane, then the fine points around the best coarse cells on the plane itself.
  const ths: number[] = [];
  const as: number[] = [];
  const rs: number[] = [];
  for (let theta = -thMax; theta <= thMax + 1e-9; theta += thStep) ths.push(theta);
  for (let a = Math.log(sMin); a <= Math.log(sMax) + 1e-9; a += ls) as.push(a);
  for (let r = -rMax; r <= rMax + 1e-9; r += lr) rs.push(r);
  const nT = ths.length;
  const nA = as.length;
  const nR = rs.length;
  const cs = ths.map(Math.cos);
  const sn = ths.map(Math.sin);
  const ex = as.map(Math.exp);
  const exr = new Float64Array(nA * nR);
  for (let j = 0; j < nA; j++) for (let k = 0; k < nR; k++) exr[j * nR + k] = Math.exp(as[j]! + rs[k]!);
  const top: Hypo[] = [];
  const keep = 24;
  if (nT > 0 && nA > 0 && nR > 0) {
    const pooled = maxPool(sp.coarse, sp.nx, sp.ny, POOL_RADIUS);
    const cells: { i: number; j: number; k: number; score: number }[] = [];
    for (const i of coarseIndices(nT)) {
      for (const j of coarseIndices(nA)) {
        for (const k of coarseIndices(nR)) {
          const score = combNearest(pooled, sp.nx, sp.ny, sp.notch, harm, period, cs[i]!, sn[i]!, ex[j]!, exr[j * nR + k]!);
          if (cells.length === COARSE_KEEP && !(score > cells[cells.length - 1]!.score)) continue;
          let at = cells.length;
          while (at > 0 && score > cells[at - 1]!.score) at--;
          cells.splice(at, 0, { i, j, k, score });
          if (cells.length > COARSE_KEEP) cells.pop();
        }
      }
    }
    const seen = new Uint8Array(nT * nA * nR);
    for (const c of cells) {
      for (let i = Math.max(0, c.i - 1); i <= Math.min(nT - 1, c.i + 1); i++) {
        for (let j = Math.max(0, c.j - 1); j <= Math.min(nA - 1, c.j + 1); j++) {
          for (let k = Math.max(0, c.k - 1); k <= Math.min(nR - 1, c.k + 1); k++) {
            const at = (i * nA + j) * nR + k;
            if (seen[at]) continue;
            seen[at] = 1;
            const sx = ex[j]!;
            const sy = exr[j * nR + k]!;
            const score = combScoreCS(sp, sp.coarse, coarseM, period, cs[i]!, sn[i]!, sx, sy);
            if (top.length < keep || score > top[top.length - 1]!.score) {
              top.push({ theta: ths[i]!, sx, sy, score });
              top.sort((u, v) => v.score - u.score);
              if (top.length > keep) top.pop();
            }
          }
        }
      }
    }
  }
  const topScore = top.length ? top[0]!.score : -Infinity;
  // Distinct hypotheses, refined by a pattern search on all harmonics.
  const chosen: Hypo[] = [];
  /** A hypothesis within `steps` angle steps and `scale` (log) of each scale of one already chosen is that one. */
  const nearChosen = (hy: Hypo, steps = 2.5, scale = 0.05): boolean =>
    chosen.some((c) => Math.abs(c.theta - hy.theta) < steps * thStep && Math.abs(Math.log(c.sx / hy.sx)) < scale && Math.abs(Math.log(c.sy / hy.sy)) < scale);
  for (const hy of top) {
    if (chosen.length >= (topScore < p.gate ? Math.min(1, p.candidates) : p.candidates)) break;
    // Below the gate, a hypothesis that shrinks the period (costly to fold) is not tried: such pictures
    // (borders, screenshots) show a clear lattice.
    if (topScore < p.gate && Math.sqrt(hy.sx * hy.sy) < (GATED_SCALE_MIN * cropMin) / CROP_MIN) continue;
    if (!nearChosen(hy)) chosen.push(hy);
  }
  // Crops alone change only the scale: the best hypothesis on that line (theta 0, same scale both ways)
  // competes with far fewer hypotheses than the whole grid, so a weaker lattice still stands out there.
  // Scored on the fine plane, as the aspect lines are: on the grid's box-smoothed plane a quarter crop's
  // maximum could land 1.5-3% off the true scale, too far for the fold (docs/fingerprint.md, step 4).
  let crop: Hypo = { theta: 0, sx: 1, sy: 1, score: -Infinity };
  for (let a = Math.log(Math.max(sMin, cropMin)); a <= Math.log(sMax) + 1e-9; a += CROP_STEP) {
    const sc = Math.exp(a);
    const score = combScore(sp, sp.fine, fineM, period, 0, sc, sc);
    if (score > crop.score) crop = { theta: 0, sx: sc, sy: sc, score };
  }
  // The crop line's hypothesis is folded unless one already chosen is the same lattice to within the
  // grid's own resolution (half an angle step, 1% of each scale): the 5% of nearChosen would let a grid
  // hypothesis 3% off and tilted by 1.7 degrees stand in for it (kodim05's random quarter crop in --dense:
  // that one folds to sync z 3.8, the crop line's to 6.1; docs/fingerprint.md, step 4).
  if (crop.score > -Infinity && !nearChosen(crop, 0.5, 0.01)) {
    chosen.push(crop);
  }
  // A change of aspect alone keeps one axis at the no-geometry scale; on these two lines a whole picture's
  // sharp peaks are scored on the fine plane (the grid's smoothed planes flatten them), and the best is
  // folded only when it stands well clear of what unmarked pictures reach.
  const s0 = cropMin / CROP_MIN;
  let aspect: Hypo = { theta: 0, sx: 1, sy: 1, score: -Infinity };
  for (let axis = 0; axis < 2; axis++) {
    for (let a = -ASPECT_MAX; a <= ASPECT_MAX + 1e-9; a += CROP_STEP) {
      const sx = axis ? s0 * Math.exp(a) : s0;
      const sy = axis ? s0 : s0 * Math.exp(a);
      const score = combScore(sp, sp.fine, fineM, period, 0, sx, sy);
      if (score > aspect.score) aspect = { theta: 0, sx, sy, score };
    }
  }
  if (aspect.score >= p.aspectGate && !nearChosen(aspect)) {
    chosen.push(aspect);
  }
  // The rotation plane (the grid's angles, the same scale both ways within ROT_SCALE of the no-geometry
  // one: rotations cropped or on a background, borders) on the fine plane, where a whole picture's sharp
  // peaks keep their height: the grid ranks on its smoothed planes, which flatten them (kodim05 rotated by
  // 9-10 degrees and cropped to the inner rectangle: 1.5 there at the true lattice against 1.7-1.9 at
  // wrong ones, 2.6 on the fine plane). Coarse to fine like the grid: every second point each way with
  // nearest-bin lookups, each the maximum of the fine plane's 3 x 3 bins around, then the fine points around
  // the ROT_KEEP best coarse cells; the best, refined, is folded from p.rotationGate.
  let rot: Hypo = { theta: 0, sx: 1, sy: 1, score: -Infinity };
  const js: number[] = [];
  for (let j = 0; j < nA; j++) if (Math.abs(as[j]! - Math.log(s0)) <= ROT_SCALE) js.push(j);
  if (nT > 0 && js.length) {
    const cells: { i: number; j: number; score: number }[] = [];
    for (const i of coarseIndices(nT)) {
      for (const jj of coarseIndices(js.length)) {
        const j = js[jj]!;
        const score = combNearest(sp.fine, sp.nx, sp.ny, sp.notch, harm, period, cs[i]!, sn[i]!, ex[j]!, ex[j]!, true);
        if (cells.length === ROT_KEEP && !(score > cells[cells.length - 1]!.score)) continue;
        let at = cells.length;
        while (at > 0 && score > cells[at - 1]!.score) at--;
        cells.splice(at, 0, { i, j: jj, score });
        if (cells.length > ROT_KEEP) cells.pop();
      }
    }
    const seen = new Set<number>();
    for (const c of cells) {
      for (let i = Math.max(0, c.i - 1); i <= Math.min(nT - 1, c.i + 1); i++) {
        for (let jj = Math.max(0, c.j - 1); jj <= Math.min(js.length - 1, c.j + 1); jj++) {
          if (seen.has(i * nA + jj)) continue;
          seen.add(i * nA + jj);
          const j = js[jj]!;
          const score = combScoreCS(sp, sp.fine, fineM, period, cs[i]!, sn[i]!, ex[j]!, ex[j]!);
          if (score > rot.score) rot = { theta: ths[i]!, sx: ex[j]!, sy: ex[j]!, score };
        }
      }
    }
  }
  if (rot.score > -Infinity) rot = refineHypo(sp, fineM, period, rot, false);
  if (rot.score >= p.rotationGate && !nearChosen(rot)) {
    chosen.push(rot);
  }
  // The pattern search on the fine plane: free in angle and both scales, except for the crop line's
  // hypothesis, which stays on its line (one scale, theta 0): freed, the search could climb from a weak
  // quarter crop's true scale to a noise peak 1.6% off in one axis (kodim05 at 0.75,0.5: 63.0 x 64.0 for 64).
  const cands = chosen.map((hy) => {
    const { theta, sx, sy } = refineHypo(sp, fineM, period, hy, hy === crop);
    const c = Math.cos(theta);
    const s = Math.sin(theta);
    return [period * sx * c, period * sy * s, -period * sx * s, period * sy * c];
  });
  return { cands, top: topScore, aspect: aspect.score, rotation: rot.score };
}

/**
 * Resamples x (prefiltered, fw x fh) on the lattice frame and folds onto one TILE x TILE tile: integer
 * frame point (i, j) sits at centre + V (i + ox, j + oy) / period, V's columns the two period vectors.
 */
export function foldLattice(x: Float32Array, fw: number, fh: number, v: number[], period: number, ox: number, oy: number, out: Float64Array): number {
  out.fill(0);
  const cx = (fw - 1) / 2;
  const cy = (fh - 1) / 2;
  const ax = v[0]! / period,
    ay = v[1]! / period,
    bx = v[2]! / period,
    by = v[3]! / period;
  const det = ax * by - bx * ay;
  if (!(Math.abs(det) > 1e-9)) return 0;
  // Frame coordinates of the image corners give the range of (i, j).
  let imin = Infinity,
    imax = -Infinity,
    jmin = Infinity,
    jmax = -Infinity;
  for (const [px, py] of [
    [0, 0],
    [fw - 1, 0],
    [0, fh - 1],
    [fw - 1, fh - 1],
  ] as const) {
    const dx = px - cx;
    const dy = py - cy;
    const fi = (by * dx - bx * dy) / det - ox;
    const fj = (-ay * dx + ax * dy) / det - oy;
    imin = Math.min(imin, fi);
    imax = Math.max(imax, fi);
    jmin = Math.min(jmin, fj);
    jmax = Math.max(jmax, fj);
  }
  let n = 0;
  const i0 = Math.floor(imin);
  const i1 = Math.ceil(imax);
  for (let j = Math.floor(jmin); j <= Math.ceil(jmax); j++) {
    const baseX = cx + bx * (j + oy) + ax * ox;
    const baseY = cy + by * (j + oy) + ay * ox;
    const row = (j & TM) * TILE;
    for (let i = i0; i <= i1; i++) {
      const sx = baseX + ax * i;
      const sy = baseY + ay * i;
      if (!(sx >= 0 && sy >= 0 && sx <= fw - 1 && sy <= fh - 1)) continue;
      let x0 = Math.floor(sx);
      let y0 = Math.floor(sy);
      if (x0 >= fw - 1) x0 = fw - 2;
      if (y0 >= fh - 1) y0 = fh - 2;
      const fx = sx - x0;
      const fy = sy - y0;
      const p = y0 * fw + x0;
      const top = x[p]! + fx * (x[p + 1]! - x[p]!);
      const bot = x[p + fw]! + fx * (x[p + fw + 1]! - x[p + fw]!);
      out[row + (i & TM)]! += top + fy * (bot - top);
      n++;
    }
  }
  return n;
}

/** k(D u mod n) for every u of an n x n key part. */
function transformed(key: Float32Array, n: number, d: readonly number[]): Float64Array {
  const out = new Float64Array(n * n);
  const m = n - 1;
  for (let y = 0; y < n; y++) {
    for (let x = 0; x < n; x++) {
      const kx = (d[0]! * x + d[1]! * y) & m;
      const ky = (d[2]! * x + d[3]! * y) & m;
      out[y * n + x] = key[ky * n + kx]!;
    }
  }
  return out;
}

interface SyncHit {
  z: number;
  d: number;
  tx: number;
  ty: number;
  fx: number;
  fy: number;
}

/** The hit at surface index i (value z after normalising) with its sub-pixel offset from the parabola through its neighbours. */
function peakAt(pr: Float64Array, n: number, i: number, z: number, d: number): SyncHit {
  const m = n - 1;
  const ty = Math.floor(i / n);
  const tx = i % n;
  const v = pr[i]!;
  const sub = (a: number, b: number): number => parabolaPeak(a, v, b);
  return {
    z,
    d,
    tx,
    ty,
    fx: sub(pr[ty * n + ((tx - 1) & m)]!, pr[ty * n + ((tx + 1) & m)]!),
    fy: sub(pr[((ty - 1) & m) * n + tx]!, pr[((ty + 1) & m) * n + tx]!),
  };
}

/** Pushes the local maxima (no cyclic 3 x 3 neighbour higher) of a sync surface whose z (value / sd) reaches `floor`. */
function localPeaks(pr: Float64Array, n: number, sd: number, floor: number, d: number, out: SyncHit[]): void {
  const m = n - 1;
  const min = floor * sd;
  for (let i = 0; i < n * n; i++) {
    const v = pr[i]!;
    if (!(v >= min)) continue;
    const ty = Math.floor(i / n);
    const tx = i % n;
    let top = true;
    for (let ey = -1; ey <= 1 && top; ey++) {
      for (let ex = -1; ex <= 1; ex++) {
        if ((ex || ey) && pr[((ty + ey) & m) * n + ((tx + ex) & m)]! > v) {
          top = false;
          break;
        }
      }
    }
    if (top) out.push(peakAt(pr, n, i, v / sd, d));
  }
}

/** Whether two alignments are one: same symmetry, shifts within 1 px (cyclic), lattices within SAME_AS_IDENTITY. */
function sameAlignment(a: { hit: SyncHit; v: number[] }, b: { hit: SyncHit; v: number[] }, period: number): boolean {
  const near = (s: number, t: number): boolean => {
    const e = (s - t) & (period - 1);
    return e <= 1 || e >= period - 1;
  };
  if (a.hit.d !== b.hit.d || !near(a.hit.tx, b.hit.tx) || !near(a.hit.ty, b.hit.ty)) return false;
  const len = Math.hypot(b.v[0]!, b.v[1]!);
  for (let i = 0; i < 4; i++) if (Math.abs(a.v[i]! - b.v[i]!) >= SAME_AS_IDENTITY * len) return false;
  return true;
}

/**
 * The `count` best of `peaks` by sync z, best first, none the same alignment as one already `taken` or as
 * a better one picked here: the runner-ups (the peaks of every symmetry of every lattice the search folded,
 * the chosen alignment taken) and the identity looks (the identity symmetry's peaks on the chosen lattice,
 * the chosen alignment and the runner-ups taken). A function of the picture and part A only (ties keep the
 * search's order).
 */
function runnerPeaks(
  peaks: { hit: SyncHit; v: number[] }[],
  taken: { hit: SyncHit; v: number[] }[],
  count: number,
  period: number,
): { hit: SyncHit; v: number[] }[] {
  const order = peaks.slice().sort((a, b) => b.hit.z - a.hit.z);
  const out: { hit: SyncHit; v: number[] }[] = [];
  for (const pk of order) {
    if (out.length >= count) break;
    if (taken.some((o) => sameAlignment(pk, o, period)) || out.some((o) => sameAlignment(pk, o, period))) continue;
    out.push(pk);
  }
  return out;
}

/**
 * Correlates a period x period fold with part A under each symmetry: corr_D(t) = sum_u F(u) W_D(u + t),
 * W the key part A with each frequency's amplitude raised to the power 0.25. Most of A's power sits in the
 * template's 24 frequencies, so this leans towards them as a matched filter would, only less: a
 * phase-only filter gave every frequency of the host the same say (a weak mark was lost in it), the
 * matched filter lets two template peaks that a wrong lattice happens to fold coherently (an aspect
 * change of 3/4 maps harmonic 3 onto 4) pass for a mark, and its few frequencies give unmarked pictures
 * a heavier tail. Measured on the 18 photographs (bench attacks, 3 keys): at 0.25 unmarked pictures
 * reach the refinement threshold as often as with phase only (26 of 972 trials, 27 before), at 0.5 and 1
 * more. Sync z is the peak over the surface's noise level, sqrt(sum_k |W_D(k)|^2 Q(k)) (Parseval: the
 * variance the surface has at any shift when the fold is noise of power Q), with Q(k) the fold's power |F(k)|^2, except at the template's frequencies, where Q
 * is the mean power of their other 3 x 3 neighbours: the mark's own power there is not noise, so a strong
 * mark is not capped by the key's sidelobes. No key material but A and its template's frequencies is read.
 */
class SyncA {
  private readonly n: number;
  private readonly specs: { re: Float64Array; im: Float64Array; w2: Float64Array }[] = [];
  /** 1 at the template's frequencies (the same set under every symmetry: its orbits are symmetric). */
  private readonly tpl: Uint8Array;
  constructor(a: Float32Array, n: number, harm: Float64Array, power: number) {
    this.n = n;
    const m = n - 1;
    this.tpl = new Uint8Array(n * n);
    for (let i = 0; i < harm.length; i += 2) {
      this.tpl[(harm[i + 1]! & m) * n + (harm[i]! & m)] = 1;
      this.tpl[(-harm[i + 1]! & m) * n + (-harm[i]! & m)] = 1;
    }
    for (const d of DIHEDRAL) {
      const re = transformed(a, n, d);
      const im = new Float64Array(n * n);
      fft2d(re, im, n, -1);
      // A's phase with |A(k)|^0.25: between the matched filter (power 1), best against a weak mark,
      // and phase only (power 0), which no small set of frequencies can dominate (see the class comment).
      const w2 = new Float64Array(n * n);
      for (let i = 0; i < n * n; i++) {
        // |A|^(power - 1) = (|A|^2)^((power - 1) / 2), as the native core computes it.
        const a2 = re[i]! * re[i]! + im[i]! * im[i]!;
        const k = a2 > 0 ? a2 ** (0.5 * (power - 1)) : 0;
        re[i]! *= k;
        im[i]! *= k;
        w2[i] = re[i]! * re[i]! + im[i]! * im[i]!;
      }
      this.specs.push({ re, im, w2 });
    }
  }
  /** The best peak over the symmetries (or `only`); with `peaks`, also pushes every local maximum from z `floor` (runnerPeaks). */
  best(f: Float64Array, only = -1, peaks?: SyncHit[], floor = Infinity): SyncHit {
    const n = this.n;
    const n2 = n * n;
    const m = n - 1;
    const fr = Float64Array.from(f);
    const fi = new Float64Array(n2);
    fft2d(fr, fi, n, -1);
    // The fold's power as the host's, the template's frequencies from their neighbours.
    const q = new Float64Array(n2);
    for (let k = 0; k < n2; k++) q[k] = fr[k]! * fr[k]! + fi[k]! * fi[k]!;
    const qn = Float64Array.from(q);
    for (let k = 0; k < n2; k++) {
      if (!this.tpl[k]) continue;
      const ky = Math.floor(k / n);
      const kx = k % n;
      let acc = 0;
      let cnt = 0;
      for (let ey = -1; ey <= 1; ey++) {
        for (let ex = -1; ex <= 1; ex++) {
          const j = ((ky + ey) & m) * n + ((kx + ex) & m);
          if (this.tpl[j]) continue;
          acc += q[j]!;
          cnt++;
        }
      }
      if (cnt) qn[k] = acc / cnt;
    }
    let hit: SyncHit = { z: -Infinity, d: 0, tx: 0, ty: 0, fx: 0, fy: 0 };
    const pr = new Float64Array(n2);
    const pi = new Float64Array(n2);
    for (let d = only < 0 ? 0 : only; d < (only < 0 ? 8 : only + 1); d++) {
      const s = this.specs[d]!;
      // IFFT(conj(F) S) = sum_u F(u) S(u + t)
      let noise = 0;
      for (let i = 0; i < n2; i++) {
        pr[i] = fr[i]! * s.re[i]! + fi[i]! * s.im[i]!;
        pi[i] = fr[i]! * s.im[i]! - fi[i]! * s.re[i]!;
        noise += s.w2[i]! * qn[i]!;
      }
      fft2d(pr, pi, n, 1);
      let best = 0;
      for (let i = 1; i < n2; i++) if (pr[i]! > pr[best]!) best = i;
      const sd = Math.sqrt(noise);
      const z = sd > 0 ? pr[best]! / sd : 0;
      if (z > hit.z) hit = peakAt(pr, n, best, z, d);
      if (peaks && sd > 0) localPeaks(pr, n, sd, floor, d, peaks);
    }
    return hit;
  }
}

export function detectCore2(input: Core2Input): Core2Output {
  const { width: w, height: h, params: p } = input;
  const period = p.period;
  const y = luma(input.pixels, w, h, input.channels);
  // Every lattice is folded from the picture prefiltered at its own resolution, however large the period;
  // version 2 reads the high-pass over the local energy, version 1's prefilter is made in the same pass.
  const x = new Float32Array(w * h);
  const x1 = prefilter(y, w, h, p as never, { plane: x, floor: p.energyFloor });
  const sync = new SyncA(input.a, period, input.harmonics, p.syncPower);
  const fold = new Float64Array(T2);
  const small = new Float64Array(period * period);

  // Local maxima of the search's sync surfaces (not the refinement's), for the runner-up alignments.
  const peaks: { hit: SyncHit; v: number[] }[] = [];
  let collect = p.runners > 0;
  const trySync = (v: number[], only = -1): { hit: SyncHit; v: number[] } => {
    foldLattice(x, w, h, v, period, 0, 0, fold);
    small.fill(0);
    for (let j = 0; j < TILE; j++) for (let i = 0; i < TILE; i++) small[(j % period) * period + (i % period)]! += fold[j * TILE + i]!;
    const found: SyncHit[] = [];
    const hit = sync.best(small, only, collect ? found : undefined, p.runnerZ);
    for (const f of found) peaks.push({ hit: f, v });
    return { hit, v };
  };

  const p0 = (period * Math.min(w, h)) / input.workShort;
  let best = trySync([p0, 0, 0, p0]);
  // The chosen lattice's period fold, for the identity looks (step 10) to read without folding again.
  const bestSmall = Float64Array.from(small);
  let identity = true;
  let tier = 1;
  let tried = 1;
  let combScore = -Infinity;
  let aspectScore = -Infinity;
  let rotationScore = -Infinity;
  if (best.hit.z < p.fastZ) {
    tier = 2;
    const found = latticeCandidates(x, w, h, input.native === 1, input.harmonics, p, (CROP_MIN * p0) / period);
    const cands = found.cands;
    combScore = found.top;
    aspectScore = found.aspect;
    rotationScore = found.rotation;
    const v0 = [p0, 0, 0, p0];
    for (const v of cands) {
      // A hypothesis within 2% of the no-geometry one is that one, already tried: folded again it could
      // win on noise with a slightly wrong period (the refinement, which would correct it, needs z >= refineZ).
      let off = 0;
      for (let i = 0; i < 4; i++) off = Math.max(off, Math.abs(v[i]! - v0[i]!));
      if (off < p.sameAsIdentity * p0) continue;
      tried++;
      const r = trySync(v);
      if (r.hit.z > best.hit.z) {
        best = r;
        bestSmall.set(small);
        identity = false;
      }
    }
  }

  // Coherent refinement of a lattice: small linear maps (I + E) V that raise the sync z (same symmetry).
  // The spectrum's estimate is good to about 1%; the fold wants better over many periods. `gated`: only
  // from sync z p.refineZ (unmarked pictures rarely get there; the second look below refines without it).
  const refine = (start: { hit: SyncHit; v: number[] }, gated: boolean): { hit: SyncHit; v: number[] } => {
    let at = start;
    for (const eps of [0.004, 0.0015]) {
      if (gated && at.hit.z < p.refineZ) break;
      for (let iter = 0; iter < 3; iter++) {
        let moved = false;
        for (let e = 0; e < 8; e++) {
          const k = (e & 1 ? -1 : 1) * eps;
          const r = e >> 1;
          const [v0, v1, v2, v3] = at.v as [number, number, number, number];
          // E has one non-zero entry: row r >> 1, column r & 1, acting on the columns (v0, v1) and (v2, v3).
          const row = r >> 1;
          const col = r & 1;
          // (I + E) V, V's columns (v0, v1) and (v2, v3).
          const ex = [0, 0, 0, 0];
          ex[row * 2 + col] = k;
          const cand = [v0 + ex[0]! * v0 + ex[1]! * v1, v1 + ex[2]! * v0 + ex[3]! * v1, v2 + ex[0]! * v2 + ex[1]! * v3, v3 + ex[2]! * v2 + ex[3]! * v3];
          tried++;
          const r2 = trySync(cand, at.hit.d);
          if (r2.hit.z > at.hit.z) {
            at = r2;
            moved = true;
          }
        }
        if (!moved) break;
      }
    }
    return at;
  };

  collect = false;
  // The no-geometry lattice is exact for every copy without geometry; refining it would only chase noise.
  const unrefined = best;
  if (tier === 2 && !identity) best = refine(best, true);
  const main = countAt(input, x, best, period, fold);
  // Hypotheses of the alignment proper (the second look's folds, which the count gates, are not counted).
  const candidates = tried;

  // Other tile phases of the chosen alignment (part B picks one of 16 and is weak on small crops), only
  // when the sync is not at the noise level: part B's next p.phaseLooks choices, in its order (where another
  // phase held the mark it was always B's 2nd or 3rd; docs/fingerprint.md, step 7).
  let phaseCells: Float64Array = new Float64Array(0);
  if (best.hit.z >= p.phasesZ) {
    const per = TILE / p.cell;
    const looks = main.order.slice(1, 1 + p.phaseLooks);
    phaseCells = new Float64Array(p.phaseLooks * per * per);
    looks.forEach((q, i) => phaseCells.set(shiftedCells(main.g, input.c, phaseOffset(DIHEDRAL[best.hit.d]!, q, period), period, p.cell), i * per * per));
  }

  // Second look: when the lattice came from the spectrum and was not refined (sync z under refineZ) but
  // the count already leans towards a mark, refine it anyway and count again. Which hypotheses may be
  // tested does not depend on C (the refined lattice is a function of the picture and A); only whether
  // this one is looked at does, which the union bound of the decision covers (docs/fingerprint.md).
  // When the refinement did run and moved the lattice, the second look is the other way round: the
  // unrefined lattice is counted too (the refinement can chase A's noise and lose the count).
  let refinedCells: Float64Array = new Float64Array(0);
  let refinedSyncZ = 0;
  if (tier === 2 && !identity && unrefined.hit.z < p.refineZ && selfNormalised(main.cells) >= p.secondT) {
    const again = refine(unrefined, false);
    if (again !== unrefined) {
      refinedCells = countAt(input, x, again, period, fold).cells;
      refinedSyncZ = again.hit.z;
    }
  } else if (best !== unrefined) {
    refinedCells = countAt(input, x, unrefined, period, fold).cells;
    refinedSyncZ = unrefined.hit.z;
  }

  // Runner-up alignments: when the search's best sync z is under refineZ (an uncertain alignment), the
  // next p.runners distinct peaks of its surfaces from sync z p.runnerZ are counted too, each at its own
  // best tile phase; the decision pays for p.runners tests whether or not they run (docs/fingerprint.md).
  const runnerZ = new Float64Array(p.runners);
  // Identity looks: then the best peaks of the identity symmetry's surface on the chosen lattice (not the
  // chosen alignment, not a runner-up), each at its own best tile phase; the decision pays for
  // p.identityLooks tests whether or not they run. Crops, borders, resizes and small rotations keep the
  // picture's symmetry, and on a weak quarter crop the template, which every symmetry partly matches, can
  // put several wrong symmetries above the true one (docs/fingerprint.md, step 10).
  const identityZ = new Float64Array(p.identityLooks);
  /** Counts each alignment of `list` into `slots` blocks of cells (zeros where none; empty for none), its sync z into `zs`. */
  const countEach = (list: { hit: SyncHit; v: number[] }[], slots: number, zs: Float64Array): Float64Array => {
    if (!list.length) return new Float64Array(0);
    const per = (TILE / p.cell) ** 2;
    const cells = new Float64Array(slots * per);
    list.forEach((r, i) => {
      cells.set(countAt(input, x, r, period, fold).cells, i * per);
      zs[i] = r.hit.z;
    });
    return cells;
  };
  let runnerCells: Float64Array = new Float64Array(0);
  let identityCells: Float64Array = new Float64Array(0);
  const taken = [unrefined];
  const uncertain = tier === 2 && unrefined.hit.z < p.refineZ;
  if (uncertain) {
    const picked = runnerPeaks(peaks, taken, p.runners, period);
    runnerCells = countEach(picked, p.runners, runnerZ);
    taken.push(...picked);
  }
  // The identity looks run when the alignment is uncertain, and also when the search chose another
  // symmetry than the identity (a crop does not flip the picture: step 10).
  if (uncertain || (tier === 2 && unrefined.hit.d !== 0)) {
    if (p.identityLooks > 0) {
      const found: SyncHit[] = [];
      sync.best(bestSmall, 0, found, -Infinity);
      const surface = found.map((hit) => ({ hit, v: unrefined.v }));
      const looks = runnerPeaks(surface, taken, p.identityLooks, period);
      identityCells = countEach(looks, p.identityLooks, identityZ);
      taken.push(...looks);
    }
  }
  // Lattice looks: the best peak of each of the next p.latticeLooks lattices the search folded (other than
  // the chosen one), by that peak's sync z, from p.latticeLookZ, whatever the chosen alignment's sync z; the
  // decision pays for p.latticeLooks tests whether or not they run. A wrong lattice that folds several of
  // the template's peaks coherently can out-sync the true one on a weak quarter crop (docs/fingerprint.md, step 11).
  const latticeZ = new Float64Array(p.latticeLooks);
  let latticeCells: Float64Array = new Float64Array(0);
  if (tier === 2 && p.latticeLooks > 0) {
    const seen: number[][] = [unrefined.v];
    const bests: { hit: SyncHit; v: number[] }[] = [];
    for (const pk of peaks.slice().sort((u, w) => w.hit.z - u.hit.z)) {
      if (pk.hit.z < p.latticeLookZ) break;
      if (seen.some((v) => v.every((e, i) => e === pk.v[i]))) continue;
      seen.push(pk.v);
      bests.push(pk);
    }
    latticeCells = countEach(runnerPeaks(bests, taken, p.latticeLooks, period), p.latticeLooks, latticeZ);
  }

  input.keepPrefiltered?.set(x1);
  return {
    lattice: Float64Array.from(best.v),
    dihedral: best.hit.d,
    dx: main.dx,
    dy: main.dy,
    syncZ: best.hit.z,
    phaseZ: main.phaseZ,
    tier,
    candidates,
    combScore,
    aspectScore,
    rotationScore,
    cells: main.cells,
    phaseCells,
    refinedCells,
    refinedSyncZ,
    runnerCells,
    runnerZ,
    identityCells,
    identityZ,
    latticeCells,
    latticeZ,
  };
}

/** T = sum c / sqrt(sum c^2) of a set of cells (0 when all are 0). */
function selfNormalised(cells: Float64Array): number {
  let s = 0;
  let q = 0;
  for (const c of cells) {
    s += c;
    q += c * c;
  }
  return q > 0 ? s / Math.sqrt(q) : 0;
}

/**
 * The fold in key coordinates of tile phase (tx, ty) under D: g[D (u + t)] = fold[u] (frame point u carries
 * key position D (u + t)). Tile phase q = (qx, qy) adds D (qx, qy) period to every key position: whole
 * blocks of `period`, so each phase below is a few contiguous passes over g and the key.
 */
function keyFrame(fold: Float64Array, D: readonly number[], tx: number, ty: number): Float64Array {
  const g = new Float64Array(T2);
  for (let j = 0; j < TILE; j++) {
    const uy = j + ty;
    for (let i = 0; i < TILE; i++) {
      const ux = i + tx;
      g[((D[2]! * ux + D[3]! * uy) & TM) * TILE + ((D[0]! * ux + D[1]! * uy) & TM)] = fold[j * TILE + i]!;
    }
  }
  return g;
}

/** Key offset e = D (qx, qy) period (mod TILE) of tile phase q. */
function phaseOffset(D: readonly number[], q: number, period: number): [number, number] {
  const reps = TILE / period;
  const qx = (q % reps) * period;
  const qy = Math.floor(q / reps) * period;
  return [(D[0]! * qx + D[1]! * qy) & TM, (D[2]! * qx + D[3]! * qy) & TM];
}

/** acc[k'x] += g[k' - e] key[k'] over the key rows k'y in [y0, y1) (the native core's order). */
function accumulateRows(g: Float64Array, key: Float32Array, ex: number, ey: number, period: number, y0: number, y1: number, acc: Float64Array): void {
  for (let ky = y0; ky < y1; ky++) {
    const gr = ((ky - ey) & TM) * TILE;
    const kr = ky * TILE;
    for (let kx0 = 0; kx0 < TILE; kx0 += period) {
      const gs = gr + ((kx0 - ex) & TM);
      for (let t = 0; t < period; t++) acc[kx0 + t]! += g[gs + t]! * key[kr + kx0 + t]!;
    }
  }
}

/** sum_k g[k] key[k + e]: the fold's correlation with a key part at tile phase e. */
function shiftedDot(g: Float64Array, key: Float32Array, e: [number, number], period: number): number {
  const acc = new Float64Array(TILE);
  accumulateRows(g, key, e[0], e[1], period, 0, TILE, acc);
  let s = 0;
  for (let i = 0; i < TILE; i++) s += acc[i]!;
  return s;
}

/** Count cells at tile phase e: cell (k + e) collects g[k] c[k + e]. */
function shiftedCells(g: Float64Array, c: Float32Array, e: [number, number], period: number, cell: number): Float64Array {
  const per = TILE / cell;
  const cells = new Float64Array(per * per);
  const acc = new Float64Array(TILE);
  for (let cy = 0; cy < per; cy++) {
    acc.fill(0);
    accumulateRows(g, c, e[0], e[1], period, cy * cell, (cy + 1) * cell, acc);
    for (let cx = 0; cx < per; cx++) {
      let s = 0;
      for (let t = 0; t < cell; t++) s += acc[cx * cell + t]!;
      cells[cy * per + cx] = s;
    }
  }
  return cells;
}

/**
 * Folds again at an alignment with its sub-pixel shift (into `fold`), picks the tile phase with part B
 * and counts the cells there.
 */
function countAt(
  input: Core2Input,
  x: Float32Array,
  best: { hit: SyncHit; v: number[] },
  period: number,
  fold: Float64Array,
): { cells: Float64Array; g: Float64Array; order: number[]; dx: number; dy: number; phaseZ: number } {
  const reps = TILE / period;
  const { d, tx, ty, fx, fy } = best.hit;
  foldLattice(x, input.width, input.height, best.v, period, -fx, -fy, fold);
  const D = DIHEDRAL[d]!;
  const g = keyFrame(fold, D, tx, ty);
  const scores: number[] = [];
  for (let k = 0; k < reps * reps; k++) scores.push(shiftedDot(g, input.b, phaseOffset(D, k, period), period));
  // Tile phases by part B's score, best first (ties: lower phase first); B's choice is the first.
  const order = scores.map((_, i) => i).sort((i, j) => scores[j]! - scores[i]! || i - j);
  const q = order[0]!;
  let m = 0;
  let sq = 0;
  for (const s of scores) m += s / scores.length;
  for (const s of scores) sq += (s - m) ** 2;
  const phaseZ = sq > 0 ? (scores[q]! - m) / Math.sqrt(sq / scores.length) : 0;
  const sx = tx + (q % reps) * period;
  const sy = ty + Math.floor(q / reps) * period;
  return { cells: shiftedCells(g, input.c, phaseOffset(D, q, period), period, input.params.cell), g, order, dx: sx + fx, dy: sy + fy, phaseZ };
}
