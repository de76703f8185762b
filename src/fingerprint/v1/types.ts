/** Plain shapes crossing into the detection core (TypeScript reference or native addon, same contract). */

export interface CoreInput {
  /** Decoded pixels at the base resolution (short side WORK_SHORT_SIDE), 8-bit, interleaved. */
  pixels: Uint8Array;
  width: number;
  height: number;
  channels: number;
  /** Key tile parts, TILE*TILE each. */
  sync: Float32Array;
  count: Float32Array;
  params: CoreParams;
  /** Optional: the prefiltered luma (width*height) when the caller has it (version 2 computes the same one). */
  prefiltered?: Float32Array;
}

/** Tunables handed to the core on every call, so that the native code has no copy of them. */
export interface CoreParams {
  cell: number;
  scaleMin: number;
  scaleStep: number;
  tier1Z: number;
  /** Coarse scales, ranked at half resolution, that the search folds at full resolution. */
  fullScales: number;
  /** Sync z from which the scale is refined (by half and quarter steps) around the best coarse one. */
  refineZ: number;
  sigmaHighpass: number;
  sigmaLocal: number;
  localFloor: number;
}

export interface CoreOutput {
  /** Scale of the chosen alignment (fraction of the marked image's short side that the input shows). */
  scale: number;
  /** Key-tile phase of the chosen alignment, work pixels (integer part plus sub-pixel refinement). */
  dx: number;
  dy: number;
  /** Sync correlation peak over its surface's RMS at the chosen alignment. */
  syncZ: number;
  /** Sync z of the best scale before the refinement. */
  coarseZ: number;
  /** 1 when the scale-1 fast path was taken, 2 when the scale search ran. */
  tier: number;
  /** Correlation of each count cell with the key at the chosen alignment. */
  cells: Float64Array;
}
