/**
 * Version 1's detector parameters (frozen with it: version-1 marks are detected as they always were).
 * Units are work-resolution pixels.
 */
import { CELL, LOCAL_FLOOR, SIGMA_HIGHPASS, SIGMA_LOCAL } from '../params.js';

/** Scale search: crops keeping at least SCALE_MIN of the short side. */
export const SCALE_MIN = 0.78;
export const SCALE_STEP = 0.01;
/** Sync z at scale 1 above which the search is skipped. */
export const TIER1_Z = 6;
/**
 * Detector only (marks stay valid when it changes): the coarse scales are ranked at half resolution and
 * only this many are folded at full resolution before the refinement.
 */
export const V1_FULL_SCALES = 4;
/**
 * Detector only: version 1 refines its scale (half and quarter steps) only when the best coarse sync z
 * reaches this. Unmarked pictures: median 4.4, 99th percentile 5.1-5.6; every detected version-1 mark of
 * the attack set: 8.2 or more (docs/fingerprint.md). Skipping it can only lose detections, never add one.
 */
export const V1_REFINE_Z = 5;
/** The core's tunables as one plain object (handed to the native addon on every call). */
export const CORE_PARAMS = {
  cell: CELL,
  scaleMin: SCALE_MIN,
  scaleStep: SCALE_STEP,
  tier1Z: TIER1_Z,
  fullScales: V1_FULL_SCALES,
  refineZ: V1_REFINE_Z,
  sigmaHighpass: SIGMA_HIGHPASS,
  sigmaLocal: SIGMA_LOCAL,
  localFloor: LOCAL_FLOOR,
} as const;
