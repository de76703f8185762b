/**
 * TypeScript implementation of the detection hot loops: luma, prefilter, resample-and-fold, sync
 * correlation, scale search and the per-cell count. native/src/core.cc is a line-by-line port; tests
 * hold the two to the tolerance stated in docs/fingerprint.md.
 */
import { CELL, CELLS, SCALE_MIN, SCALE_STEP, TIER1_Z, TILE } from './params.js';
import type { CoreInput, CoreOutput } from './core-types.js';
import { fft2d } from './fft.js';

const SIGMA_HIGHPASS = 2.5;
const SIGMA_LOCAL = 4;
/** Floor of the local energy (luma units squared), so that flat areas are not blown up. */
const LOCAL_FLOOR = 1;
const T2 = TILE * TILE;
const MASK = TILE - 1;

/** BT.601 luma of 8-bit interleaved pixels (first channel alone for grey). */
export function luma(px: Uint8Array, w: number, h: number, ch: number): Float32Array {
  const n = w * h;
  const y = new Float32Array(n);
  if (ch >= 3) {
    for (let i = 0, p = 0; i < n; i++, p += ch) y[i] = 0.299 * px[p]! + 0.587 * px[p + 1]! + 0.114 * px[p + 2]!;
  } else {
    for (let i = 0, p = 0; i < n; i++, p += ch) y[i] = px[p]!;
  }
  return y;
}

/** Normalised Gaussian taps, radius ceil(3 sigma). */
export function gaussianTaps(sigma: number): Float32Array {
  const r = Math.ceil(3 * sigma);
  const t = new Float32Array(2 * r + 1);
  let s = 0;
  for (let i = -r; i <= r; i++) s += Math.exp((-i * i) / (2 * sigma * sigma));
  for (let i = -r; i <= r; i++) t[i + r] = Math.exp((-i * i) / (2 * sigma * sigma)) / s;
  return t;
}

/** Separable Gaussian blur with replicated borders. */
export function blur(src: Float32Array, w: number, h: number, taps: Float32Array): Float32Array {
  const r = (taps.length - 1) >> 1;
  const tmp = new Float32Array(w * h);
  const out = new Float32Array(w * h);
  for (let y = 0; y < h; y++) {
    const row = y * w;
    for (let x = 0; x < w; x++) {
      let s = 0;
      for (let k = -r; k <= r; k++) {
        const xx = x + k < 0 ? 0 : x + k >= w ? w - 1 : x + k;
        s += taps[k + r]! * src[row + xx]!;
      }
      tmp[row + x] = s;
    }
  }
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      let s = 0;
      for (let k = -r; k <= r; k++) {
        const yy = y + k < 0 ? 0 : y + k >= h ? h - 1 : y + k;
        s += taps[k + r]! * tmp[yy * w + x]!;
      }
      out[y * w + x] = s;
    }
  }
  return out;
}

/** High-pass (minus a Gaussian) then local contrast normalisation: whitens the host, keeps the key band. */
export function prefilter(y: Float32Array, w: number, h: number): Float32Array {
  const low = blur(y, w, h, gaussianTaps(SIGMA_HIGHPASS));
  const hp = new Float32Array(w * h);
  const sq = new Float32Array(w * h);
  for (let i = 0; i < hp.length; i++) {
    hp[i] = y[i]! - low[i]!;
    sq[i] = hp[i]! * hp[i]!;
  }
  const loc = blur(sq, w, h, gaussianTaps(SIGMA_LOCAL));
  for (let i = 0; i < hp.length; i++) hp[i] = hp[i]! / Math.sqrt(loc[i]! + LOCAL_FLOOR);
  return hp;
}

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

/** Bilinear resampling of x by scale s (with sub-pixel offset), summed onto one key tile. */
export function fold(x: Float32Array, w: number, h: number, s: number, ox: number, oy: number, out: Float64Array): void {
  out.fill(0);
  const ax = axis(w, s, ox);
  const ay = axis(h, s, oy);
  const nx = ax.idx.length;
  for (let j = 0; j < ay.idx.length; j++) {
    const r0 = ay.idx[j]! * w;
    const fy = ay.frac[j]!;
    const row = ((ay.start + j) & MASK) * TILE;
    for (let i = 0; i < nx; i++) {
      const x0 = r0 + ax.idx[i]!;
      const fx = ax.frac[i]!;
      const top = x[x0]! + fx * (x[x0 + 1]! - x[x0]!);
      const bot = x[x0 + w]! + fx * (x[x0 + w + 1]! - x[x0 + w]!);
      out[row + ((ax.start + i) & MASK)]! += top + fy * (bot - top);
    }
  }
}

