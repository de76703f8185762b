/**
 * Version 2's sync: a period fold correlated with part A of the key under the 8 symmetries of the square,
 * the peaks of its surfaces, and the choice of distinct alignments among them. No key material but A and
 * its template's frequencies is read.
 */
import { fft2d } from '../common/fft.js';
import { parabolaPeak } from '../common/filters.js';
import { DIHEDRAL } from './types.js';

/** Lattices this close (relative) are one alignment (runner-ups; the candidates' distance is params.sameAsIdentity). */
const SAME_AS_IDENTITY = 0.02;

/** k(D u mod n) for every u of an n x n key part. */
function transformed(key: Float32Array, n: number, d: readonly number[]): Float64Array {
  const out = new Float64Array(n * n);
  const m = n - 1;
  for (let y = 0; y < n; y++) {
    for (let x = 0; x < n; x++) {
      const kx = (d[0]! * x + d[1]! * y) & m;
      const ky = (d[2]! * x + d[3]! * y) & m;
      out[y * n + x] = key[ky * n + kx]!;
    }
  }
  return out;
}

export interface SyncHit {
  z: number;
  d: number;
  tx: number;
  ty: number;
  fx: number;
  fy: number;
}

/** A sync hit on the lattice it was folded on (period vectors [v1x, v1y, v2x, v2y]). */
export interface Alignment {
  hit: SyncHit;
  v: number[];
}

/** The hit at surface index i (value z after normalising) with its sub-pixel offset from the parabola through its neighbours. */
function peakAt(pr: Float64Array, n: number, i: number, z: number, d: number): SyncHit {
  const m = n - 1;
  const ty = Math.floor(i / n);
  const tx = i % n;
  const v = pr[i]!;
  const sub = (a: number, b: number): number => parabolaPeak(a, v, b);
  return {
    z,
    d,
    tx,
    ty,
    fx: sub(pr[ty * n + ((tx - 1) & m)]!, pr[ty * n + ((tx + 1) & m)]!),
    fy: sub(pr[((ty - 1) & m) * n + tx]!, pr[((ty + 1) & m) * n + tx]!),
  };
}

/** Pushes the local maxima (no cyclic 3 x 3 neighbour higher) of a sync surface whose z (value / sd) reaches `floor`. */
function localPeaks(pr: Float64Array, n: number, sd: number, floor: number, d: number, out: SyncHit[]): void {
  const m = n - 1;
  const min = floor * sd;
  for (let i = 0; i < n * n; i++) {
    const v = pr[i]!;
    if (!(v >= min)) continue;
    const ty = Math.floor(i / n);
    const tx = i % n;
    let top = true;
    for (let ey = -1; ey <= 1 && top; ey++) {
      for (let ex = -1; ex <= 1; ex++) {
        if ((ex || ey) && pr[((ty + ey) & m) * n + ((tx + ex) & m)]! > v) {
          top = false;
          break;
        }
      }
    }
    if (top) out.push(peakAt(pr, n, i, v / sd, d));
  }
}

/** Whether two alignments are one: same symmetry, shifts within 1 px (cyclic), lattices within SAME_AS_IDENTITY. */
function sameAlignment(a: Alignment, b: Alignment, period: number): boolean {
  const near = (s: number, t: number): boolean => {
    const e = (s - t) & (period - 1);
    return e <= 1 || e >= period - 1;
  };
  if (a.hit.d !== b.hit.d || !near(a.hit.tx, b.hit.tx) || !near(a.hit.ty, b.hit.ty)) return false;
  const len = Math.hypot(b.v[0]!, b.v[1]!);
  for (let i = 0; i < 4; i++) if (Math.abs(a.v[i]! - b.v[i]!) >= SAME_AS_IDENTITY * len) return false;
  return true;
}

/**
 * The `count` best of `peaks` by sync z, best first, none the same alignment as one already `taken` or as
 * a better one picked here: the runner-ups (the peaks of every symmetry of every lattice the search folded,
 * the chosen alignment taken) and the identity looks (the identity symmetry's peaks on the chosen lattice,
 * the chosen alignment and the runner-ups taken). A function of the picture and part A only (ties keep the
 * search's order).
 */
export function runnerPeaks(peaks: Alignment[], taken: Alignment[], count: number, period: number): Alignment[] {
  const order = peaks.slice().sort((a, b) => b.hit.z - a.hit.z);
  const out: Alignment[] = [];
  for (const pk of order) {
    if (out.length >= count) break;
    if (taken.some((o) => sameAlignment(pk, o, period)) || out.some((o) => sameAlignment(pk, o, period))) continue;
    out.push(pk);
  }
  return out;
}

