/** Version 2's decision over its fixed set of tests (union bound; none of their alignments read part C). */
import { FPR_PER_SCHEME } from '../params.js';
import { type CellTest, cellTest } from '../stats.js';
import {
  V2_IDENTITY_LOOKS,
  V2_LATTICE_LOOKS,
  V2_PHASE_LOOKS,
  V2_RUNNERS,
  V2_SHARE_IDENTITY,
  V2_SHARE_LATTICE,
  V2_SHARE_MAIN,
  V2_SHARE_PHASES,
  V2_SHARE_RUNNERS,
  V2_SHARE_SECOND,
} from './params.js';

/**
 * Version 2's decision: the chosen alignment at its best tile phase at V2_SHARE_MAIN of the scheme's
 * budget, each of part B's next V2_PHASE_LOOKS tile phases at V2_SHARE_PHASES / V2_PHASE_LOOKS, the second look at V2_SHARE_SECOND, each of the
 * V2_RUNNERS runner-up alignments at V2_SHARE_RUNNERS / V2_RUNNERS and each of the V2_IDENTITY_LOOKS
 * identity looks at V2_SHARE_IDENTITY / V2_IDENTITY_LOOKS and each of the V2_LATTICE_LOOKS lattice looks at
 * V2_SHARE_LATTICE / V2_LATTICE_LOOKS, counted or not (union bound: none of these alignments read part C).
 * Reports the test that fired, else the main one.
 */
export function decideV2(out: {
  cells: Float64Array;
  phaseCells?: Float64Array;
  refinedCells?: Float64Array;
  runnerCells?: Float64Array;
  identityCells?: Float64Array;
  latticeCells?: Float64Array;
}): CellTest & { present: boolean } {
  const main = cellTest(out.cells);
  if (main.pValue <= FPR_PER_SCHEME * V2_SHARE_MAIN) return { ...main, present: true };
  const per = out.cells.length;
  const phases = out.phaseCells ?? new Float64Array(0);
  for (let q = 0; q < Math.min(V2_PHASE_LOOKS, phases.length / per); q++) {
    const t = cellTest(phases.subarray(q * per, (q + 1) * per));
    if (t.pValue <= (FPR_PER_SCHEME * V2_SHARE_PHASES) / V2_PHASE_LOOKS) return { ...t, present: true };
  }
  if (out.refinedCells?.length) {
    const t = cellTest(out.refinedCells);
    if (t.pValue <= FPR_PER_SCHEME * V2_SHARE_SECOND) return { ...t, present: true };
  }
  const runners = out.runnerCells ?? new Float64Array(0);
  for (let r = 0; r < Math.min(V2_RUNNERS, runners.length / per); r++) {
    const t = cellTest(runners.subarray(r * per, (r + 1) * per));
    if (t.pValue <= (FPR_PER_SCHEME * V2_SHARE_RUNNERS) / V2_RUNNERS) return { ...t, present: true };
  }
  const looks = out.identityCells ?? new Float64Array(0);
  for (let r = 0; r < Math.min(V2_IDENTITY_LOOKS, looks.length / per); r++) {
    const t = cellTest(looks.subarray(r * per, (r + 1) * per));
    if (t.pValue <= (FPR_PER_SCHEME * V2_SHARE_IDENTITY) / V2_IDENTITY_LOOKS) return { ...t, present: true };
  }
  const lattices = out.latticeCells ?? new Float64Array(0);
  for (let r = 0; r < Math.min(V2_LATTICE_LOOKS, lattices.length / per); r++) {
    const t = cellTest(lattices.subarray(r * per, (r + 1) * per));
    if (t.pValue <= (FPR_PER_SCHEME * V2_SHARE_LATTICE) / V2_LATTICE_LOOKS) return { ...t, present: true };
  }
  return { ...main, present: false };
}
