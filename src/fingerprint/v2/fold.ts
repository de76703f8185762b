/** Version 2's fold: the prefiltered picture resampled on a lattice frame and summed onto one tile. */
import { TILE } from '../params.js';

const TM = TILE - 1;

/**
 * Resamples x (prefiltered, fw x fh) on the lattice frame and folds onto one TILE x TILE tile: integer
 * frame point (i, j) sits at centre + V (i + ox, j + oy) / period, V's columns the two period vectors.
 */
export function foldLattice(x: Float32Array, fw: number, fh: number, v: number[], period: number, ox: number, oy: number, out: Float64Array): number {
  out.fill(0);
  const cx = (fw - 1) / 2;
  const cy = (fh - 1) / 2;
  const ax = v[0]! / period,
    ay = v[1]! / period,
    bx = v[2]! / period,
    by = v[3]! / period;
  const det = ax * by - bx * ay;
  if (!(Math.abs(det) > 1e-9)) return 0;
  // Frame coordinates of the image corners give the range of (i, j).
  let imin = Infinity,
    imax = -Infinity,
    jmin = Infinity,
    jmax = -Infinity;
  for (const [px, py] of [
    [0, 0],
    [fw - 1, 0],
    [0, fh - 1],
    [fw - 1, fh - 1],
  ] as const) {
    const dx = px - cx;
    const dy = py - cy;
    const fi = (by * dx - bx * dy) / det - ox;
    const fj = (-ay * dx + ax * dy) / det - oy;
    imin = Math.min(imin, fi);
    imax = Math.max(imax, fi);
    jmin = Math.min(jmin, fj);
    jmax = Math.max(jmax, fj);
  }
  let n = 0;
  const i0 = Math.floor(imin);
  const i1 = Math.ceil(imax);
  for (let j = Math.floor(jmin); j <= Math.ceil(jmax); j++) {
    const baseX = cx + bx * (j + oy) + ax * ox;
    const baseY = cy + by * (j + oy) + ay * ox;
    const row = (j & TM) * TILE;
    for (let i = i0; i <= i1; i++) {
      const sx = baseX + ax * i;
      const sy = baseY + ay * i;
      if (!(sx >= 0 && sy >= 0 && sx <= fw - 1 && sy <= fh - 1)) continue;
      let x0 = Math.floor(sx);
      let y0 = Math.floor(sy);
      if (x0 >= fw - 1) x0 = fw - 2;
      if (y0 >= fh - 1) y0 = fh - 2;
      const fx = sx - x0;
      const fy = sy - y0;
      const p = y0 * fw + x0;
      const top = x[p]! + fx * (x[p + 1]! - x[p]!);
      const bot = x[p + fw]! + fx * (x[p + fw + 1]! - x[p + fw]!);
      out[row + (i & TM)]! += top + fy * (bot - top);
      n++;
    }
  }
  return n;
}