/**
 * Correlates a period x period fold with part A under each symmetry: corr_D(t) = sum_u F(u) W_D(u + t),
 * W the key part A with each frequency's amplitude raised to the power 0.25. Most of A's power sits in the
 * template's 24 frequencies, so this leans towards them as a matched filter would, only less: a
 * phase-only filter gave every frequency of the host the same say (a weak mark was lost in it), the
 * matched filter lets two template peaks that a wrong lattice happens to fold coherently (an aspect
 * change of 3/4 maps harmonic 3 onto 4) pass for a mark, and its few frequencies give unmarked pictures
 * a heavier tail. Measured on the 18 photographs (bench attacks, 3 keys): at 0.25 unmarked pictures
 * reach the refinement threshold as often as with phase only (26 of 972 trials, 27 before), at 0.5 and 1
 * more. Sync z is the peak over the surface's noise level, sqrt(sum_k |W_D(k)|^2 Q(k)) (Parseval: the
 * variance the surface has at any shift when the fold is noise of power Q), with Q(k) the fold's power |F(k)|^2, except at the template's frequencies, where Q
 * is the mean power of their other 3 x 3 neighbours: the mark's own power there is not noise, so a strong
 * mark is not capped by the key's sidelobes. No key material but A and its template's frequencies is read.
 */
export class SyncA {
  private readonly n: number;
  private readonly specs: { re: Float64Array; im: Float64Array; w2: Float64Array }[] = [];
  /** 1 at the template's frequencies (the same set under every symmetry: its orbits are symmetric). */
  private readonly tpl: Uint8Array;
  constructor(a: Float32Array, n: number, harm: Float64Array, power: number) {
    this.n = n;
    const m = n - 1;
    this.tpl = new Uint8Array(n * n);
    for (let i = 0; i < harm.length; i += 2) {
      this.tpl[(harm[i + 1]! & m) * n + (harm[i]! & m)] = 1;
      this.tpl[(-harm[i + 1]! & m) * n + (-harm[i]! & m)] = 1;
    }
    for (const d of DIHEDRAL) {
      const re = transformed(a, n, d);
      const im = new Float64Array(n * n);
      fft2d(re, im, n, -1);
      // A's phase with |A(k)|^0.25: between the matched filter (power 1), best against a weak mark,
      // and phase only (power 0), which no small set of frequencies can dominate (see the class comment).
      const w2 = new Float64Array(n * n);
      for (let i = 0; i < n * n; i++) {
        // |A|^(power - 1) = (|A|^2)^((power - 1) / 2), as the native core computes it.
        const a2 = re[i]! * re[i]! + im[i]! * im[i]!;
        const k = a2 > 0 ? a2 ** (0.5 * (power - 1)) : 0;
        re[i]! *= k;
        im[i]! *= k;
        w2[i] = re[i]! * re[i]! + im[i]! * im[i]!;
      }
      this.specs.push({ re, im, w2 });
    }
  }
  /** The best peak over the symmetries (or `only`); with `peaks`, also pushes every local maximum from z `floor` (runnerPeaks). */
  best(f: Float64Array, only = -1, peaks?: SyncHit[], floor = Infinity): SyncHit {
    const n = this.n;
    const n2 = n * n;
    const m = n - 1;
    const fr = Float64Array.from(f);
    const fi = new Float64Array(n2);
    fft2d(fr, fi, n, -1);
    // The fold's power as the host's, the template's frequencies from their neighbours.
    const q = new Float64Array(n2);
    for (let k = 0; k < n2; k++) q[k] = fr[k]! * fr[k]! + fi[k]! * fi[k]!;
    const qn = Float64Array.from(q);
    for (let k = 0; k < n2; k++) {
      if (!this.tpl[k]) continue;
      const ky = Math.floor(k / n);
      const kx = k % n;
      let acc = 0;
      let cnt = 0;
      for (let ey = -1; ey <= 1; ey++) {
        for (let ex = -1; ex <= 1; ex++) {
          const j = ((ky + ey) & m) * n + ((kx + ex) & m);
          if (this.tpl[j]) continue;
          acc += q[j]!;
          cnt++;
        }
      }
      if (cnt) qn[k] = acc / cnt;
    }
    let hit: SyncHit = { z: -Infinity, d: 0, tx: 0, ty: 0, fx: 0, fy: 0 };
    const pr = new Float64Array(n2);
    const pi = new Float64Array(n2);
    for (let d = only < 0 ? 0 : only; d < (only < 0 ? 8 : only + 1); d++) {
      const s = this.specs[d]!;
      // IFFT(conj(F) S) = sum_u F(u) S(u + t)
      let noise = 0;
      for (let i = 0; i < n2; i++) {
        pr[i] = fr[i]! * s.re[i]! + fi[i]! * s.im[i]!;
        pi[i] = fr[i]! * s.im[i]! - fi[i]! * s.re[i]!;
        noise += s.w2[i]! * qn[i]!;
      }
      fft2d(pr, pi, n, 1);
      let best = 0;
      for (let i = 1; i < n2; i++) if (pr[i]! > pr[best]!) best = i;
      const sd = Math.sqrt(noise);
      const z = sd > 0 ? pr[best]! / sd : 0;
      if (z > hit.z) hit = peakAt(pr, n, best, z, d);
      if (peaks && sd > 0) localPeaks(pr, n, sd, floor, d, peaks);
    }
    return hit;
  }
}
