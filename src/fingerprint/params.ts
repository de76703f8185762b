/**
 * Fixed parameters of the fingerprint scheme. Changing any of them changes the mark: images marked
 * before the change stop being detected. Units are work-resolution pixels unless said otherwise.
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
/** Share of the key's power given to the sync part (the count part gets the rest). */
export const SYNC_SHARE = 0.5;
/** Embedding strength and texture mask clip(localstd5x5 / MASK_DIV, MASK_MIN, MASK_MAX). */
export const ALPHA = 2.1;
export const MASK_DIV = 6;
export const MASK_MIN = 0.35;
export const MASK_MAX = 1.6;
/** The embedder lowers ALPHA per image so that the luma residual alone keeps PSNR at or above this. */
export const MIN_PSNR_DB = 40.5;
/** Images with a shorter side than this (original pixels) are not marked and not examined. */
export const MIN_SIDE = 96;
/** Work-resolution long side above which (aspect over 8:1) images are not marked and not examined. */
export const MAX_WORK_LONG_SIDE = 2048;
/** Scale search: crops keeping at least SCALE_MIN of the short side. */
export const SCALE_MIN = 0.78;
export const SCALE_STEP = 0.01;
/** Sync z at scale 1 above which the search is skipped. */
export const TIER1_Z = 6;
/** Detector prefilter: subtract a Gaussian (sigma in work px), divide by the local RMS over another. */
export const SIGMA_HIGHPASS = 2.5;
export const SIGMA_LOCAL = 4;
/** Floor of the local energy (luma units squared), so that flat areas are not blown up. */
export const LOCAL_FLOOR = 1;
/** False-positive bound of the decision. */
export const FPR = 1e-6;

/** The core's tunables as one plain object (handed to the native addon on every call). */
export const CORE_PARAMS = {
  cell: CELL,
  scaleMin: SCALE_MIN,
  scaleStep: SCALE_STEP,
  tier1Z: TIER1_Z,
  sigmaHighpass: SIGMA_HIGHPASS,
  sigmaLocal: SIGMA_LOCAL,
  localFloor: LOCAL_FLOOR,
} as const;
