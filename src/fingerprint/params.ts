/**
 * Parameters both versions of the fingerprint share (each version's own: v1/params.ts, v2/params.ts).
 * Changing one of the key's or the work resolution's changes the mark: images marked before the change
 * stop being detected. Units are work-resolution pixels unless said otherwise.
 */

/** Short side of the work resolution the key lives on. */
export const WORK_SHORT_SIDE = 256;
/** Period of the key tile; the key repeats with this period, so detection folds the image onto one tile. */
export const TILE = 128;
/** Side of a count cell; the count key is generated independently per cell. */
export const CELL = 8;
/** Band of the key: difference of Gaussians with these sigmas. */
export const BAND_SIGMA_LOW = 0.8;
export const BAND_SIGMA_HIGH = 2.5;
/** Texture mask clip(localstd5x5 / div, MASK_MIN, MASK_MAX) of the embedder (each version has its div). */
export const MASK_MIN = 0.35;
export const MASK_MAX = 1.6;
/** Images with a shorter side than this (original pixels) are not marked and not examined. */
export const MIN_SIDE = 96;
/** Work-resolution long side above which (aspect over 8:1) images are not marked and not examined. */
export const MAX_WORK_LONG_SIDE = 2048;
/** Detector prefilter: subtract a Gaussian (sigma in work px), divide by the local RMS over another. */
export const SIGMA_HIGHPASS = 2.5;
export const SIGMA_LOCAL = 4;
/** Floor of the local energy (luma units squared), so that flat areas are not blown up. */
export const LOCAL_FLOOR = 1;
/** False-positive bound of the decision. */
export const FPR = 1e-6;

/** Each scheme is tested at half the budget, so that testing both keeps the union bound at FPR. */
export const FPR_PER_SCHEME = FPR / 2;
