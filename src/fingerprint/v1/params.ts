/**
 * Version 1's detector parameters (frozen with it: version-1 marks are detected as they always were),
 * as the one plain object handed to the core on every call, so that the native code has no copy of them.
 * Units are work-resolution pixels.
 */
import { CELL, LOCAL_FLOOR, SIGMA_HIGHPASS, SIGMA_LOCAL } from '../params.js';

export const CORE_PARAMS = {
  cell: CELL,
  /** Scale search: crops keeping at least this share of the short side, in steps of scaleStep. */
  scaleMin: 0.78,
  scaleStep: 0.01,
  /** Sync z at scale 1 above which the search is skipped. */
  tier1Z: 6,
  /** The coarse scales are ranked at half resolution and only this many are folded at full resolution. */
  fullScales: 4,
  /**
   * The scale is refined (half and quarter steps) only when the best coarse sync z reaches this. Unmarked
   * pictures: median 4.4, 99th percentile 5.1-5.6; every detected version-1 mark of the attack set: 8.2 or
   * more. Skipping it can only lose detections, never add one.
   */
  refineZ: 5,
  sigmaHighpass: SIGMA_HIGHPASS,
  sigmaLocal: SIGMA_LOCAL,
  localFloor: LOCAL_FLOOR,
} as const;
