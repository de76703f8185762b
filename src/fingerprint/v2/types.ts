/** Plain shapes crossing into version 2's detection core (TypeScript reference or native addon, same contract). */

export interface Core2Params {
  period: number;
  cell: number;
  fastZ: number;
  pMin: number;
  pMax: number;
  angle: number;
  candidates: number;
  gate: number;
  refineZ: number;
  /** Part B's next choices of tile phase counted too (a fixed number; phaseCells). */
  phaseLooks: number;
  /** Sync z from which they are counted. */
  phasesZ: number;
  /** Self-normalised sum T of the count from which an unrefined spectrum lattice is refined and counted again. */
  secondT: number;
  /** Fine comb score from which the best hypothesis of the aspect lines is folded. */
  aspectGate: number;
  /** Fine comb score from which the best hypothesis of the rotation plane (refined) is folded. */
  rotationGate: number;
  /** Power of part A's amplitude in the sync correlation (its phase kept): 0 phase only, 1 matched filter. */
  syncPower: number;
  /** Spectrum lattices within this fraction of the no-geometry one are that one (not folded again). */
  sameAsIdentity: number;
  /** Runner-up alignments counted when the search's best sync z is under refineZ (a fixed number). */
  runners: number;
  /** Sync z from which a runner-up alignment is counted. */
  runnerZ: number;
  /** Identity looks counted when the search's best sync z is under refineZ (a fixed number). */
  identityLooks: number;
  /** Lattice looks counted when the lattice search ran (a fixed number), and the sync z they need. */
  latticeLooks: number;
  latticeLookZ: number;
  sigmaHighpass: number;
  sigmaLocal: number;
  localFloor: number;
  /** Floor of the local energy version 2 divides by (luma units squared): Detect step 2. */
  energyFloor: number;
}

export interface Core2Input {
  /** Decoded pixels at the base resolution (short side min(input, WORK_SHORT_SIDE)), 8-bit, interleaved. */
  pixels: Uint8Array;
  width: number;
  height: number;
  channels: number;
  /** Short side of the work resolution the base was scaled from (WORK_SHORT_SIDE, or less for small inputs). */
  workShort: number;
  /** 1 when the base is a JPEG at its own size: its 8 x 8 block grid is then at 8 px and is notched out of the spectrum. */
  native: number;
  /** Key parts: a is period^2, b and c TILE^2. */
  a: Float32Array;
  /** The template's harmonics (m1, m2 pairs), the only key material the lattice search reads. */
  harmonics: Float64Array;
  b: Float32Array;
  c: Float32Array;
  params: Core2Params;
  /** Optional, width*height: receives the prefiltered luma, for the version-1 core to reuse (same prefilter). */
  keepPrefiltered?: Float32Array;
}

export interface Core2Output {
  /** Period vectors of the chosen lattice, base pixels per `period` work pixels: [v1x, v1y, v2x, v2y]. */
  lattice: Float64Array;
  /** Index of the symmetry of the square (0-7, see DIHEDRAL). */
  dihedral: number;
  /** Tile phase of the chosen alignment, lattice-frame work pixels (integer plus sub-pixel). */
  dx: number;
  dy: number;
  /** Sync z of the chosen alignment (part A) and the phase choice's z (part B). */
  syncZ: number;
  phaseZ: number;
  /** 1 when the no-geometry hypothesis was accepted at once, 2 when the lattice search ran. */
  tier: number;
  /** Alignment hypotheses tried. */
  candidates: number;
  /** Best comb score of the lattice grid (-Infinity when the search did not run). */
  combScore: number;
  /** Best fine comb score of the aspect lines (-Infinity when the search did not run). */
  aspectScore: number;
  /** Fine comb score of the rotation plane's best hypothesis, refined (-Infinity when the search did not run). */
  rotationScore: number;
  /** Correlation of each count cell with the key at the chosen alignment. */
  cells: Float64Array;
  /**
   * The cells at part B's 2nd, 3rd, ... choices of tile phase for the chosen alignment (params.phaseLooks
   * blocks, in B's order); empty when the sync z is under params.phasesZ.
   */
  phaseCells: Float64Array;
  /**
   * The second look's cells (its own best tile phase): the refined lattice when the chosen one was not
   * refined, the unrefined one when it was; empty when it did not run.
   */
  refinedCells: Float64Array;
  refinedSyncZ: number;
  /**
   * Runner-up alignments (the next distinct peaks of the search by sync z, each at its own best tile
   * phase): params.runners blocks of cells, a block of zeros where the runner-up was not counted; empty
   * when none was. Their sync z, 0 where not counted.
   */
  runnerCells: Float64Array;
  runnerZ: Float64Array;
  /**
   * Identity looks (the best peaks of the identity symmetry's sync surface on the chosen lattice that are
   * neither the chosen alignment nor a runner-up, each at its own best tile phase): params.identityLooks
   * blocks of cells, zeros where not counted; empty when none was. Their sync z, 0 where not counted.
   */
  identityCells: Float64Array;
  identityZ: Float64Array;
  /**
   * Lattice looks (the best peak of each of the next lattices the search folded, by sync z from
   * params.latticeLookZ, each at its own best tile phase): params.latticeLooks blocks of cells, zeros where
   * not counted; empty when none was. Their sync z, 0 where not counted.
   */
  latticeCells: Float64Array;
  latticeZ: Float64Array;
}

/** The 8 symmetries of the square as integer matrices [a, b, c, d]: (x, y) -> (a x + b y, c x + d y). */
export const DIHEDRAL: readonly (readonly [number, number, number, number])[] = [
  [1, 0, 0, 1],
  [0, -1, 1, 0],
  [-1, 0, 0, -1],
  [0, 1, -1, 0],
  [-1, 0, 0, 1],
  [1, 0, 0, -1],
  [0, 1, 1, 0],
  [0, -1, -1, 0],
];