interface Peak {
  z: number;
  dx: number;
  dy: number;
  /** Sub-pixel refinement of the peak, in [-0.5, 0.5]. */
  fx: number;
  fy: number;
}

/** Cyclic cross-correlation corr[d] = sum_u F[u] S[u + d] via the FFT; returns the peak in RMS units. */
function syncPeak(f: Float64Array, specRe: Float64Array, specIm: Float64Array, re: Float64Array, im: Float64Array): Peak {
  re.set(f);
  im.fill(0);
  fft2d(re, im, TILE, -1);
  for (let i = 0; i < T2; i++) {
    // conj(F) * S
    const a = re[i]!;
    const b = -im[i]!;
    re[i] = a * specRe[i]! - b * specIm[i]!;
    im[i] = a * specIm[i]! + b * specRe[i]!;
  }
  fft2d(re, im, TILE, 1);
  let best = 0;
  let sq = 0;
  for (let i = 0; i < T2; i++) {
    sq += re[i]! * re[i]!;
    if (re[i]! > re[best]!) best = i;
  }
  const rms = Math.sqrt(sq / T2);
  const dy = best >> 7;
  const dx = best & MASK;
  const c = re[best]!;
  const sub = (m: number, p: number): number => {
    const den = m - 2 * c + p;
    if (!(den < 0)) return 0;
    const v = (0.5 * (m - p)) / den;
    return v > 0.5 ? 0.5 : v < -0.5 ? -0.5 : v;
  };
  const fx = sub(re[dy * TILE + ((dx - 1) & MASK)]!, re[dy * TILE + ((dx + 1) & MASK)]!);
  const fy = sub(re[((dy - 1) & MASK) * TILE + dx]!, re[((dy + 1) & MASK) * TILE + dx]!);
  return { z: rms > 0 ? c / rms : 0, dx, dy, fx, fy };
}

/** The whole detection core for one image: one call, plain inputs, plain outputs. */
export function detectCore(input: CoreInput): CoreOutput {
  const { width: w, height: h } = input;
  const x = prefilter(luma(input.pixels, w, h, input.channels), w, h);

  const specRe = new Float64Array(T2);
  const specIm = new Float64Array(T2);
  for (let i = 0; i < T2; i++) specRe[i] = input.sync[i]!;
  fft2d(specRe, specIm, TILE, -1);

  const f = new Float64Array(T2);
  const re = new Float64Array(T2);
  const im = new Float64Array(T2);
  const at = (s: number): Peak => {
    fold(x, w, h, s, 0, 0, f);
    return syncPeak(f, specRe, specIm, re, im);
  };

  let bestS = 1;
  let best = at(1);
  let tier = 1;
  if (best.z < TIER1_Z) {
    tier = 2;
    const steps = Math.round((1 - SCALE_MIN) / SCALE_STEP);
    for (let i = 1; i <= steps; i++) {
      const s = 1 - i * SCALE_STEP;
      const p = at(s);
      if (p.z > best.z) {
        best = p;
        bestS = s;
      }
    }
    for (const step of [SCALE_STEP / 2, SCALE_STEP / 4]) {
      const centre = bestS;
      for (const s of [centre - step, centre + step]) {
        const p = at(s);
        if (p.z > best.z) {
          best = p;
          bestS = s;
        }
      }
    }
  }

  // Re-fold at the sub-pixel alignment, then correlate each count cell with its own key material.
  fold(x, w, h, bestS, best.fx, best.fy, f);
  const cells = new Float64Array(CELLS);
  const per = TILE / CELL;
  for (let ky = 0; ky < TILE; ky++) {
    const fr = ((ky - best.dy) & MASK) * TILE;
    const crow = ky * TILE;
    const cellRow = ((ky / CELL) | 0) * per;
    for (let kx = 0; kx < TILE; kx++) {
      cells[cellRow + ((kx / CELL) | 0)]! += f[fr + ((kx - best.dx) & MASK)]! * input.count[crow + kx]!;
    }
  }
  return { scale: bestS, dx: best.dx + best.fx, dy: best.dy + best.fy, syncZ: best.z, tier, cells };
}
