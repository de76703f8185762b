// What the steps of version 2's native core share (src/fingerprint/v2/ is the reference, one .cc per
// step as there): the spectrum (v2-spectrum.cc), the lattice search (v2-lattice.cc), the fold on a
// lattice frame (v2-fold.cc), the sync correlation with part A (v2-sync.cc); v2-core.cc runs them.
#pragma once
#include <cmath>
#include <vector>

#include "v2.h"

namespace optmark {
namespace v2 {

constexpr int kT = kTile;
constexpr int kT2 = kTile * kTile;
constexpr int kTM = kTile - 1;
constexpr double kCropMin = 0.98;  // crop line from this times the no-geometry scale (crops only enlarge)

// The 8 symmetries of the square as integer matrices [a, b, c, d]: (x, y) -> (a x + b y, c x + d y).
inline constexpr int kDihedral[8][4] = {{1, 0, 0, 1}, {0, -1, 1, 0}, {-1, 0, 0, -1}, {0, 1, -1, 0}, {-1, 0, 0, 1}, {1, 0, 0, -1}, {0, 1, 1, 0}, {0, -1, -1, 0}};

struct Spectrum {
  int nx = 0, ny = 0;
  bool notch = false;  // JPEG grid lines notched out: the comb skips the peaks that fall on them
  std::vector<float> fine, coarse;
};

// Whitened power spectrum of the prefiltered picture into `sp` (per-thread in the caller: its planes keep
// their pages from call to call).
void WhitenedSpectrum(Spectrum& sp, const float* x, int w, int h, bool notchGrid);

// 2-D transform of an nx x ny row-major array, rows then columns: bitwise fft2d of fft.ts.
void Fft2dRect(double* re, double* im, int nx, int ny, int sign);

// Lattice period-vector pairs [v1x, v1y, v2x, v2y] (base pixels per period), best first, and the scores the
// output reports (latticeCandidates in lattice.ts).
std::vector<std::vector<double>> LatticeCandidates(const float* x, int w, int h, bool notchGrid, const double* harm, int nh, const Core2Params& p,
                                                   double cropMin, double& topScore, double& aspectScore, double& rotationScore);

// Resample on the lattice frame and fold onto one kTile x kTile tile (foldLattice in fold.ts).
void FoldLattice(const float* x, int fw, int fh, const double* v, int period, double ox, double oy, double* out);

struct SyncHit {
  double z = -INFINITY;
  int d = 0, tx = 0, ty = 0;
  double fx = 0, fy = 0;
};

// Correlates a period x period fold with part A under each symmetry, each frequency of A at the power
// 0.25 of its amplitude (its phase kept); sync z is the peak over the surface's noise level sqrt(sum_k |W_D(k)|^2 Q(k)),
// Q the fold's power except at the template's frequencies, where it is the mean of their other 3 x 3
// neighbours (src/fingerprint/v2/ says why).
struct SyncA {
  int n;
  std::vector<double> re[8], im[8], w2[8];
  std::vector<unsigned char> tpl;  // 1 at the template's frequencies (the same set under every symmetry)
  double power;
  SyncA(const float* a, int period, const double* harm, int nh, double pw);
  // The best peak over the symmetries (or `only`); with `peaks`, also every local maximum from z `floor`.
  SyncHit Best(const double* f, int only, std::vector<SyncHit>* peaks = nullptr, double floor = INFINITY) const;
};

// The sync correlator of the last key part A seen on this thread (workers verify with one secret).
const SyncA& SyncAFor(const float* a, int period, const double* harm, int nh, double power);

}  // namespace v2
}  // namespace optmark
