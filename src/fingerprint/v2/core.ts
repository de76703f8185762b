/**
 * Version-2 detection core in TypeScript (the reference; native/src/v2-core.cc and its siblings port it).
 * One call per image: pixels at the base resolution in, the chosen alignment and the count cells out.
 *
 * 1. Lattice (spectrum.ts, lattice.ts). The mark repeats every V2_PERIOD work pixels, so the power
 *    spectrum of the prefiltered picture has peaks on the reciprocal lattice of two period vectors,
 *    wherever the picture was cropped and however it was scaled, rotated or stretched. Hypotheses of
 *    the geometry are scored by the template's comb on the whitened spectrum. No key is used but the
 *    template's frequencies.
 * 2. Alignment (fold.ts, sync.ts). For each lattice candidate (plus the no-geometry one) the picture is
 *    resampled on the lattice frame and folded onto one TILE x TILE tile; its V2_PERIOD fold is
 *    correlated with part A under each of the 8 symmetries of the square; the highest peak over its
 *    noise level (sync z) picks the candidate, the symmetry and the shift mod V2_PERIOD.
 * 3. Count (count.ts). Part B picks the tile phase among the (TILE / V2_PERIOD)^2 left; each CELL x CELL
 *    cell of part C is correlated with its own key material. Nothing in 1-2 reads part C, which keeps the
 *    decision's bound exact; the extra looks below are a fixed number of tests the decision pays for.
 */
import { luma, prefilter } from '../common/filters.js';
import { TILE } from '../params.js';
import { countAt, phaseOffset, selfNormalised, shiftedCells } from './count.js';
import { foldLattice } from './fold.js';
import { CROP_MIN, latticeCandidates } from './lattice.js';
import { type Alignment, type SyncHit, SyncA, runnerPeaks } from './sync.js';
import { type Core2Input, type Core2Output, DIHEDRAL } from './types.js';

const T2 = TILE * TILE;

