// Version 2's detection core (src/fingerprint/v2/core.ts and count.ts): the no-geometry hypothesis, the
// lattice candidates, the refinement, the tile phase and the count cells, and the fixed set of extra looks
// the decision pays for. Same order of operations as the reference so that both pick the same alignment;
// sums are in double as there.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "simd.h"
#include "v2-internal.h"

namespace optmark {
namespace v2 {
namespace {

constexpr double kSameAsIdentity = 0.02;  // lattices this close (relative) are one alignment (runner-ups)

// The fold in key coordinates of tile phase (tx, ty) under D: g[D (u + t)] = fold[u] (frame point u
// carries key position D (u + t)). Tile phase q = (qx, qy) adds D (qx, qy) period to every key position:
// whole blocks of `period`, so each phase below is a few contiguous passes over g and the key.
void KeyFrame(const double* fold, const int* D, int tx, int ty, double* g) {
  for (int j = 0; j < kT; j++) {
    const int uy = j + ty;
    for (int i = 0; i < kT; i++) {
      const int ux = i + tx;
      g[size_t((D[2] * ux + D[3] * uy) & kTM) * kT + ((D[0] * ux + D[1] * uy) & kTM)] = fold[size_t(j) * kT + i];
    }
  }
}

// Key offset e = D (qx, qy) period (mod kTile) of tile phase q.
void PhaseOffset(const int* D, int q, int period, int& ex, int& ey) {
  const int reps = kT / period, qx = (q % reps) * period, qy = (q / reps) * period;
  ex = (D[0] * qx + D[1] * qy) & kTM;
  ey = (D[2] * qx + D[3] * qy) & kTM;
}

// acc[k'x] += g[k' - e] key[k'] over the key rows k'y in [y0, y1) (element by element: vectorises).
OPTMARK_CLONES
void AccumulateRows(const double* g, const float* key, int ex, int ey, int period, int y0, int y1, double* acc) {
  for (int ky = y0; ky < y1; ky++) {
    const double* gr = g + size_t((ky - ey) & kTM) * kT;
    const float* kr = key + size_t(ky) * kT;
    for (int kx0 = 0; kx0 < kT; kx0 += period) {
      const double* gs = gr + ((kx0 - ex) & kTM);
      double* as = acc + kx0;
      const float* ks = kr + kx0;
      for (int t = 0; t < period; t++) as[t] += gs[t] * ks[t];
    }
  }
}

// sum_k g[k] key[k + e]: the fold's correlation with a key part at tile phase e.
double ShiftedDot(const double* g, const float* key, int ex, int ey, int period) {
  double acc[kT] = {};
  AccumulateRows(g, key, ex, ey, period, 0, kT, acc);
  double s = 0;
  for (int i = 0; i < kT; i++) s += acc[i];
  return s;
}

// Count cells at tile phase e: cell (k + e) collects g[k] c[k + e].
void ShiftedCells(const double* g, const float* c, int ex, int ey, int period, int cell, double* cells) {
  const int per = kT / cell;
  for (int cy = 0; cy < per; cy++) {
    double acc[kT] = {};
    AccumulateRows(g, c, ex, ey, period, cy * cell, (cy + 1) * cell, acc);
    for (int cx = 0; cx < per; cx++) {
      double s = 0;
      for (int t = 0; t < cell; t++) s += acc[cx * cell + t];
      cells[cy * per + cx] = s;
    }
  }
}

// T = sum c / sqrt(sum c^2) of a set of cells (0 when all are 0).
double SelfNormalised(const double* cells, int n) {
  double s = 0, q = 0;
  for (int i = 0; i < n; i++) {
    s += cells[i];
    q += cells[i] * cells[i];
  }
  return q > 0 ? s / std::sqrt(q) : 0;
}

// Whether two alignments (hit and lattice v) are one: same symmetry, shifts within 1 px (cyclic), lattices
// within kSameAsIdentity.
template <class A>
bool SameAlignment(const A& a, const A& b, int period) {
  auto near = [period](int s, int t) {
    const int e = (s - t) & (period - 1);
    return e <= 1 || e >= period - 1;
  };
  if (a.hit.d != b.hit.d || !near(a.hit.tx, b.hit.tx) || !near(a.hit.ty, b.hit.ty)) return false;
  const double len = std::hypot(b.v[0], b.v[1]);
  for (int i = 0; i < 4; i++)
    if (std::abs(a.v[i] - b.v[i]) >= kSameAsIdentity * len) return false;
  return true;
}

// The `count` best of `peaks` by sync z, best first, none the same alignment as one already `taken` or as a
// better one picked here (the runner-ups and the identity looks; ties keep the search's order).
template <class A>
std::vector<A> RunnerPeaks(const std::vector<A>& peaks, const std::vector<A>& taken, int count, int period) {
  std::vector<A> order = peaks;
  std::stable_sort(order.begin(), order.end(), [](const A& a, const A& b) { return a.hit.z > b.hit.z; });
  std::vector<A> out;
  for (const A& pk : order) {
    if (int(out.size()) >= count) break;
    bool dup = false;
    for (const A& o : taken) dup = dup || SameAlignment(pk, o, period);
    for (const A& o : out) dup = dup || SameAlignment(pk, o, period);
    if (!dup) out.push_back(pk);
  }
  return out;
}

// The tile fold folded onto the period (which divides kTile): each bin sums its tile pixels in the same
// order as a pixel-by-pixel sweep (rows, then columns); the rows' additions vectorise.
OPTMARK_CLONES
void PeriodFold(const double* __restrict fold, int period, double* __restrict small) {
  std::fill(small, small + size_t(period) * period, 0.0);
  for (int j = 0; j < kT; j++) {
    double* __restrict sr = small + size_t(j % period) * period;
    const double* __restrict fr = fold + size_t(j) * kT;
    for (int i0 = 0; i0 < kT; i0 += period)
      for (int i = 0; i < period; i++) sr[i] += fr[i0 + i];
  }
}

}  // namespace
}  // namespace v2

void DetectCore2(const Core2In& in, const Core2Params& p, Core2Out& out) {
  using namespace v2;  // NOLINT: the steps of this core
  const int w = in.width, h = in.height, period = p.period;
  const size_t n = size_t(w) * h;
  // Per-thread planes (their pages are kept from call to call). Every lattice is folded from the picture
  // prefiltered at its own resolution, however large the period (bench/RESULTS.md, "Fingerprint", step 5). Version 2
  // reads the high-pass over the local energy (x); version 1's prefilter (over the local RMS) is made in
  // the same pass for it (x1).
  thread_local std::vector<float> y, x, x1;
  y.resize(n);
  LumaOf(in.pixels, w, h, in.channels, y.data());
  x.resize(n);
  if (!in.prefilteredOut) x1.resize(n);
  PrefilterOf(y.data(), w, h, p.sigmaHighpass, p.sigmaLocal, p.localFloor, in.prefilteredOut ? in.prefilteredOut : x1.data(), x.data(), p.energyFloor);
  const SyncA& sync = SyncAFor(in.a, period, in.harmonics, in.nHarmonics, p.syncPower);
  thread_local std::vector<double> fold, small, keyFold;
  fold.resize(kT2);
  small.resize(size_t(period) * period);
  keyFold.resize(kT2);
  const int reps = kT / period;

  struct Tried {
    SyncHit hit;
    double v[4];
    bool moved = false;  // set by refine when it changed the lattice
  };
  // Local maxima of the search's sync surfaces (not the refinement's), for the runner-up alignments.
  std::vector<Tried> peaks;
  std::vector<SyncHit> found;
  bool collect = p.runners > 0;
  auto trySync = [&](const double* v, int only) {
    Tried t;
    std::copy(v, v + 4, t.v);
    FoldLattice(x.data(), w, h, v, period, 0, 0, fold.data());
    PeriodFold(fold.data(), period, small.data());
    found.clear();
    t.hit = sync.Best(small.data(), only, collect ? &found : nullptr, p.runnerZ);
    for (const SyncHit& f : found) {
      Tried pk;
      pk.hit = f;
      std::copy(v, v + 4, pk.v);
      peaks.push_back(pk);
    }
    return t;
  };

  int tried = 1;
  // Coherent refinement of a lattice: small linear maps (I + E) V that raise the sync z (same symmetry).
  // `gated`: only from sync z p.refineZ (the second look refines without it).
  // A lattice the refinement already folded (bitwise the same matrix, its symmetry fixed) is not folded
  // again: an iteration that ends without a move tries the same matrices as the previous iteration did after
  // its last move. The same result either way (trySync depends on the lattice and the symmetry only).
  struct Seen {
    double v[4];
    Tried t;
  };
  std::vector<Seen> seen;
  auto refine = [&](Tried at, bool gated) {
    seen.clear();
    for (const double eps : {0.004, 0.0015}) {
      if (gated && at.hit.z < p.refineZ) break;
      for (int iter = 0; iter < 3; iter++) {
        bool moved = false;
        for (int e = 0; e < 8; e++) {
          const double k = (e & 1 ? -1 : 1) * eps;
          const int r = e >> 1;
          const int row = r >> 1, col = r & 1;
          double ex[4] = {0, 0, 0, 0};
          ex[row * 2 + col] = k;
          const double* bv = at.v;
          const double cand[4] = {bv[0] + ex[0] * bv[0] + ex[1] * bv[1], bv[1] + ex[2] * bv[0] + ex[3] * bv[1], bv[2] + ex[0] * bv[2] + ex[1] * bv[3],
                                  bv[3] + ex[2] * bv[2] + ex[3] * bv[3]};
          tried++;
          const Seen* done = nullptr;
          for (const Seen& o : seen)
            if (std::memcmp(o.v, cand, sizeof cand) == 0) done = &o;
          const Tried r2 = done ? done->t : trySync(cand, at.hit.d);
          if (!done) seen.push_back(Seen{{cand[0], cand[1], cand[2], cand[3]}, r2});
          if (r2.hit.z > at.hit.z) {
            at = r2;
            at.moved = true;
            moved = true;
          }
        }
        if (!moved) break;
      }
    }
    return at;
  };
  // Folds again at an alignment with its sub-pixel shift (into `fold`), picks the tile phase with part B
  // and counts the cells there.
  struct Counted {
    double dx, dy, phaseZ;
    std::vector<int> order;  // tile phases by part B's score, best first (ties: lower phase first)
  };
  auto countAt = [&](const Tried& t, double* cellsOut) {
    const SyncHit& hit = t.hit;
    FoldLattice(x.data(), w, h, t.v, period, -hit.fx, -hit.fy, fold.data());
    KeyFrame(fold.data(), kDihedral[hit.d], hit.tx, hit.ty, keyFold.data());
    std::vector<double> scores;
    for (int q = 0; q < reps * reps; q++) {
      int ex, ey;
      PhaseOffset(kDihedral[hit.d], q, period, ex, ey);
      scores.push_back(ShiftedDot(keyFold.data(), in.b, ex, ey, period));
    }
    std::vector<int> order(scores.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = int(i);
    std::stable_sort(order.begin(), order.end(), [&](int i, int j) { return scores[size_t(i)] > scores[size_t(j)]; });
    const int pq = order[0];  // part B's choice
    const double pscore = scores[size_t(pq)];
    double m = 0, sq = 0;
    for (const double s : scores) m += s / scores.size();
    for (const double s : scores) sq += (s - m) * (s - m);
    int ex, ey;
    PhaseOffset(kDihedral[hit.d], pq, period, ex, ey);
    ShiftedCells(keyFold.data(), in.c, ex, ey, period, p.cell, cellsOut);
    const int psx = hit.tx + (pq % reps) * period, psy = hit.ty + (pq / reps) * period;
    return Counted{psx + hit.fx, psy + hit.fy, sq > 0 ? (pscore - m) / std::sqrt(sq / scores.size()) : 0, order};
  };

  const double p0 = double(period) * std::min(w, h) / in.workShort;
  const double v0[4] = {p0, 0, 0, p0};
  Tried best = trySync(v0, -1);
  // The chosen lattice's period fold, for the identity looks to read without folding again.
  thread_local std::vector<double> bestSmall;
  bestSmall = small;
  bool identity = true;
  int tier = 1;
  out.combScore = -INFINITY;
  out.aspectScore = -INFINITY;
  out.rotationScore = -INFINITY;
  if (best.hit.z < p.fastZ) {
    tier = 2;
    double top = -INFINITY;
    const std::vector<std::vector<double>> cands =
        LatticeCandidates(x.data(), w, h, in.native == 1, in.harmonics, in.nHarmonics, p, kCropMin * p0 / period, top, out.aspectScore, out.rotationScore);
    out.combScore = top;
    for (const auto& v : cands) {
      // A hypothesis within 2% of the no-geometry one is that one, already tried: folded again it could
      // win on noise with a slightly wrong period (the refinement, which would correct it, needs z >= refineZ).
      double off = 0;
      for (int i = 0; i < 4; i++) off = std::max(off, std::abs(v[i] - v0[i]));
      if (off < p.sameAsIdentity * p0) continue;
      tried++;
      Tried r = trySync(v.data(), -1);
      if (r.hit.z > best.hit.z) {
        best = r;
        bestSmall = small;
        identity = false;
      }
    }
  }
  collect = false;
  // The no-geometry lattice is exact for every copy without geometry; refining it would only chase noise.
  const Tried unrefined = best;
  if (tier == 2 && !identity) best = refine(best, true);
  const Counted main = countAt(best, out.cells);
  // Hypotheses of the alignment proper (the second look's folds, which the count gates, are not counted).
  out.candidates = tried;

  // Other tile phases of the chosen alignment, only when the sync is not at the noise level: part B's next
  // phaseLooks choices, in its order (src/fingerprint/v2/, step 7 of bench/RESULTS.md, "Fingerprint").
  const int per = kT / p.cell, nCells = per * per;
  out.phaseCells.clear();
  if (best.hit.z >= p.phasesZ) {
    out.phaseCells.assign(size_t(std::max(p.phaseLooks, 0)) * nCells, 0.0);
    for (int i = 0; i < p.phaseLooks && i + 1 < int(main.order.size()); i++) {
      int ex, ey;
      PhaseOffset(kDihedral[best.hit.d], main.order[size_t(i) + 1], period, ex, ey);
      ShiftedCells(keyFold.data(), in.c, ex, ey, period, p.cell, out.phaseCells.data() + size_t(i) * nCells);
    }
  }

  // Second look: an unrefined spectrum lattice whose count already leans towards a mark is refined anyway.
  out.refinedCells.clear();
  out.refinedSyncZ = 0;
  // When the refinement did run and moved the lattice, the unrefined lattice is counted instead.
  if (tier == 2 && !identity && unrefined.hit.z < p.refineZ && SelfNormalised(out.cells, nCells) >= p.secondT) {
    const Tried again = refine(unrefined, false);
    if (again.moved) {
      out.refinedCells.resize(nCells);
      countAt(again, out.refinedCells.data());
      out.refinedSyncZ = again.hit.z;
    }
  } else if (best.moved) {
    out.refinedCells.resize(nCells);
    countAt(unrefined, out.refinedCells.data());
    out.refinedSyncZ = unrefined.hit.z;
  }

  // Runner-up alignments, when the search's best sync z is under refineZ, and identity looks, then or when the
  // chosen symmetry is not the identity (src/fingerprint/v2/, runnerPeaks and step 10 of bench/RESULTS.md, "Fingerprint").
  out.runnerCells.clear();
  out.runnerZ.assign(size_t(std::max(p.runners, 0)), 0.0);
  out.identityCells.clear();
  out.identityZ.assign(size_t(std::max(p.identityLooks, 0)), 0.0);
  // Counts each alignment of `list` into `slots` blocks of cells (zeros where none), its sync z into `zs`.
  auto countEach = [&](const std::vector<Tried>& list, int slots, std::vector<double>& cells, std::vector<double>& zs) {
    if (list.empty()) return;
    cells.assign(size_t(slots) * nCells, 0.0);
    for (size_t i = 0; i < list.size(); i++) {
      countAt(list[i], cells.data() + i * nCells);
      zs[i] = list[i].hit.z;
    }
  };
  std::vector<Tried> taken{unrefined};
  const bool uncertain = tier == 2 && unrefined.hit.z < p.refineZ;
  if (uncertain) {
    const std::vector<Tried> picked = RunnerPeaks<Tried>(peaks, taken, p.runners, period);
    countEach(picked, p.runners, out.runnerCells, out.runnerZ);
    taken.insert(taken.end(), picked.begin(), picked.end());
  }
  // The identity looks run when the alignment is uncertain, and also when the search chose another symmetry
  // than the identity (a crop does not flip the picture: step 10).
  if (uncertain || (tier == 2 && unrefined.hit.d != 0)) {
    if (p.identityLooks > 0) {
      found.clear();
      sync.Best(bestSmall.data(), 0, &found, -INFINITY);
      std::vector<Tried> surface;
      for (const SyncHit& f : found) {
        Tried pk;
        pk.hit = f;
        std::copy(unrefined.v, unrefined.v + 4, pk.v);
        surface.push_back(pk);
      }
      const std::vector<Tried> looks = RunnerPeaks<Tried>(surface, taken, p.identityLooks, period);
      countEach(looks, p.identityLooks, out.identityCells, out.identityZ);
      taken.insert(taken.end(), looks.begin(), looks.end());
    }
  }
  // Lattice looks: the best peak of each of the next latticeLooks lattices the search folded, by that peak's
  // sync z from latticeLookZ, whatever the chosen alignment's sync z (src/fingerprint/v2/, step 11).
  out.latticeCells.clear();
  out.latticeZ.assign(size_t(std::max(p.latticeLooks, 0)), 0.0);
  if (tier == 2 && p.latticeLooks > 0) {
    std::vector<Tried> order = peaks;
    std::stable_sort(order.begin(), order.end(), [](const Tried& a, const Tried& b) { return a.hit.z > b.hit.z; });
    std::vector<Tried> bests;
    auto seen = [&](const Tried& pk) {
      if (std::equal(pk.v, pk.v + 4, unrefined.v)) return true;
      for (const Tried& b : bests)
        if (std::equal(pk.v, pk.v + 4, b.v)) return true;
      return false;
    };
    for (const Tried& pk : order) {
      if (pk.hit.z < p.latticeLookZ) break;
      if (!seen(pk)) bests.push_back(pk);
    }
    countEach(RunnerPeaks<Tried>(bests, taken, p.latticeLooks, period), p.latticeLooks, out.latticeCells, out.latticeZ);
  }

  std::copy(best.v, best.v + 4, out.lattice);
  out.dihedral = best.hit.d;
  out.dx = main.dx;
  out.dy = main.dy;
  out.phaseZ = main.phaseZ;
  out.syncZ = best.hit.z;
  out.tier = tier;
}

}  // namespace optmark
