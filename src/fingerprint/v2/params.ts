/**
 * Version 2's parameters. The key's (period, template, shares) and the embedder's (mask, strength, PSNR
 * floor) define the mark: changing one stops earlier marks being detected. Those marked "detector only"
 * can change without that. Units are work-resolution pixels unless said otherwise.
 */
import { CELL, LOCAL_FLOOR, SIGMA_HIGHPASS, SIGMA_LOCAL } from '../params.js';

/*
 * Version 2 (docs/fingerprint.md, "Design: version 2"): the same work resolution and 128 tile, but the tile is
 * built from three independent parts so that the detector can find the geometry on its own:
 * - lattice/sync part A, periodic with V2_PERIOD (so the whole mark shows a lattice of autocorrelation
 *   peaks at multiples of V2_PERIOD work pixels), used to estimate the affine map and the shift mod V2_PERIOD;
 * - phase part B, periodic with TILE, used only to choose among the (TILE / V2_PERIOD)^2 tile phases;
 * - count part C, TILE-periodic, CELL x CELL cells of independent key material: the decision.
 */
export const V2_PERIOD = 32;
/** Share of the sync part's power given to the template (a few keyed sinusoids of the period). */
export const V2_TEMPLATE = 0.7;
/** Power shares of the three parts (they sum to 1). */
export const V2_SHARE_A = 0.45;
export const V2_SHARE_B = 0.08;
export const V2_SHARE_C = 0.47;
/**
 * Version 2's texture mask divides the local standard deviation by this (version 1 divided by 6; same clip
 * MASK_MIN..MASK_MAX): the mask reaches its top at a local std of 6.4 instead of 9.6 (docs/fingerprint.md, "Embedding").
 */
export const V2_MASK_DIV = 4;
/** Embedding strength of version 2 (the per-image PSNR clamp still applies). */
export const V2_ALPHA = 3.4;
/**
 * Version 2 lowers its strength per image so that the marked pixels keep PSNR >= this against the decoded
 * input (RGB, measured exactly on the 8-bit result before it is encoded; docs/fingerprint.md, "Embedding").
 */
export const V2_MIN_PSNR_DB = 40.1;
/** Sync z of the no-geometry hypothesis above which the lattice search is skipped. */
export const V2_FAST_Z = 7.5;
/** Lattice search: period range in pixels of each pyramid level, angle window (degrees) about each axis. */
export const V2_PMIN = 14;
export const V2_PMAX = 96;
export const V2_ANGLE = 16;
/** Lattice candidates kept per pyramid level (the no-geometry hypothesis is always tried as well). */
export const V2_CANDIDATES = 3;
/**
 * Comb score (whitened spectrum at the template's 12 peaks, over sqrt(12)) of the best grid hypothesis
 * below which only that hypothesis and the crop line's are folded (not the 2nd and 3rd). Measured on the
 * 18 photographs of the natural test set under every attack of the bench: unmarked pictures are below it in
 * 96% of cases (median 1.9); marked ones whose geometry needs the grid are mostly above it (busy
 * pictures are not: there the best hypothesis is usually still the right one).
 */
export const V2_GATE = 2.6;
/**
 * Detector only: power of part A's amplitude in the sync correlation (its phase kept; 0 is phase only, 1
 * the matched filter). bench/RESULTS.md, "Fingerprint", step 3, says why.
 */
export const V2_SYNC_POWER = 0.5;
/** Detector only: spectrum lattices within this fraction of the no-geometry one are not folded again. */
export const V2_SAME_AS_IDENTITY = 0.005;
/** Sync z of the best hypothesis below which the coherent refinement (up to 48 folds) is skipped. */
export const V2_REFINE_Z = 6.0;

/**
 * Detector only: sync z of the chosen alignment from which the count cells of part B's next
 * V2_PHASE_LOOKS tile phases are tested too (part B, which picks the phase, is weak on small crops). Unmarked pictures: median 4.0.
 */
export const V2_PHASES_Z = 4.75;
/**
 * Detector only: how many of part B's next choices of tile phase are counted (its 2nd and 3rd): on --dense
 * over three marking keys, every tile phase other than B's choice that held the mark (T over 4.5, 13 of
 * 4,860 marked trials) was its 2nd or 3rd (bench/RESULTS.md, "Fingerprint", step 7).
 */
export const V2_PHASE_LOOKS = 2;
/**
 * Detector only: the second look. When the chosen lattice came from the spectrum and was not refined
 * (sync z under V2_REFINE_Z), it is refined anyway and counted again when the count at the chosen
 * alignment already reaches this T (unmarked pictures: T is about N(0, 1), so 0.6% of them pay for it).
 */
