/**
 * Meta's PDQ perceptual hash (256 bits), from pixels on: written to the reference implementation
 * (facebook/ThreatExchange, pdq/cpp/hashing/pdqhashing.cpp and pdq/cpp/downscaling/downscaling.cpp; the
 * algorithm is described in hashing/hashing.pdf of that repository). The steps:
 *
 *   RGB -> luma (0.299 R + 0.587 G + 0.114 B)
 *       -> two passes of a Jarosz box filter (a tent), each a box along rows then along columns, window
 *          ceil(side / 128) -> decimation to 64 x 64 at the cells' centres
 *       -> quality: the sum of quantised neighbour gradients of the 64 x 64 luma, / 90, at most 100
 *       -> the 2-D DCT's coefficients (1..16) x (1..16) -> one bit per coefficient: above their median
 *
 * The reference computes in single precision, in a fixed order; so does this file (every operation
 * rounded with Math.fround, the sums in the reference's order), so that the same pixels give the same bits,
 * ties at the median included. test/vault-pdq.test.ts holds it to hashes the reference C++ printed.
 */

const f = Math.fround;

const LUMA_R = f(0.299);
const LUMA_G = f(0.587);
const LUMA_B = f(0.114);

/** Below this many rows or columns the reference gives the all-zero hash and quality 0. */
export const MIN_HASHABLE_SIDE = 5;

/** Two tent passes: box along rows then columns, twice (PDQ_NUM_JAROSZ_XY_PASSES). */
const JAROSZ_PASSES = 2;

/** The 16 x 64 DCT-II matrix, rows 1..16 (float; the reference computes it in double and stores floats). */
const DCT: Float32Array = (() => {
  const m = new Float32Array(16 * 64);
  const scale = f(Math.sqrt(2 / 64));
  for (let i = 0; i < 16; i++) {
    for (let j = 0; j < 64; j++) m[i * 64 + j] = scale * Math.cos((Math.PI / 2 / 64) * (i + 1) * (2 * j + 1));
  }
  return m;
})();

export interface PdqResult {
  /** 64 hex digits, the reference's order (its word 15 first, each 16-bit word as 4 digits). */
  hash: string;
  /** 0..100; Meta advises discarding hashes of quality 49 or less (featureless images). */
  quality: number;
}

/** PDQ of an 8-bit image, `channels` 3 (RGB) or 4 (RGBA, alpha ignored) or 1 (grey), row-major, no padding. */
export function pdqFromPixels(pixels: Uint8Array, width: number, height: number, channels: 1 | 3 | 4): PdqResult {
  if (pixels.length < width * height * channels) throw new RangeError('pdq: fewer pixels than width x height x channels');
  const n = width * height;
  const luma = new Float32Array(n);
  if (channels === 1) {
    for (let i = 0; i < n; i++) luma[i] = pixels[i]!;
  } else {
    for (let i = 0, p = 0; i < n; i++, p += channels) {
      luma[i] = f(f(f(LUMA_R * pixels[p]!) + f(LUMA_G * pixels[p + 1]!)) + f(LUMA_B * pixels[p + 2]!));
    }
  }
  return pdqFromLuma(luma, width, height);
}

/** PDQ of a luma plane (float, row-major); `luma` is used as scratch and left filtered. */
export function pdqFromLuma(luma: Float32Array, width: number, height: number): PdqResult {
  if (width < MIN_HASHABLE_SIDE || height < MIN_HASHABLE_SIDE) return { hash: '0'.repeat(64), quality: 0 };
  const small = new Float32Array(64 * 64);
  if (width === 64 && height === 64) small.set(luma.subarray(0, 64 * 64));
  else {
    jaroszFilter(luma, new Float32Array(width * height), height, width, windowSize(width), windowSize(height));
    decimate(luma, height, width, small);
  }
  const quality = qualityMetric(small);
  const dct = dct64To16(small);
  return { hash: bitsToHex(dct), quality };
}

/** The box window for one axis: ceil(side / 128) (two passes of half a 64th of the side each). */
function windowSize(side: number): number {
  return Math.trunc((side + 2 * 64 - 1) / (2 * 64));
}

function jaroszFilter(b1: Float32Array, b2: Float32Array, rows: number, cols: number, winAlongRows: number, winAlongCols: number): void {
  for (let k = 0; k < JAROSZ_PASSES; k++) {
    for (let i = 0; i < rows; i++) box1D(b1, b2, i * cols, cols, 1, winAlongRows);
    for (let j = 0; j < cols; j++) box1D(b2, b1, j, rows, cols, winAlongCols);
  }
}

/**
 * A box of `win` samples centred on each output (reference box1DFloat): the window grows at the start
 * and shrinks at the end, each output the mean of the samples it covers.
 */
