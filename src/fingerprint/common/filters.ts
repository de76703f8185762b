/**
 * The picture-side filters both versions' detectors share: luma, the Gaussian blur and the prefilter that
 * whitens the host, and the parabolic sub-pixel peak. The native addon mirrors them (native/src/prefilter.cc)
 * so that both engines round the same way.
 */

/** The prefilter's tunables (both versions use the same ones). */
export interface PrefilterParams {
  sigmaHighpass: number;
  sigmaLocal: number;
  localFloor: number;
}

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

/**
 * High-pass (minus a Gaussian) then local contrast normalisation: whitens the host, keeps the key band.
 * `energy`, when given, has its plane receive the same high-pass divided by the local energy (the RMS
 * squared) plus its own floor instead: version 2's plane (docs/fingerprint.md, "Design: version 2", step 2), same pass.
 */
export function prefilter(y: Float32Array, w: number, h: number, p: PrefilterParams, energy?: { plane: Float32Array; floor: number }): Float32Array {
  const low = blur(y, w, h, gaussianTaps(p.sigmaHighpass));
  const hp = new Float32Array(w * h);
  const sq = new Float32Array(w * h);
  for (let i = 0; i < hp.length; i++) {
    hp[i] = y[i]! - low[i]!;
    sq[i] = hp[i]! * hp[i]!;
  }
  const loc = blur(sq, w, h, gaussianTaps(p.sigmaLocal));
  // Float32 arithmetic, as the native core: each sum rounded, then one correctly rounded division.
  if (energy) for (let i = 0; i < hp.length; i++) energy.plane[i] = hp[i]! / Math.fround(loc[i]! + energy.floor);
  for (let i = 0; i < hp.length; i++) hp[i] = hp[i]! / Math.fround(Math.sqrt(Math.fround(loc[i]! + p.localFloor)));
  return hp;
}

/** Offset in [-0.5, 0.5] of the top of the parabola through (-1, a), (0, v), (1, b); 0 unless v is a strict maximum of its curvature. */
export function parabolaPeak(a: number, v: number, b: number): number {
  const den = a - 2 * v + b;
  if (!(den < 0)) return 0;
  const r = (0.5 * (a - b)) / den;
  return r > 0.5 ? 0.5 : r < -0.5 ? -0.5 : r;
}
