/**
 * In-place radix-2 complex FFT on separate real/imaginary arrays, and the 2-D transform built on it.
 * Sizes here are small powers of two (16 and 128), so a plain iterative transform is enough; the
 * native addon mirrors this code so that both engines round the same way.
 */

/** Forward (sign -1) or inverse (sign +1, unscaled) FFT of length re.length (a power of two). */
export function fft1d(re: Float64Array, im: Float64Array, sign: 1 | -1, offset = 0, stride = 1, n = re.length): void {
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      const a = offset + i * stride;
      const b = offset + j * stride;
      const tr = re[a]!;
      re[a] = re[b]!;
      re[b] = tr;
      const ti = im[a]!;
      im[a] = im[b]!;
      im[b] = ti;
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (sign * 2 * Math.PI) / len;
    const half = len >> 1;
    for (let k = 0; k < half; k++) {
      const wr = Math.cos(ang * k);
      const wi = Math.sin(ang * k);
      for (let i = k; i < n; i += len) {
        const a = offset + i * stride;
        const b = offset + (i + half) * stride;
        const xr = re[b]! * wr - im[b]! * wi;
        const xi = re[b]! * wi + im[b]! * wr;
        re[b] = re[a]! - xr;
        im[b] = im[a]! - xi;
        re[a] = re[a]! + xr;
        im[a] = im[a]! + xi;
      }
    }
  }
}

/** 2-D FFT of an n x n row-major array (rows, then columns). */
export function fft2d(re: Float64Array, im: Float64Array, n: number, sign: 1 | -1): void {
  for (let r = 0; r < n; r++) fft1d(re, im, sign, r * n, 1, n);
  for (let c = 0; c < n; c++) fft1d(re, im, sign, c, n, n);
}