/** Runs version 2's detection on one picture (see the steps above). */
export function detectCore2(input: Core2Input): Core2Output {
  const { width: w, height: h, params: p } = input;
  const period = p.period;
  const y = luma(input.pixels, w, h, input.channels);
  // Every lattice is folded from the picture prefiltered at its own resolution, however large the period;
  // version 2 reads the high-pass over the local energy, version 1's prefilter is made in the same pass.
  const x = new Float32Array(w * h);
  const x1 = prefilter(y, w, h, p, { plane: x, floor: p.energyFloor });
  const sync = new SyncA(input.a, period, input.harmonics, p.syncPower);
  const fold = new Float64Array(T2);
  const small = new Float64Array(period * period);

  // Local maxima of the search's sync surfaces (not the refinement's), for the runner-up alignments.
  const peaks: Alignment[] = [];
  let collect = p.runners > 0;
  const trySync = (v: number[], only = -1): Alignment => {
    foldLattice(x, w, h, v, period, 0, 0, fold);
    small.fill(0);
    for (let j = 0; j < TILE; j++) for (let i = 0; i < TILE; i++) small[(j % period) * period + (i % period)]! += fold[j * TILE + i]!;
    const found: SyncHit[] = [];
    const hit = sync.best(small, only, collect ? found : undefined, p.runnerZ);
    for (const f of found) peaks.push({ hit: f, v });
    return { hit, v };
  };

  const p0 = (period * Math.min(w, h)) / input.workShort;
  let best = trySync([p0, 0, 0, p0]);
  // The chosen lattice's period fold, for the identity looks (step 10) to read without folding again.
  const bestSmall = Float64Array.from(small);
  let identity = true;
  let tier = 1;
  let tried = 1;
  let combScore = -Infinity;
  let aspectScore = -Infinity;
  let rotationScore = -Infinity;
  if (best.hit.z < p.fastZ) {
    tier = 2;
    const found = latticeCandidates(x, w, h, input.native === 1, input.harmonics, p, (CROP_MIN * p0) / period);
    const cands = found.cands;
    combScore = found.top;
    aspectScore = found.aspect;
    rotationScore = found.rotation;
    const v0 = [p0, 0, 0, p0];
    for (const v of cands) {
      // A hypothesis within 2% of the no-geometry one is that one, already tried: folded again it could
      // win on noise with a slightly wrong period (the refinement, which would correct it, needs z >= refineZ).
      let off = 0;
      for (let i = 0; i < 4; i++) off = Math.max(off, Math.abs(v[i]! - v0[i]!));
      if (off < p.sameAsIdentity * p0) continue;
      tried++;
      const r = trySync(v);
      if (r.hit.z > best.hit.z) {
        best = r;
        bestSmall.set(small);
        identity = false;
      }
    }
  }

  // Coherent refinement of a lattice: small linear maps (I + E) V that raise the sync z (same symmetry).
  // The spectrum's estimate is good to about 1%; the fold wants better over many periods. `gated`: only
  // from sync z p.refineZ (unmarked pictures rarely get there; the second look below refines without it).
  const refine = (start: Alignment, gated: boolean): Alignment => {
    let at = start;
    for (const eps of [0.004, 0.0015]) {
      if (gated && at.hit.z < p.refineZ) break;
      for (let iter = 0; iter < 3; iter++) {
        let moved = false;
        for (let e = 0; e < 8; e++) {
          const k = (e & 1 ? -1 : 1) * eps;
          const r = e >> 1;
          const [v0, v1, v2, v3] = at.v as [number, number, number, number];
          // E has one non-zero entry: row r >> 1, column r & 1, acting on the columns (v0, v1) and (v2, v3).
          const row = r >> 1;
          const col = r & 1;
          // (I + E) V, V's columns (v0, v1) and (v2, v3).
          const ex = [0, 0, 0, 0];
          ex[row * 2 + col] = k;
          const cand = [v0 + ex[0]! * v0 + ex[1]! * v1, v1 + ex[2]! * v0 + ex[3]! * v1, v2 + ex[0]! * v2 + ex[1]! * v3, v3 + ex[2]! * v2 + ex[3]! * v3];
          tried++;
          const r2 = trySync(cand, at.hit.d);
          if (r2.hit.z > at.hit.z) {
            at = r2;
            moved = true;
          }
        }
        if (!moved) break;
      }
    }
    return at;
  };

  collect = false;
  // The no-geometry lattice is exact for every copy without geometry; refining it would only chase noise.
  const unrefined = best;
  if (tier === 2 && !identity) best = refine(best, true);
  const main = countAt(input, x, best, period, fold);
  // Hypotheses of the alignment proper (the second look's folds, which the count gates, are not counted).
  const candidates = tried;

  // Other tile phases of the chosen alignment (part B picks one of 16 and is weak on small crops), only
  // when the sync is not at the noise level: part B's next p.phaseLooks choices, in its order (where another
  // phase held the mark it was always B's 2nd or 3rd; bench/RESULTS.md, "Fingerprint", step 7).
  let phaseCells: Float64Array = new Float64Array(0);
  if (best.hit.z >= p.phasesZ) {
    const per = TILE / p.cell;
    const looks = main.order.slice(1, 1 + p.phaseLooks);
    phaseCells = new Float64Array(p.phaseLooks * per * per);
    looks.forEach((q, i) => phaseCells.set(shiftedCells(main.g, input.c, phaseOffset(DIHEDRAL[best.hit.d]!, q, period), period, p.cell), i * per * per));
  }

  // Second look: when the lattice came from the spectrum and was not refined (sync z under refineZ) but
  // the count already leans towards a mark, refine it anyway and count again. Which hypotheses may be
  // tested does not depend on C (the refined lattice is a function of the picture and A); only whether
  // this one is looked at does, which the union bound of the decision covers (docs/fingerprint.md).
  // When the refinement did run and moved the lattice, the second look is the other way round: the
  // unrefined lattice is counted too (the refinement can chase A's noise and lose the count).
  let refinedCells: Float64Array = new Float64Array(0);
  let refinedSyncZ = 0;
  if (tier === 2 && !identity && unrefined.hit.z < p.refineZ && selfNormalised(main.cells) >= p.secondT) {
    const again = refine(unrefined, false);
    if (again !== unrefined) {
      refinedCells = countAt(input, x, again, period, fold).cells;
      refinedSyncZ = again.hit.z;
    }
  } else if (best !== unrefined) {
    refinedCells = countAt(input, x, unrefined, period, fold).cells;
    refinedSyncZ = unrefined.hit.z;
  }

  // Runner-up alignments: when the search's best sync z is under refineZ (an uncertain alignment), the
  // next p.runners distinct peaks of its surfaces from sync z p.runnerZ are counted too, each at its own
  // best tile phase; the decision pays for p.runners tests whether or not they run (docs/fingerprint.md).
  const runnerZ = new Float64Array(p.runners);
  // Identity looks: then the best peaks of the identity symmetry's surface on the chosen lattice (not the
  // chosen alignment, not a runner-up), each at its own best tile phase; the decision pays for
  // p.identityLooks tests whether or not they run. Crops, borders, resizes and small rotations keep the
  // picture's symmetry, and on a weak quarter crop the template, which every symmetry partly matches, can
  // put several wrong symmetries above the true one (bench/RESULTS.md, "Fingerprint", step 10).
  const identityZ = new Float64Array(p.identityLooks);
  /** Counts each alignment of `list` into `slots` blocks of cells (zeros where none; empty for none), its sync z into `zs`. */
  const countEach = (list: Alignment[], slots: number, zs: Float64Array): Float64Array => {
    if (!list.length) return new Float64Array(0);
    const per = (TILE / p.cell) ** 2;
    const cells = new Float64Array(slots * per);
    list.forEach((r, i) => {
      cells.set(countAt(input, x, r, period, fold).cells, i * per);
      zs[i] = r.hit.z;
    });
    return cells;
  };
  let runnerCells: Float64Array = new Float64Array(0);
  let identityCells: Float64Array = new Float64Array(0);
  const taken = [unrefined];
  const uncertain = tier === 2 && unrefined.hit.z < p.refineZ;
  if (uncertain) {
    const picked = runnerPeaks(peaks, taken, p.runners, period);
    runnerCells = countEach(picked, p.runners, runnerZ);
    taken.push(...picked);
  }
  // The identity looks run when the alignment is uncertain, and also when the search chose another
  // symmetry than the identity (a crop does not flip the picture: step 10).
  if (uncertain || (tier === 2 && unrefined.hit.d !== 0)) {
    if (p.identityLooks > 0) {
      const found: SyncHit[] = [];
      sync.best(bestSmall, 0, found, -Infinity);
      const surface = found.map((hit) => ({ hit, v: unrefined.v }));
      const looks = runnerPeaks(surface, taken, p.identityLooks, period);
      identityCells = countEach(looks, p.identityLooks, identityZ);
      taken.push(...looks);
    }
  }
  // Lattice looks: the best peak of each of the next p.latticeLooks lattices the search folded (other than
  // the chosen one), by that peak's sync z, from p.latticeLookZ, whatever the chosen alignment's sync z; the
  // decision pays for p.latticeLooks tests whether or not they run. A wrong lattice that folds several of
  // the template's peaks coherently can out-sync the true one on a weak quarter crop (bench/RESULTS.md, "Fingerprint", step 11).
  const latticeZ = new Float64Array(p.latticeLooks);
  let latticeCells: Float64Array = new Float64Array(0);
  if (tier === 2 && p.latticeLooks > 0) {
    const seen: number[][] = [unrefined.v];
    const bests: Alignment[] = [];
    for (const pk of peaks.slice().sort((u, w) => w.hit.z - u.hit.z)) {
      if (pk.hit.z < p.latticeLookZ) break;
      if (seen.some((v) => v.every((e, i) => e === pk.v[i]))) continue;
      seen.push(pk.v);
      bests.push(pk);
    }
    latticeCells = countEach(runnerPeaks(bests, taken, p.latticeLooks, period), p.latticeLooks, latticeZ);
  }

  input.keepPrefiltered?.set(x1);
  return {
    lattice: Float64Array.from(best.v),
    dihedral: best.hit.d,
    dx: main.dx,
    dy: main.dy,
    syncZ: best.hit.z,
    phaseZ: main.phaseZ,
    tier,
    candidates,
    combScore,
    aspectScore,
    rotationScore,
    cells: main.cells,
    phaseCells,
    refinedCells,
    refinedSyncZ,
    runnerCells,
    runnerZ,
    identityCells,
    identityZ,
    latticeCells,
    latticeZ,
  };
}
