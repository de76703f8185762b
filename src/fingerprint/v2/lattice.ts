/**
 * Version 2's lattice search, step 2: hypotheses of the geometry (angle and two scales) scored by the comb
 * of the template's harmonics on the whitened spectrum (spectrum.ts), coarse to fine, and refined by a
 * pattern search. No key material is read but the template's frequencies.
 */
import { type Spectrum, onGrid, specAt, whitenedSpectrum } from './spectrum.js';
import type { Core2Params } from './types.js';

/** Log step of the crop-only scale line of the lattice search. */
const CROP_STEP = Math.log(1.005);
/** Max filter radius (bins) of the plane the coarse pass of the lattice grid reads. */
const POOL_RADIUS = 1;
/** Coarse cells of the lattice grid whose fine points are scored. */
const COARSE_KEEP = 32;
/** The crop line starts at this times the no-geometry scale (a crop only enlarges the period). */
export const CROP_MIN = 0.98;
/** Below the gate, grid hypotheses are tried from this times the no-geometry scale up. */
const GATED_SCALE_MIN = 0.85;
/** The aspect lines: one axis at the no-geometry scale, the other within this factor of it either way. */
const ASPECT_MAX = Math.log(1.36);
/** The rotation plane: scales within this factor of the no-geometry one either way (log). */
const ROT_SCALE = Math.log(1.45);
/** Coarse cells of the rotation plane whose fine points are scored. */
const ROT_KEEP = 4;

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
  // maximum could land 1.5-3% off the true scale, too far for the fold (bench/RESULTS.md, "Fingerprint", step 4).
  let crop: Hypo = { theta: 0, sx: 1, sy: 1, score: -Infinity };
  for (let a = Math.log(Math.max(sMin, cropMin)); a <= Math.log(sMax) + 1e-9; a += CROP_STEP) {
    const sc = Math.exp(a);
    const score = combScore(sp, sp.fine, fineM, period, 0, sc, sc);
    if (score > crop.score) crop = { theta: 0, sx: sc, sy: sc, score };
  }
  // The crop line's hypothesis is folded unless one already chosen is the same lattice to within the
  // grid's own resolution (half an angle step, 1% of each scale): the 5% of nearChosen would let a grid
  // hypothesis 3% off and tilted by 1.7 degrees stand in for it (kodim05's random quarter crop in --dense:
  // that one folds to sync z 3.8, the crop line's to 6.1; bench/RESULTS.md, "Fingerprint", step 4).
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
