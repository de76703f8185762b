/**
 * Version 1's detection core in TypeScript (frozen: version 1 no longer embeds; marks in the wild are
 * detected as they always were). Resample-and-fold over a scale search, sync correlation with the key's
 * sync part, and the per-cell count. native/src/v1-core.cc is a line-by-line port; tests hold the two to
 * the tolerance stated in docs/fingerprint.md.
 */
import { fft2d } from '../common/fft.js';
import { luma, parabolaPeak, prefilter } from '../common/filters.js';
import { TILE } from '../params.js';
import type { CoreInput, CoreOutput } from './types.js';

const T2 = TILE * TILE;
const MASK = TILE - 1;

/** One resampling axis: for each output index, the left source index and the weight of the right one. */
interface Axis {
  start: number;
  idx: Int32Array;
  frac: Float32Array;
}

/** Output u samples source position c + (u - off - c*s)/s about the centre c; only in-range samples are kept. */
function axis(n: number, s: number, off: number): Axis {
  const c = (n - 1) / 2;
  const outN = Math.ceil(n * s) + 2;
  const idx: number[] = [];
  const frac: number[] = [];
  let start = -1;
  for (let u = 0; u < outN; u++) {
    const b = c + (u - off - c * s) / s;
    if (b < 0 || b > n - 1) continue;
    if (start < 0) start = u;
    let i = Math.floor(b);
    if (i >= n - 1) i = n - 2;
    idx.push(i);
    frac.push(b - i);
  }
  return { start: Math.max(0, start), idx: Int32Array.from(idx), frac: Float32Array.from(frac) };
}

/** Bilinear resampling of x by scale s (with sub-pixel offset), summed onto one n x n tile (n a power of two). */
export function fold(x: Float32Array, w: number, h: number, s: number, ox: number, oy: number, out: Float64Array, n = TILE): void {
  const mask = n - 1;
  out.fill(0);
  const ax = axis(w, s, ox);
  const ay = axis(h, s, oy);
  const nx = ax.idx.length;
  for (let j = 0; j < ay.idx.length; j++) {
    const r0 = ay.idx[j]! * w;
    const fy = ay.frac[j]!;
    const row = ((ay.start + j) & mask) * n;
    for (let i = 0; i < nx; i++) {
      const x0 = r0 + ax.idx[i]!;
      const fx = ax.frac[i]!;
      const top = x[x0]! + fx * (x[x0 + 1]! - x[x0]!);
      const bot = x[x0 + w]! + fx * (x[x0 + w + 1]! - x[x0 + w]!);
      out[row + ((ax.start + i) & mask)]! += top + fy * (bot - top);
    }
  }
}

/** Half resolution (2 x 2 means in float, as the native core; an odd last row or column is dropped). */
export function halfOf(x: Float32Array, w: number, h: number): { x: Float32Array; w: number; h: number } {
  const hw = w >> 1;
  const hh = h >> 1;
  const out = new Float32Array(hw * hh);
  const f = Math.fround;
  for (let y = 0; y < hh; y++) {
    const a = 2 * y * w;
    const b = a + w;
    for (let i = 0; i < hw; i++) out[y * hw + i] = 0.25 * f(f(x[a + 2 * i]! + x[a + 2 * i + 1]!) + f(x[b + 2 * i]! + x[b + 2 * i + 1]!));
  }
  return { x: out, w: hw, h: hh };
}

interface Peak {
  z: number;
  dx: number;
  dy: number;
  /** Sub-pixel refinement of the peak, in [-0.5, 0.5]. */
  fx: number;
  fy: number;
}

/** Correlation-surface peak (n x n) in RMS units, with a parabolic sub-pixel refinement. */
function peakOf(c: Float64Array, n: number): Peak {
  const mask = n - 1;
  let best = 0;
  let sq = 0;
  for (let i = 0; i < n * n; i++) {
    sq += c[i]! * c[i]!;
    if (c[i]! > c[best]!) best = i;
  }
  const rms = Math.sqrt(sq / (n * n));
  const dy = (best / n) | 0;
  const dx = best & mask;
  const v = c[best]!;
  const sub = (m: number, p: number): number => parabolaPeak(m, v, p);
  const fx = sub(c[dy * n + ((dx - 1) & mask)]!, c[dy * n + ((dx + 1) & mask)]!);
  const fy = sub(c[((dy - 1) & mask) * n + dx]!, c[((dy + 1) & mask) * n + dx]!);
  return { z: rms > 0 ? v / rms : 0, dx, dy, fx, fy };
}

/**
 * Cyclic cross-correlations corr[d] = sum_u F[u] S[u + d] of two real n x n folds in one complex FFT pair:
 * with Z = FFT(a + i b), IFFT(S(k) Z(-k)) = corr_a + i corr_b.
 */
