/**
 * Version 2's lattice search, step 1: the whitened power spectrum of the prefiltered picture, and the
 * lookups the comb scores make in it. No key material is read here.
 */
import { fft1d } from '../common/fft.js';

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
export function onGrid(u: number, v: number, nx: number, ny: number): boolean {
  const gx = nx / 8;
  const gy = ny / 8;
  const du = Math.abs(u) % gx;
  const dv = Math.abs(v) % gy;
  return Math.min(du, gx - du) < GRID_SKIP || Math.min(dv, gy - dv) < GRID_SKIP;
}

/** Bilinear value of a spectrum plane at a frequency given in cycles per pixel (any sign). */
export function specAt(plane: Float32Array, nx: number, ny: number, fx: number, fy: number): number {
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