function box1D(input: Float32Array, output: Float32Array, start: number, length: number, stride: number, win: number): void {
  const half = Math.trunc((win + 2) / 2);
  const phase1 = half - 1;
  const phase2 = win - half + 1;
  const phase3 = length - win;
  const phase4 = half - 1;
  let li = start;
  let ri = start;
  let oi = start;
  let sum = 0;
  let size = 0;
  for (let i = 0; i < phase1; i++) {
    sum = f(sum + input[ri]!);
    size++;
    ri += stride;
  }
  for (let i = 0; i < phase2; i++) {
    sum = f(sum + input[ri]!);
    size++;
    output[oi] = sum / size;
    ri += stride;
    oi += stride;
  }
  for (let i = 0; i < phase3; i++) {
    sum = f(sum + input[ri]!);
    sum = f(sum - input[li]!);
    output[oi] = sum / size;
    li += stride;
    ri += stride;
    oi += stride;
  }
  for (let i = 0; i < phase4; i++) {
    sum = f(sum - input[li]!);
    size--;
    output[oi] = sum / size;
    li += stride;
    oi += stride;
  }
}

/** The sample at each 64 x 64 cell's centre (computed in double, as the reference does). */
function decimate(input: Float32Array, rows: number, cols: number, out: Float32Array): void {
  for (let oi = 0; oi < 64; oi++) {
    const ii = Math.trunc(((oi + 0.5) * rows) / 64);
    for (let oj = 0; oj < 64; oj++) {
      const ij = Math.trunc(((oj + 0.5) * cols) / 64);
      out[oi * 64 + oj] = input[ii * cols + ij]!;
    }
  }
}

/** The reference's heuristic: neighbour differences in percent of full scale, truncated, summed, / 90. */
function qualityMetric(a: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < 63; i++) {
    for (let j = 0; j < 64; j++) sum += Math.abs(Math.trunc(f(f(f(a[i * 64 + j]! - a[(i + 1) * 64 + j]!) * 100) / 255)));
  }
  for (let i = 0; i < 64; i++) {
    for (let j = 0; j < 63; j++) sum += Math.abs(Math.trunc(f(f(f(a[i * 64 + j]! - a[i * 64 + j + 1]!) * 100) / 255)));
  }
  return Math.min(100, Math.trunc(sum / 90));
}

/** B = D A Dᵀ for the 16 rows of D: only the coefficients the hash keeps. */
function dct64To16(a: Float32Array): Float32Array {
  const t = new Float32Array(16 * 64);
  for (let i = 0; i < 16; i++) {
    for (let j = 0; j < 64; j++) {
      let s = 0;
      for (let k = 0; k < 64; k++) s = f(s + f(DCT[i * 64 + k]! * a[k * 64 + j]!));
      t[i * 64 + j] = s;
    }
  }
  const b = new Float32Array(256);
  for (let i = 0; i < 16; i++) {
    for (let j = 0; j < 16; j++) {
      let s = 0;
      for (let k = 0; k < 64; k++) s = f(s + f(t[i * 64 + k]! * DCT[j * 64 + k]!));
      b[i * 16 + j] = s;
    }
  }
  return b;
}

/** Torben Mogensen's median without sorting (the reference's torben.cpp), in single precision. */
function torbenMedian(m: Float32Array): number {
  const n = m.length;
  let min = m[0]!;
  let max = m[0]!;
  for (let i = 1; i < n; i++) {
    if (m[i]! < min) min = m[i]!;
    if (m[i]! > max) max = m[i]!;
  }
  const half = Math.trunc((n + 1) / 2);
  for (;;) {
    const guess = f(f(min + max) / 2);
    let less = 0;
    let greater = 0;
    let equal = 0;
    let maxLtGuess = min;
    let minGtGuess = max;
    for (let i = 0; i < n; i++) {
      const v = m[i]!;
      if (v < guess) {
        less++;
        if (v > maxLtGuess) maxLtGuess = v;
      } else if (v > guess) {
        greater++;
        if (v < minGtGuess) minGtGuess = v;
      } else equal++;
    }
    if (less <= half && greater <= half) {
      if (less >= half) return maxLtGuess;
      if (less + equal >= half) return guess;
      return minGtGuess;
    }
    if (less > greater) max = maxLtGuess;
    else min = minGtGuess;
  }
}

/** Bit i*16+j set when coefficient (i, j) is above the median; printed as the reference's format(). */
function bitsToHex(b: Float32Array): string {
  const median = torbenMedian(b);
  const words = new Uint16Array(16);
  for (let k = 0; k < 256; k++) if (b[k]! > median) words[k >> 4]! |= 1 << (k & 15);
  let hex = '';
  for (let w = 15; w >= 0; w--) hex += words[w]!.toString(16).padStart(4, '0');
  return hex;
}