class SyncCorrelator {
  private readonly specRe: Float64Array;
  private readonly specIm: Float64Array;
  private readonly re: Float64Array;
  private readonly im: Float64Array;
  private readonly pr: Float64Array;
  private readonly pi: Float64Array;
  constructor(
    sync: Float32Array,
    private readonly n: number,
  ) {
    const n2 = n * n;
    this.specRe = new Float64Array(n2);
    this.specIm = new Float64Array(n2);
    this.re = new Float64Array(n2);
    this.im = new Float64Array(n2);
    this.pr = new Float64Array(n2);
    this.pi = new Float64Array(n2);
    for (let i = 0; i < n2; i++) this.specRe[i] = sync[i]!;
    fft2d(this.specRe, this.specIm, n, -1);
  }
  correlate(a: Float64Array, b: Float64Array | undefined): [Peak, Peak | undefined] {
    const { re, im, pr, pi, specRe, specIm, n } = this;
    const mask = n - 1;
    re.set(a);
    if (b) im.set(b);
    else im.fill(0);
    fft2d(re, im, n, -1);
    for (let v = 0; v < n; v++) {
      const nv = (n - v) & mask;
      for (let u = 0; u < n; u++) {
        const i = v * n + u;
        const j = nv * n + ((n - u) & mask);
        pr[i] = re[j]! * specRe[i]! - im[j]! * specIm[i]!;
        pi[i] = re[j]! * specIm[i]! + im[j]! * specRe[i]!;
      }
    }
    fft2d(pr, pi, n, 1);
    return [peakOf(pr, n), b ? peakOf(pi, n) : undefined];
  }
}

/** The sync correlators of one key tile (full and half resolution), built once per tile object. */
const correlators = new WeakMap<Float32Array, { full: SyncCorrelator; half: SyncCorrelator }>();
function correlatorsFor(sync: Float32Array): { full: SyncCorrelator; half: SyncCorrelator } {
  let c = correlators.get(sync);
  if (!c) {
    c = { full: new SyncCorrelator(sync, TILE), half: new SyncCorrelator(halfOf(sync, TILE, TILE).x, TILE / 2) };
    correlators.set(sync, c);
  }
  return c;
}

/** The whole detection core for one image: one call, plain inputs, plain outputs. */
export function detectCore(input: CoreInput): CoreOutput {
  const { width: w, height: h, params } = input;
  const x = input.prefiltered ?? prefilter(luma(input.pixels, w, h, input.channels), w, h, params);

  const sync = correlatorsFor(input.sync);
  const fa = new Float64Array(T2);
  const fb = new Float64Array(T2);
  let bestS = 1;
  let best: Peak = { z: -Infinity, dx: 0, dy: 0, fx: 0, fy: 0 };
  // Scales are evaluated in pairs (one FFT pair for two folds); candidates compare in list order.
  const consider = (scales: number[]): void => {
    for (let i = 0; i < scales.length; i += 2) {
      fold(x, w, h, scales[i]!, 0, 0, fa);
      const two = i + 1 < scales.length;
      if (two) fold(x, w, h, scales[i + 1]!, 0, 0, fb);
      const [pa, pb] = sync.full.correlate(fa, two ? fb : undefined);
      if (pa.z > best.z) {
        best = pa;
        bestS = scales[i]!;
      }
      if (pb && pb.z > best.z) {
        best = pb;
        bestS = scales[i + 1]!;
      }
    }
  };
  consider([1]);
  let coarseZ = best.z;
  let tier = 1;
  if (best.z < params.tier1Z) {
    tier = 2;
    const steps = Math.round((1 - params.scaleMin) / params.scaleStep);
    const coarse: number[] = [];
    for (let i = 1; i <= steps; i++) coarse.push(1 - i * params.scaleStep);
    // The coarse scales are ranked at half resolution (a quarter of the work per scale; the key's band lies
    // mostly below the half-resolution Nyquist); only the best params.fullScales are folded at full
    // resolution, then refined there.
    const half = halfOf(x, w, h);
    const hn = TILE / 2;
    const ha = new Float64Array(hn * hn);
    const hb = new Float64Array(hn * hn);
    const ranked: { z: number; i: number }[] = [];
    for (let i = 0; i < coarse.length; i += 2) {
      fold(half.x, half.w, half.h, coarse[i]!, 0, 0, ha, hn);
      const two = i + 1 < coarse.length;
      if (two) fold(half.x, half.w, half.h, coarse[i + 1]!, 0, 0, hb, hn);
      const [pa, pb] = sync.half.correlate(ha, two ? hb : undefined);
      ranked.push({ z: pa.z, i });
      if (pb) ranked.push({ z: pb.z, i: i + 1 });
    }
    ranked.sort((a, b) => b.z - a.z); // stable: equal z keeps list order
    consider(ranked.slice(0, params.fullScales).map((r) => coarse[r.i]!));
    coarseZ = best.z;
    // The refinement sharpens an alignment that is there: below refineZ (unmarked pictures) it is skipped.
    if (best.z >= params.refineZ) {
      for (const step of [params.scaleStep / 2, params.scaleStep / 4]) {
        const centre = bestS;
        consider([centre - step, centre + step]);
      }
    }
  }
  const f = fa;

  // Re-fold at the sub-pixel alignment, then correlate each count cell with its own key material.
  fold(x, w, h, bestS, best.fx, best.fy, f);
  const cell = params.cell;
  const per = TILE / cell;
  const cells = new Float64Array(per * per);
  for (let ky = 0; ky < TILE; ky++) {
    const fr = ((ky - best.dy) & MASK) * TILE;
    const crow = ky * TILE;
    const cellRow = ((ky / cell) | 0) * per;
    for (let kx = 0; kx < TILE; kx++) {
      cells[cellRow + ((kx / cell) | 0)]! += f[fr + ((kx - best.dx) & MASK)]! * input.count[crow + kx]!;
    }
  }
  return { scale: bestS, dx: best.dx + best.fx, dy: best.dy + best.fy, syncZ: best.z, coarseZ, tier, cells };
}