export const V2_SECOND_T = 2.5;
/**
 * Detector only: the aspect lines (theta 0, one axis at the no-geometry scale, the other within 1.36x of
 * it) are scored on the fine spectrum plane, and their best hypothesis is folded when its comb score
 * reaches this (bench/RESULTS.md, "Fingerprint", step 4).
 */
export const V2_ASPECT_GATE = 2.5;
/**
 * Detector only: the rotation plane (the grid's angles and scales, the same scale both ways) is scored on
 * the fine spectrum plane, and its best hypothesis, refined, is folded when its comb score reaches this
 * (bench/RESULTS.md, "Fingerprint", step 4).
 */
export const V2_ROTATION_GATE = 2.3;
/**
 * Detector only: when the search's best sync z is under V2_REFINE_Z (the alignment is uncertain), the next
 * V2_RUNNERS distinct peaks of its sync surfaces (lattice, symmetry, shift) are counted too, those from
 * sync z V2_RUNNER_Z (bench/RESULTS.md, "Fingerprint", step 9). The decision pays for V2_RUNNERS tests always.
 */
export const V2_RUNNERS = 2;
export const V2_RUNNER_Z = 4.5;
/**
 * Detector only: with the runner-ups (same condition), the V2_IDENTITY_LOOKS best peaks of the identity
 * symmetry's sync surface on the chosen lattice, other than the chosen alignment and the runner-ups, are
 * counted too, whatever their sync z (bench/RESULTS.md, "Fingerprint", step 10). The decision pays for them always.
 */
export const V2_IDENTITY_LOOKS = 2;
/**
 * Detector only: whenever the lattice search ran, the best peak of each of the next V2_LATTICE_LOOKS
 * lattices it folded (other than the chosen one, by that peak's sync z, from V2_LATTICE_LOOK_Z) is counted
 * too (bench/RESULTS.md, "Fingerprint", step 11). The decision pays for them always.
 */
export const V2_LATTICE_LOOKS = 2;
export const V2_LATTICE_LOOK_Z = 5;
/**
 * Shares of version 2's budget FPR_PER_SCHEME (they sum to 1): the chosen alignment at its best tile
 * phase; part B's next V2_PHASE_LOOKS tile phases, split equally; the second look; the runner-up
 * alignments, split equally over V2_RUNNERS; the identity looks, split equally over V2_IDENTITY_LOOKS; the
 * lattice looks, split equally over V2_LATTICE_LOOKS. Union bound over these 10 tests, whose alignments
 * never read part C (docs/fingerprint.md, "The false-positive bound").
 */
export const V2_SHARE_MAIN = 0.5;
export const V2_SHARE_PHASES = 0.1;
export const V2_SHARE_SECOND = 0.1;
export const V2_SHARE_RUNNERS = 0.1;
export const V2_SHARE_IDENTITY = 0.1;
export const V2_SHARE_LATTICE = 0.1;

/**
 * Version 2 divides the high-pass by the local energy (the local RMS squared) plus this floor, not by the
 * local RMS as version 1 does: the matched weighting for a mark whose amplitude stops growing with the
 * texture (docs/fingerprint.md, "Design: version 2", step 2). The floor (a local RMS of 4) keeps flat places, where a
 * coarse JPEG leaves only its block edges, from outweighing the rest.
 */
export const V2_ENERGY_FLOOR = 16;

/** Version 2's tunables as one plain object (handed to the native addon on every call). */
export const CORE2_PARAMS = {
  period: V2_PERIOD,
  cell: CELL,
  fastZ: V2_FAST_Z,
  pMin: V2_PMIN,
  pMax: V2_PMAX,
  angle: V2_ANGLE,
  candidates: V2_CANDIDATES,
  gate: V2_GATE,
  refineZ: V2_REFINE_Z,
  phasesZ: V2_PHASES_Z,
  phaseLooks: V2_PHASE_LOOKS,
  secondT: V2_SECOND_T,
  aspectGate: V2_ASPECT_GATE,
  rotationGate: V2_ROTATION_GATE,
  syncPower: V2_SYNC_POWER,
  sameAsIdentity: V2_SAME_AS_IDENTITY,
  runners: V2_RUNNERS,
  runnerZ: V2_RUNNER_Z,
  identityLooks: V2_IDENTITY_LOOKS,
  latticeLooks: V2_LATTICE_LOOKS,
  latticeLookZ: V2_LATTICE_LOOK_Z,
  sigmaHighpass: SIGMA_HIGHPASS,
  sigmaLocal: SIGMA_LOCAL,
  localFloor: LOCAL_FLOOR,
  energyFloor: V2_ENERGY_FLOOR,
} as const;
