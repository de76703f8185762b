/**
 * Version 2's count: the fold at an alignment moved into key coordinates, the tile phase picked by part B,
 * and each count cell of part C correlated with its own key material (the decision reads only these).
 */
import { TILE } from '../params.js';
import { foldLattice } from './fold.js';
import type { Alignment } from './sync.js';
import { type Core2Input, DIHEDRAL } from './types.js';

const T2 = TILE * TILE;
const TM = TILE - 1;

/** T = sum c / sqrt(sum c^2) of a set of cells (0 when all are 0). */
export function selfNormalised(cells: Float64Array): number {
  let s = 0;
  let q = 0;
  for (const c of cells) {
    s += c;
    q += c * c;
  }
  return q > 0 ? s / Math.sqrt(q) : 0;
}

/**
 * The fold in key coordinates of tile phase (tx, ty) under D: g[D (u + t)] = fold[u] (frame point u carries

 * key position D (u + t)). Tile phase q = (qx, qy) adds D (qx, qy) period to every key position: whole
 * blocks of `period`, so each phase below is a few contiguous passes over g and the key.
 */
function keyFrame(fold: Float64Array, D: readonly number[], tx: number, ty: number): Float64Array {
  const g = new Float64Array(T2);
  for (let j = 0; j < TILE; j++) {
    const uy = j + ty;
    for (let i = 0; i < TILE; i++) {
      const ux = i + tx;
      g[((D[2]! * ux + D[3]! * uy) & TM) * TILE + ((D[0]! * ux + D[1]! * uy) & TM)] = fold[j * TILE + i]!;
    }
  }
  return g;
}

/** Key offset e = D (qx, qy) period (mod TILE) of tile phase q. */
export function phaseOffset(D: readonly number[], q: number, period: number): [number, number] {
  const reps = TILE / period;
  const qx = (q % reps) * period;
  const qy = Math.floor(q / reps) * period;
  return [(D[0]! * qx + D[1]! * qy) & TM, (D[2]! * qx + D[3]! * qy) & TM];
}

/** acc[k'x] += g[k' - e] key[k'] over the key rows k'y in [y0, y1) (the native core's order). */
function accumulateRows(g: Float64Array, key: Float32Array, ex: number, ey: number, period: number, y0: number, y1: number, acc: Float64Array): void {
  for (let ky = y0; ky < y1; ky++) {
    const gr = ((ky - ey) & TM) * TILE;
    const kr = ky * TILE;
    for (let kx0 = 0; kx0 < TILE; kx0 += period) {
      const gs = gr + ((kx0 - ex) & TM);
      for (let t = 0; t < period; t++) acc[kx0 + t]! += g[gs + t]! * key[kr + kx0 + t]!;
    }
  }
}

/** sum_k g[k] key[k + e]: the fold's correlation with a key part at tile phase e. */
function shiftedDot(g: Float64Array, key: Float32Array, e: [number, number], period: number): number {
  const acc = new Float64Array(TILE);
  accumulateRows(g, key, e[0], e[1], period, 0, TILE, acc);
  let s = 0;
  for (let i = 0; i < TILE; i++) s += acc[i]!;
  return s;
}

/** Count cells at tile phase e: cell (k + e) collects g[k] c[k + e]. */
export function shiftedCells(g: Float64Array, c: Float32Array, e: [number, number], period: number, cell: number): Float64Array {
  const per = TILE / cell;
  const cells = new Float64Array(per * per);
  const acc = new Float64Array(TILE);
  for (let cy = 0; cy < per; cy++) {
    acc.fill(0);
    accumulateRows(g, c, e[0], e[1], period, cy * cell, (cy + 1) * cell, acc);
    for (let cx = 0; cx < per; cx++) {
      let s = 0;
      for (let t = 0; t < cell; t++) s += acc[cx * cell + t]!;
      cells[cy * per + cx] = s;
    }
  }
  return cells;
}

/**
 * Folds again at an alignment with its sub-pixel shift (into `fold`), picks the tile phase with part B
 * and counts the cells there.
 */
export function countAt(
  input: Core2Input,
  x: Float32Array,
  best: Alignment,
  period: number,
  fold: Float64Array,
): { cells: Float64Array; g: Float64Array; order: number[]; dx: number; dy: number; phaseZ: number } {
  const reps = TILE / period;
  const { d, tx, ty, fx, fy } = best.hit;
  foldLattice(x, input.width, input.height, best.v, period, -fx, -fy, fold);
  const D = DIHEDRAL[d]!;
  const g = keyFrame(fold, D, tx, ty);
  const scores: number[] = [];
  for (let k = 0; k < reps * reps; k++) scores.push(shiftedDot(g, input.b, phaseOffset(D, k, period), period));
  // Tile phases by part B's score, best first (ties: lower phase first); B's choice is the first.
  const order = scores.map((_, i) => i).sort((i, j) => scores[j]! - scores[i]! || i - j);
  const q = order[0]!;
  let m = 0;
  let sq = 0;
  for (const s of scores) m += s / scores.length;
  for (const s of scores) sq += (s - m) ** 2;
  const phaseZ = sq > 0 ? (scores[q]! - m) / Math.sqrt(sq / scores.length) : 0;
  const sx = tx + (q % reps) * period;
  const sy = ty + Math.floor(q / reps) * period;
  return { cells: shiftedCells(g, input.c, phaseOffset(D, q, period), period, input.params.cell), g, order, dx: sx + fx, dy: sy + fy, phaseZ };
}
