// Port of src/fingerprint/reference-v2.ts (see core2.h): lattice search on the whitened spectrum, fold on
// the lattice frame, sync under the 8 symmetries, tile phase, count cells. Same order of operations as the
// reference so that both pick the same alignment; sums are in double as there.
#include "core2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics warn of their own undefined inputs (-Wmaybe-uninitialized, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

// The hot loops are compiled for AVX-512F, AVX2 and the baseline and picked at load time (as in core.cc).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define OPTMARK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define OPTMARK_CLONES
#endif

namespace optmark {
namespace {

constexpr int kT = kTile;
constexpr int kT2 = kTile * kTile;
constexpr int kTM = kTile - 1;
constexpr double kSpecClip = 6;
constexpr int kWhitenBox = 17;
constexpr double kGridSkip = 2;  // template peaks this close (bins) to a notched grid line leave the comb
const double kCropStep = std::log(1.005);
constexpr int kPoolRadius = 1;             // max filter of the coarse pass, bins
constexpr int kCoarseKeep = 32;            // coarse cells refined
constexpr int kRotKeep = 4;                // coarse cells of the rotation plane refined
const double kRotScale = std::log(1.45);   // the rotation plane: scales within 1.45x of the no-geometry one
constexpr double kCropMin = 0.98;          // crop line from this times the no-geometry scale (crops only enlarge)
constexpr double kSameAsIdentity = 0.02;   // lattices this close (relative) are one alignment (runner-ups)
constexpr double kGatedScaleMin = 0.85;    // below the gate, grid hypotheses from this times the no-geometry scale
const double kAspectMax = std::log(1.36);  // the aspect lines: one axis at the no-geometry scale, the other within 1.36x of it

const int kDihedral[8][4] = {{1, 0, 0, 1}, {0, -1, 1, 0}, {-1, 0, 0, -1}, {0, 1, -1, 0}, {-1, 0, 0, 1}, {1, 0, 0, -1}, {0, 1, 1, 0}, {0, -1, -1, 0}};

inline double JsRound(double x) { return std::floor(x + 0.5); }

int NextPow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Twiddles per (length, sign), computed with the same expression as fft.ts (cos/sin of sign*2*pi/len*k),
// cached per thread.
struct Twiddles {
  std::vector<double> wr, wi;  // stages concatenated: len = 2, 4, ..., n; len/2 entries each
};

const Twiddles& TwiddlesFor(int n, int sign) {
  thread_local std::map<int, Twiddles> cache;
  const int key = sign < 0 ? -n : n;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Twiddles t;
  for (int len = 2; len <= n; len <<= 1) {
    const double ang = sign * 2 * M_PI / len;
    for (int k = 0; k < len / 2; k++) {
      t.wr.push_back(std::cos(ang * k));
      t.wi.push_back(std::sin(ang * k));
    }
  }
  return cache.emplace(key, std::move(t)).first->second;
}

// Column transforms of an nx x ny row-major array, all columns at once (rows of butterflies, so the inner
// loop runs along contiguous memory); per element the same operations in the same order as fft1d in
// fft.ts. NX > 0 fixes the width at compile time (HalfSpectrumRows' 16-pair blocks: the inner loop is then
// unrolled).
template <int NX>
inline __attribute__((always_inline)) void FftColumnsOf(double* __restrict re, double* __restrict im, int width, int ny, int sign) {
  const int nx = NX > 0 ? NX : width;
  for (int i = 1, j = 0; i < ny; i++) {
    int bit = ny >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      std::swap_ranges(re + size_t(i) * nx, re + size_t(i + 1) * nx, re + size_t(j) * nx);
      std::swap_ranges(im + size_t(i) * nx, im + size_t(i + 1) * nx, im + size_t(j) * nx);
    }
  }
  const Twiddles& tw = TwiddlesFor(ny, sign);
  const double* twr = tw.wr.data();
  const double* twi = tw.wi.data();
  for (int len = 2; len <= ny; len <<= 1) {
    const int half = len >> 1;
    for (int k = 0; k < half; k++) {
      const double wr = twr[k], wi = twi[k];
      for (int i = k; i < ny; i += len) {
        double* __restrict ar = re + size_t(i) * nx;
        double* __restrict ai = im + size_t(i) * nx;
        double* __restrict br = re + size_t(i + half) * nx;
        double* __restrict bi = im + size_t(i + half) * nx;
        for (int x = 0; x < nx; x++) {
          const double xr = br[x] * wr - bi[x] * wi;
          const double xi = br[x] * wi + bi[x] * wr;
          br[x] = ar[x] - xr;
          bi[x] = ai[x] - xi;
          ar[x] = ar[x] + xr;
          ai[x] = ai[x] + xi;
        }
      }
    }
    twr += half;
    twi += half;
  }
}

OPTMARK_CLONES
void FftColumns(double* __restrict re, double* __restrict im, int nx, int ny, int sign) { FftColumnsOf<0>(re, im, nx, ny, sign); }

// The same at width 32 fixed at compile time (the sync correlation's period transforms: inner loop unrolled).
OPTMARK_CLONES
void FftColumns32(double* __restrict re, double* __restrict im, int ny, int sign) { FftColumnsOf<32>(re, im, 32, ny, sign); }

// 2-D transform of an nx x ny row-major array, rows then columns. The rows go through a transpose and the
// column kernel (per element the same butterflies as fft1d, vectorised across the rows), so the result is
// bitwise that of fft1d on every row, then on every column (fft2d in fft.ts).
void Fft2dRect(double* re, double* im, int nx, int ny, int sign) {
  thread_local std::vector<double> tr, ti;
  const size_t n = size_t(nx) * ny;
  tr.resize(n);
  ti.resize(n);
  for (int y = 0; y < ny; y++)
    for (int x = 0; x < nx; x++) {
      tr[size_t(x) * ny + y] = re[size_t(y) * nx + x];
      ti[size_t(x) * ny + y] = im[size_t(y) * nx + x];
    }
  if (ny == 32) FftColumns32(tr.data(), ti.data(), nx, sign);
  else FftColumns(tr.data(), ti.data(), ny, nx, sign);
  for (int y = 0; y < ny; y++)
    for (int x = 0; x < nx; x++) {
      re[size_t(y) * nx + x] = tr[size_t(x) * ny + y];
      im[size_t(y) * nx + x] = ti[size_t(x) * ny + y];
    }
  if (nx == 32) FftColumns32(re, im, ny, sign);
  else FftColumns(re, im, nx, ny, sign);
}

constexpr int kRowBlock = 16;

OPTMARK_CLONES
void FftColumnsBlock(double* __restrict re, double* __restrict im, int ny, int sign) { FftColumnsOf<kRowBlock>(re, im, kRowBlock, ny, sign); }

struct Spectrum {
  int nx = 0, ny = 0;
  bool notch = false;  // JPEG grid lines notched out: the comb skips the peaks that fall on them
  std::vector<float> fine, coarse;
};

// Half spectra (bins 0 .. nx/2) of the rows of the windowed picture (row y: x's row times wy[y] wx[i], zero
// past w), two rows per complex transform: with Z = FFT(a + i b), A(k) = (Z(k) + conj Z(-k)) / 2 and
// B(k) = (Z(k) - conj Z(-k)) / 2i. Sixteen row pairs at a time: interleaved into a small block, transformed
// there as columns (per element the same butterflies as fft1d, vectorised across the sixteen pairs), split
// into the hw = nx/2 + 1 wide rows of re and im (rows from h on untouched). The same operations as
// halfSpectrumRows in reference-v2.ts.
void HalfSpectrumRows(const float* x, int w, int h, const double* wy, const double* wx, int nx, double* re, double* im, std::vector<double>& br,
                      std::vector<double>& bi) {
  constexpr int R = kRowBlock;
  const int hw = nx / 2 + 1;
  br.resize(size_t(nx) * R);
  bi.resize(size_t(nx) * R);
  for (int y0 = 0; y0 < h; y0 += 2 * R) {
    for (int r = 0; r < R; r++) {
      const int ya = y0 + 2 * r, yb = ya + 1;
      const int wa = ya < h ? w : 0, wb = yb < h ? w : 0;
      const float* xa = x + size_t(ya) * w;
      const float* xb = x + size_t(yb) * w;
      for (int k = 0; k < wa; k++) br[size_t(k) * R + r] = double(xa[k]) * wy[ya] * wx[k];
      for (int k = wa; k < nx; k++) br[size_t(k) * R + r] = 0.0;
      for (int k = 0; k < wb; k++) bi[size_t(k) * R + r] = double(xb[k]) * wy[yb] * wx[k];
      for (int k = wb; k < nx; k++) bi[size_t(k) * R + r] = 0.0;
    }
    FftColumnsBlock(br.data(), bi.data(), nx, -1);
    for (int r = 0; r < R; r++) {
      const int ya = y0 + 2 * r, yb = ya + 1;
      if (ya >= h) break;
      double* ar = re + size_t(ya) * hw;
      double* ai = im + size_t(ya) * hw;
      double* cr = re + size_t(yb) * hw;
      double* ci = im + size_t(yb) * hw;
      for (int k = 0; k < hw; k++) {
        const size_t p = size_t(k) * R + r, q = size_t((nx - k) & (nx - 1)) * R + r;
        ar[k] = 0.5 * (br[p] + br[q]);
        ai[k] = 0.5 * (bi[p] - bi[q]);
        if (yb < h) {
          cr[k] = 0.5 * (bi[p] + bi[q]);
          ci[k] = 0.5 * (br[q] - br[p]);
        }
      }
    }
  }
}

// 1 x 3 (cyclic) smoothing of every row then every column with taps k, same sums in the same order as
// smooth() in reference-v2.ts; the interior runs without wrap-around indexing so that it vectorises.
OPTMARK_CLONES
void Smooth3(const float* __restrict src, int nx, int ny, double k0, double k1, double k2, float* __restrict tmp, float* __restrict out) {
  for (int v = 0; v < ny; v++) {
    const float* r = src + size_t(v) * nx;
    float* t = tmp + size_t(v) * nx;
    t[0] = float(0.0 + k0 * r[nx - 1] + k1 * r[0] + k2 * r[1]);
    for (int u = 1; u < nx - 1; u++) t[u] = float(0.0 + k0 * r[u - 1] + k1 * r[u] + k2 * r[u + 1]);
    t[nx - 1] = float(0.0 + k0 * r[nx - 2] + k1 * r[nx - 1] + k2 * r[0]);
  }
  for (int v = 0; v < ny; v++) {
    const float* a = tmp + size_t((v - 1 + ny) & (ny - 1)) * nx;
    const float* b = tmp + size_t(v) * nx;
    const float* c = tmp + size_t((v + 1) & (ny - 1)) * nx;
    float* o = out + size_t(v) * nx;
    for (int u = 0; u < nx; u++) o[u] = float(0.0 + k0 * a[u] + k1 * b[u] + k2 * c[u]);
  }
}

// Per-thread scratch planes of the spectrum (a few MB, reused across calls instead of fresh pages).
struct SpectrumScratch {
  std::vector<double> re, im, tr, ti;
  std::vector<float> pw, tmp, box;
};

// The bins the whitening keeps (axes, DC, JPEG grid lines when asked removed) and their box sums: they
// depend on the size and the notch only, so they are kept per thread.
struct ValidMask {
  std::vector<float> valid, sums;
};

// Each valid bin over the mean power of the valid bins around it (box sums ps, counts vs), clipped at
// kSpecClip, minus 1; other bins 0. Built without trapping-math (values unchanged: it only lets GCC turn
// the conditions into selects) so that the loop vectorises.
OPTMARK_CLONES __attribute__((optimize("no-trapping-math"))) void Whiten(float* __restrict pw, const float* __restrict ps, const float* __restrict valid,
                                                                         const float* __restrict vs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const double mean = vs[i] > 0 ? double(ps[i]) / vs[i] : 0;
    const double r = pw[i] / mean;  // std::min(kSpecClip, r) written out (no call across the optimize attribute)
    pw[i] = valid[i] != 0 && mean > 0 ? float((r < kSpecClip ? r : kSpecClip) - 1) : 0.0f;
  }
}

// Fills `sp` (per-thread in the caller: its planes keep their pages from call to call).
OPTMARK_CLONES
void WhitenedSpectrum(Spectrum& sp, const float* x, int w, int h, bool notchGrid) {
  const int nx = NextPow2(w), ny = NextPow2(h);
  sp.nx = nx;
  sp.ny = ny;
  sp.notch = notchGrid;
  const size_t n = size_t(nx) * ny;
  // The picture is real: only the half spectrum (columns 0 .. nx/2) is transformed, the other half of the
  // power is its mirror, |X(-u, -v)| = |X(u, v)|.
  const int hw = nx / 2 + 1;
  const size_t nh = size_t(hw) * ny;
  thread_local SpectrumScratch S;
  S.re.resize(nh);
  S.im.resize(nh);
  double* re = S.re.data();
  double* im = S.im.data();
  std::fill(re + size_t(h) * hw, re + nh, 0.0);
  std::fill(im + size_t(h) * hw, im + nh, 0.0);
  const int tx = std::max(1, int(JsRound(w / 10.0)));
  const int ty = std::max(1, int(JsRound(h / 10.0)));
  auto taper = [](int d, int t) { return d >= t ? 1.0 : 0.5 - 0.5 * std::cos(M_PI * (d + 0.5) / t); };
  std::vector<double> wx(w), wy(h);
  for (int i = 0; i < w; i++) wx[i] = taper(std::min(i, w - 1 - i), tx);
  for (int y = 0; y < h; y++) wy[y] = taper(std::min(y, h - 1 - y), ty);
  // Rows past the image are zero and stay zero: only the image's rows are transformed.
  HalfSpectrumRows(x, w, h, wy.data(), wx.data(), nx, re, im, S.tr, S.ti);
  FftColumns(re, im, hw, ny, -1);
  thread_local std::map<int, ValidMask> masks;
  const int vkey = (nx * 4096 + ny) * 2 + (notchGrid ? 1 : 0);
  auto vit = masks.find(vkey);
  S.pw.resize(n);
  S.tmp.resize(n);
  S.box.resize(n);
  float* pw = S.pw.data();
  auto boxSum = [&](const float* src, float* out) {
    const int r = kWhitenBox >> 1;
    float* tmp = S.tmp.data();
    // Rows: one running sum per row, four rows swept together (four independent chains of additions; each
    // row's additions as before, in the same order).
    constexpr int kRows = 4;
    for (int v0 = 0; v0 < ny; v0 += kRows) {
      const int nr = std::min(kRows, ny - v0);
      double acc[kRows] = {};
      for (int k = 0; k < nr; k++) {
        const size_t row = size_t(v0 + k) * nx;
        for (int j = -r; j <= r; j++) acc[k] += src[row + ((j + nx) & (nx - 1))];
      }
      if (nr == kRows) {
        const size_t row = size_t(v0) * nx;
        for (int u = 0; u < nx; u++) {
          const size_t a = (u + r + 1) & (nx - 1), b = (u - r + nx) & (nx - 1);
          for (int k = 0; k < kRows; k++) {
            tmp[row + k * nx + u] = float(acc[k]);
            acc[k] += double(src[row + k * nx + a]) - src[row + k * nx + b];
          }
        }
        continue;
      }
      for (int k = 0; k < nr; k++) {
        const size_t row = size_t(v0 + k) * nx;
        for (int u = 0; u < nx; u++) {
          tmp[row + u] = float(acc[k]);
          acc[k] += double(src[row + ((u + r + 1) & (nx - 1))]) - src[row + ((u - r + nx) & (nx - 1))];
        }
      }
    }
    // Columns: one running sum per column, swept down the rows (same additions, in the same order).
    std::vector<double> acc(nx, 0.0);
    for (int j = -r; j <= r; j++) {
      const float* row = tmp + size_t((j + ny) & (ny - 1)) * nx;
      for (int u = 0; u < nx; u++) acc[u] += row[u];
    }
    for (int v = 0; v < ny; v++) {
      const float* add = tmp + size_t((v + r + 1) & (ny - 1)) * nx;
      const float* sub = tmp + size_t((v - r + ny) & (ny - 1)) * nx;
      float* o = out + size_t(v) * nx;
      for (int u = 0; u < nx; u++) {
        o[u] = float(acc[u]);
        acc[u] += double(add[u]) - sub[u];
      }
    }
  };
  if (vit == masks.end()) {
    ValidMask m;
    m.valid.assign(n, 0.0f);
    m.sums.resize(n);
    const int gx = nx / 8, gy = ny / 8;
    for (int v = 0; v < ny; v++) {
      const int fv = v < ny / 2 ? v : v - ny;
      for (int u = 0; u < nx; u++) {
        const int fu = u < nx / 2 ? u : u - nx;
        const int du = std::abs(fu) % gx;
        const int dv = std::abs(fv) % gy;
        const bool onGrid = notchGrid && (std::min(du, gx - du) <= 1 || std::min(dv, gy - dv) <= 1);
        const double gu = double(fu) / nx, gv = double(fv) / ny;
        const double rr = std::sqrt(gu * gu + gv * gv);
        if (std::abs(fu) <= 1 || std::abs(fv) <= 1 || onGrid || rr < 0.01) continue;
        m.valid[size_t(v) * nx + u] = 1;
      }
    }
    boxSum(m.valid.data(), m.sums.data());
    vit = masks.emplace(vkey, std::move(m)).first;
  }
  const float* __restrict valid = vit->second.valid.data();
  const float* __restrict vs = vit->second.sums.data();
  // Branch-free bodies (the power times the 0/1 mask, selects, divisions by 1 where the conditional form
  // skipped them), so that they vectorise: the same values as before (the power is finite and >= 0).
  for (int v = 0; v < ny; v++) {
    float* __restrict o = pw + size_t(v) * nx;
    const float* __restrict ok = valid + size_t(v) * nx;
    const double* __restrict hr = re + size_t(v) * hw;
    const double* __restrict hi = im + size_t(v) * hw;
    for (int u = 0; u < hw; u++) o[u] = float(hr[u] * hr[u] + hi[u] * hi[u]) * ok[u];
    const double* __restrict mr = re + size_t((ny - v) & (ny - 1)) * hw;
    const double* __restrict mi = im + size_t((ny - v) & (ny - 1)) * hw;
    for (int u = hw; u < nx; u++) o[u] = float(mr[nx - u] * mr[nx - u] + mi[nx - u] * mi[nx - u]) * ok[u];
  }
  float* __restrict ps = S.box.data();
  boxSum(pw, ps);
  Whiten(pw, ps, valid, vs, n);
  sp.fine.resize(n);
  sp.coarse.resize(n);
  Smooth3(pw, nx, ny, 0.25, 0.5, 0.25, S.tmp.data(), sp.fine.data());
  Smooth3(pw, nx, ny, 1.0 / 3, 1.0 / 3, 1.0 / 3, S.tmp.data(), sp.coarse.data());
}

// Whether a frequency (in bins, any sign) lies within kGridSkip bins of a notched JPEG grid line: its bins
// were set to 0, so a template peak there is not counted at all (rather than counted as absent).
inline bool OnGrid(double u, double v, int nx, int ny) {
  const double gx = nx / 8, gy = ny / 8;
  const double du = std::fmod(std::abs(u), gx), dv = std::fmod(std::abs(v), gy);
  return std::min(du, gx - du) < kGridSkip || std::min(dv, gy - dv) < kGridSkip;
}

inline double SpecAt(const std::vector<float>& plane, int nx, int ny, double fx, double fy) {
  const double u = fx * nx, v = fy * ny;
  const double uf = std::floor(u), vf = std::floor(v);
  const int u0 = int(uf), v0 = int(vf);
  const double a = u - uf, b = v - vf;
  const int mx = nx - 1, my = ny - 1;
  const size_t i00 = size_t(v0 & my) * nx, i10 = size_t((v0 + 1) & my) * nx;
  return (1 - b) * ((1 - a) * plane[i00 + (u0 & mx)] + a * plane[i00 + ((u0 + 1) & mx)]) +
         b * ((1 - a) * plane[i10 + (u0 & mx)] + a * plane[i10 + ((u0 + 1) & mx)]);
}

OPTMARK_CLONES
double CombScoreCS(const Spectrum& sp, const std::vector<float>& plane, const double* m, int nm, int period, double c, double s, double sx, double sy) {
  const double kx = 1 / (period * sx), ky = 1 / (period * sy);
  double sum = 0;
  int n = 0;
  for (int i = 0; i < 2 * nm; i += 2) {
    const double fx = (m[i] * c - m[i + 1] * s) * kx;
    const double fy = (m[i] * s + m[i + 1] * c) * ky;
    if (std::abs(fx) > 0.45 || std::abs(fy) > 0.45 || (sp.notch && OnGrid(fx * sp.nx, fy * sp.ny, sp.nx, sp.ny))) continue;
    sum += SpecAt(plane, sp.nx, sp.ny, fx, fy);
    n++;
  }
  return n ? sum / std::sqrt(double(n)) : -INFINITY;
}

// The horizontal half of the coarse pass' comb for one angle and horizontal scale sx: each harmonic's
// frequency and nearest column (-1 past 0.45 cycles), shared by every vertical scale CombNearest tries.
// `rot` holds the harmonics rotated by the hypothesis' angle, (m0 c - m1 s, m0 s + m1 c) pairs.
void CombColumns(const double* rot, int nm, int period, double sx, int nx, double* fx, int* u) {
  const double kx = 1 / (period * sx);
  for (int q = 0; q < nm; q++) {
    fx[q] = rot[2 * q] * kx;
    u[q] = std::abs(fx[q]) > 0.45 ? -1 : int(std::floor(fx[q] * nx + 0.5)) & (nx - 1);
  }
}

// Comb score with nearest-bin lookups (the coarse pass, on the max-filtered plane) at vertical scale sy,
// the columns from CombColumns.
OPTMARK_CLONES
double CombNearest(const std::vector<float>& plane, int nx, int ny, bool notch, const double* rot, const double* fx, const int* u, int nm, int period,
                   double sy) {
  const double ky = 1 / (period * sy);
  double sum = 0;
  int n = 0;
  for (int q = 0; q < nm; q++) {
    if (u[q] < 0) continue;
    const double fy = rot[2 * q + 1] * ky;
    if (std::abs(fy) > 0.45 || (notch && OnGrid(fx[q] * nx, fy * ny, nx, ny))) continue;
    const int v = int(std::floor(fy * ny + 0.5)) & (ny - 1);
    sum += plane[size_t(v) * nx + u[q]];
    n++;
  }
  return n ? sum / std::sqrt(double(n)) : -INFINITY;
}

// Comb score of the same scale sc both ways with nearest-bin lookups, each the maximum of the 3 x 3 bins
// around (cyclic): CombNearest on the plane max-filtered with radius 1, without filtering the whole plane.
// `rot` holds the harmonics rotated by the hypothesis' angle (see CombColumns).
double CombNearestMax(const std::vector<float>& plane, int nx, int ny, bool notch, const double* rot, int nm, int period, double sc) {
  const double k = 1 / (period * sc);
  double sum = 0;
  int n = 0;
  for (int q = 0; q < nm; q++) {
    const double fx = rot[2 * q] * k, fy = rot[2 * q + 1] * k;
    if (std::abs(fx) > 0.45 || std::abs(fy) > 0.45 || (notch && OnGrid(fx * nx, fy * ny, nx, ny))) continue;
    const int u = int(std::floor(fx * nx + 0.5)), v = int(std::floor(fy * ny + 0.5));
    float best = -INFINITY;
    for (int dv = -1; dv <= 1; dv++) {
      const float* row = plane.data() + size_t((v + dv) & (ny - 1)) * nx;
      for (int du = -1; du <= 1; du++) best = std::max(best, row[(u + du) & (nx - 1)]);
    }
    sum += best;
    n++;
  }
  return n ? sum / std::sqrt(double(n)) : -INFINITY;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define OPTMARK_COMB_AVX2 1
// The inner loop of CombNearestScales four vertical scales at a time (AVX2): per scale the same double
// operations as the scalar loop (no FMA), the bins fetched with a gather; a left-out harmonic adds +0 and 0
// as there. k, s and c hold a multiple of 4 entries (the padding scales have k = 0: bin 0, discarded).
__attribute__((target("avx2"))) void CombScalesAvx2(const float* pl, int nx, int ny, const double* rot, const int* u, int nm, const double* k, int n4,
                                                    double* s, double* c) {
  const __m256d absMask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const __m256d lim = _mm256_set1_pd(0.45), vny = _mm256_set1_pd(double(ny)), half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0);
  const __m128i my = _mm_set1_epi32(ny - 1), vnx = _mm_set1_epi32(nx);
  for (int q = 0; q < nm; q++) {
    if (u[q] < 0) continue;
    const __m256d ry = _mm256_set1_pd(rot[2 * q + 1]);
    const float* col = pl + u[q];
    for (int t = 0; t < n4; t += 4) {
      const __m256d fy = _mm256_mul_pd(ry, _mm256_loadu_pd(k + t));
      const __m256d in = _mm256_cmp_pd(_mm256_and_pd(fy, absMask), lim, _CMP_NGT_UQ);
      const __m256d vf = _mm256_floor_pd(_mm256_add_pd(_mm256_mul_pd(fy, vny), half));
      const __m128i at = _mm_mullo_epi32(_mm_and_si128(_mm256_cvttpd_epi32(vf), my), vnx);
      const __m256d val = _mm256_cvtps_pd(_mm_i32gather_ps(col, at, 4));
      _mm256_storeu_pd(s + t, _mm256_add_pd(_mm256_loadu_pd(s + t), _mm256_and_pd(val, in)));
      _mm256_storeu_pd(c + t, _mm256_add_pd(_mm256_loadu_pd(c + t), _mm256_and_pd(one, in)));
    }
  }
}
#endif

// CombNearest at several vertical scales at once (sy[ks[t]] for t < nk, into scores[t]): harmonics outside,
// scales inside, so that the inner loop vectorises; each score sums its harmonics in the same order.
void CombNearestScales(const std::vector<float>& plane, int nx, int ny, bool notch, const double* rot, const double* fx, const int* u, int nm, int period,
                       const double* sy, const int* ks, int nk, double* scores) {
  if (notch) {
    for (int t = 0; t < nk; t++) scores[t] = CombNearest(plane, nx, ny, notch, rot, fx, u, nm, period, sy[ks[t]]);
    return;
  }
  const int n4 = (nk + 3) & ~3;
  thread_local std::vector<double> ky, sum, cnt;
  ky.assign(n4, 0.0);
  sum.assign(n4, 0.0);
  cnt.assign(n4, 0.0);
  for (int t = 0; t < nk; t++) ky[t] = 1 / (period * sy[ks[t]]);
  const float* pl = plane.data();
  double* __restrict s = sum.data();
  double* __restrict c = cnt.data();
  const double* __restrict k = ky.data();
#ifdef OPTMARK_COMB_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    CombScalesAvx2(pl, nx, ny, rot, u, nm, k, n4, s, c);
    for (int t = 0; t < nk; t++) scores[t] = c[t] > 0 ? s[t] / std::sqrt(c[t]) : -INFINITY;
    return;
  }
#endif
  for (int q = 0; q < nm; q++) {
    if (u[q] < 0) continue;
    const double ry = rot[2 * q + 1];
    const float* col = pl + u[q];
    for (int t = 0; t < nk; t++) {
      const double fy = ry * k[t];
      const bool in = !(std::abs(fy) > 0.45);
      const int v = int(std::floor(fy * ny + 0.5)) & (ny - 1);
      // A sum never holds -0, so adding +0 for a harmonic left out changes nothing.
      s[t] += in ? double(col[size_t(v) * nx]) : 0.0;
      c[t] += in ? 1.0 : 0.0;
    }
  }
  for (int t = 0; t < nk; t++) scores[t] = c[t] > 0 ? s[t] / std::sqrt(c[t]) : -INFINITY;
}

double CombScore(const Spectrum& sp, const std::vector<float>& plane, const double* m, int nm, int period, double theta, double sx, double sy) {
  return CombScoreCS(sp, plane, m, nm, period, std::cos(theta), std::sin(theta), sx, sy);
}

struct Hypo {
  double theta, sx, sy, score;
  bool line = false;  // the crop line's hypothesis: its pattern search stays on the line
};

// Pattern search of a hypothesis on the fine plane (angle steps 0.75-0.04 degrees, scale 0.75-0.04%): free in
// angle and both scales, except the crop line's hypothesis, which stays on its line.
Hypo RefineHypo(const Spectrum& sp, const double* harm, int nh, int period, const Hypo& hy) {
  double theta = hy.theta, sx = hy.sx, sy = hy.sy;
  double best = CombScore(sp, sp.fine, harm, nh, period, theta, sx, sy);
  for (const double k : {0.5, 0.2, 0.07, 0.025}) {
    const double dt = 1.5 * k * M_PI / 180;
    const double ds = 0.015 * k;
    const double freeSteps[6][3] = {{dt, 0, 0}, {-dt, 0, 0}, {0, ds, 0}, {0, -ds, 0}, {0, 0, ds}, {0, 0, -ds}};
    const double lineSteps[2][3] = {{0, ds, ds}, {0, -ds, -ds}};
    const int nSteps = hy.line ? 2 : 6;
    for (int iter = 0; iter < 12; iter++) {
      bool moved = false;
      for (int i = 0; i < nSteps; i++) {
        const double* st = hy.line ? lineSteps[i] : freeSteps[i];
        const double t2 = theta + st[0], x2 = sx * std::exp(st[1]), y2 = sy * std::exp(st[2]);
        const double sc = CombScore(sp, sp.fine, harm, nh, period, t2, x2, y2);
        if (sc > best) {
          best = sc;
          theta = t2;
          sx = x2;
          sy = y2;
          moved = true;
        }
      }
      if (!moved) break;
    }
  }
  return {theta, sx, sy, best, hy.line};
}

// Separable max filter (cyclic) of radius r: the coarse pass of the lattice grid reads it, so that a
// hypothesis one fine step off a lattice still sees its peaks.
OPTMARK_CLONES
void MaxPool(const std::vector<float>& src, int nx, int ny, int r, std::vector<float>& tmp, std::vector<float>& out) {
  tmp.resize(src.size());
  out.resize(src.size());
  for (int v = 0; v < ny; v++) {
    const float* row = src.data() + size_t(v) * nx;
    float* t = tmp.data() + size_t(v) * nx;
    for (int u = 0; u < nx; u++) {
      if (u == r && nx > 2 * r) {
        // Interior: no wrap-around, so the loop vectorises (max is exact: same values as the cyclic form).
        if (r == kPoolRadius) {
          for (; u < nx - kPoolRadius; u++) {
            float m = row[u];
            for (int j = -kPoolRadius; j <= kPoolRadius; j++) m = std::max(m, row[u + j]);
            t[u] = m;
          }
        }
        for (; u < nx - r; u++) {
          float m = row[u];
          for (int j = -r; j <= r; j++) m = std::max(m, row[u + j]);
          t[u] = m;
        }
        if (u >= nx) break;
      }
      float m = row[u];
      for (int j = -r; j <= r; j++) m = std::max(m, row[(u + j + nx) & (nx - 1)]);
      t[u] = m;
    }
  }
  for (int v = 0; v < ny; v++) {
    float* o = out.data() + size_t(v) * nx;
    std::copy(tmp.begin() + size_t(v) * nx, tmp.begin() + size_t(v + 1) * nx, o);
    for (int j = -r; j <= r; j++) {
      const float* a = tmp.data() + size_t((v + j + ny) & (ny - 1)) * nx;
      for (int u = 0; u < nx; u++) o[u] = std::max(o[u], a[u]);
    }
  }
}

// Centres of the coarse pass along one axis of n fine points: 1, 3, 5, ... (each covers its neighbours).
std::vector<int> CoarseIndices(int n) {
  std::vector<int> c;
  for (int i = 1; i < n; i += 2) c.push_back(i);
  if (c.empty() && n > 0) c.push_back(0);
  return c;
}

// The template's harmonics (nh pairs) rotated by the angle whose cosine and sine are c and s, into out.
void RotateHarmonics(const double* harm, int nh, double c, double s, double* out) {
  for (int q = 0; q < 2 * nh; q += 2) {
    out[q] = harm[q] * c - harm[q + 1] * s;
    out[q + 1] = harm[q] * s + harm[q + 1] * c;
  }
}

std::vector<std::vector<double>> LatticeCandidates(const float* x, int w, int h, bool notchGrid, const double* harm, int nh, const Core2Params& p,
                                                   double cropMin, double& topScore, double& aspectScore, double& rotationScore) {
  thread_local Spectrum sp;
  WhitenedSpectrum(sp, x, w, h, notchGrid);
  const int period = p.period;
  const double thMax = p.angle * M_PI / 180;
  const double thStep = 0.75 * M_PI / 180;
  const double sMin = std::max(p.pMin / period, 0.4);
  const double sMax = std::min(p.pMax / period, std::min(w, h) / (2.5 * period));
  const double ls = std::log(1.015), lr = std::log(1.02), rMax = std::log(1.4);
  // The grid (theta, log sx, log sy / sx) as before, searched coarse to fine: every second point each way
  // on the max-filtered plane, then the fine points around the best coarse cells on the plane itself.
  std::vector<double> ths, as, rs;
  for (double theta = -thMax; theta <= thMax + 1e-9; theta += thStep) ths.push_back(theta);
  for (double a = std::log(sMin); a <= std::log(sMax) + 1e-9; a += ls) as.push_back(a);
  for (double r = -rMax; r <= rMax + 1e-9; r += lr) rs.push_back(r);
  const int nT = int(ths.size()), nA = int(as.size()), nR = int(rs.size());
  std::vector<double> cs(nT), sn(nT), ex(nA), exr(size_t(nA) * nR);
  for (int i = 0; i < nT; i++) {
    cs[i] = std::cos(ths[i]);
    sn[i] = std::sin(ths[i]);
  }
  for (int j = 0; j < nA; j++) {
    ex[j] = std::exp(as[j]);
    for (int k = 0; k < nR; k++) exr[size_t(j) * nR + k] = std::exp(as[j] + rs[k]);
  }
  std::vector<Hypo> top;
  const size_t keep = 24;
  if (nT > 0 && nA > 0 && nR > 0) {
    thread_local std::vector<float> poolTmp, pooled;
    MaxPool(sp.coarse, sp.nx, sp.ny, kPoolRadius, poolTmp, pooled);
    const std::vector<int> ci = CoarseIndices(nT), cj = CoarseIndices(nA), ck = CoarseIndices(nR);
    struct Cell {
      int i, j, k;
      double score;
    };
    // The best kCoarseKeep cells, best first (ties: first found first).
    std::vector<Cell> cells;
    std::vector<double> rot(size_t(2) * nh), fx(nh);
    std::vector<int> u(nh);
    std::vector<double> scores(ck.size());
    for (const int i : ci) {
      RotateHarmonics(harm, nh, cs[i], sn[i], rot.data());
      for (const int j : cj) {
        CombColumns(rot.data(), nh, period, ex[j], sp.nx, fx.data(), u.data());
        CombNearestScales(pooled, sp.nx, sp.ny, sp.notch, rot.data(), fx.data(), u.data(), nh, period, exr.data() + size_t(j) * nR, ck.data(), int(ck.size()),
                          scores.data());
        for (size_t t = 0; t < ck.size(); t++) {
          const int k = ck[t];
          const double score = scores[t];
          if (cells.size() == size_t(kCoarseKeep) && !(score > cells.back().score)) continue;
          size_t at = cells.size();
          while (at > 0 && score > cells[at - 1].score) at--;
          cells.insert(cells.begin() + at, Cell{i, j, k, score});
          if (cells.size() > size_t(kCoarseKeep)) cells.pop_back();
        }
      }
    }
    thread_local std::vector<uint8_t> seen;
    seen.assign(size_t(nT) * nA * nR, 0);
    for (const Cell& c : cells)
      for (int i = std::max(0, c.i - 1); i <= std::min(nT - 1, c.i + 1); i++)
        for (int j = std::max(0, c.j - 1); j <= std::min(nA - 1, c.j + 1); j++)
          for (int k = std::max(0, c.k - 1); k <= std::min(nR - 1, c.k + 1); k++) {
            uint8_t& done = seen[(size_t(i) * nA + j) * nR + k];
            if (done) continue;
            done = 1;
            const double sx = ex[j], sy = exr[size_t(j) * nR + k];
            const double score = CombScoreCS(sp, sp.coarse, harm, nh, period, cs[i], sn[i], sx, sy);
            if (top.size() < keep || score > top.back().score) {
              top.push_back({ths[i], sx, sy, score});
              std::stable_sort(top.begin(), top.end(), [](const Hypo& u, const Hypo& v) { return u.score > v.score; });
              if (top.size() > keep) top.pop_back();
            }
          }
  }
  topScore = top.empty() ? -INFINITY : top[0].score;
  std::vector<Hypo> chosen;
  // A hypothesis within `steps` angle steps and `scale` (log) of each scale of one already chosen is that one.
  auto nearChosen = [&](const Hypo& hy, double steps = 2.5, double scale = 0.05) {
    for (const Hypo& c : chosen)
      if (std::abs(c.theta - hy.theta) < steps * thStep && std::abs(std::log(c.sx / hy.sx)) < scale && std::abs(std::log(c.sy / hy.sy)) < scale) return true;
    return false;
  };
  for (const Hypo& hy : top) {
    if (int(chosen.size()) >= (topScore < p.gate ? std::min(1, p.candidates) : p.candidates)) break;
    // Below the gate, a hypothesis that shrinks the period (costly to fold) is not tried: such pictures
    // (borders, screenshots) show a clear lattice.
    if (topScore < p.gate && std::sqrt(hy.sx * hy.sy) < kGatedScaleMin * cropMin / kCropMin) continue;
    if (!nearChosen(hy)) chosen.push_back(hy);
  }
  // Crops alone change only the scale: the best hypothesis on that line competes with far fewer others.
  // Scored on the fine plane, as the aspect lines are (the box-smoothed plane moved its maximum 1.5-3%).
  Hypo crop{0, 1, 1, -INFINITY};
  for (double a = std::log(std::max(sMin, cropMin)); a <= std::log(sMax) + 1e-9; a += kCropStep) {
    const double sc = std::exp(a);
    const double score = CombScore(sp, sp.fine, harm, nh, period, 0, sc, sc);
    if (score > crop.score) crop = {0, sc, sc, score};
  }
  if (crop.score > -INFINITY) {
    crop.line = true;
    // Unless a chosen hypothesis is the same lattice to within the grid's resolution (reference-v2.ts says why).
    if (!nearChosen(crop, 0.5, 0.01)) chosen.push_back(crop);
  }
  // A change of aspect alone keeps one axis at the no-geometry scale; on these two lines a whole picture's
  // sharp peaks are scored on the fine plane (the grid's smoothed planes flatten them), and the best is
  // folded only when it stands well clear of what unmarked pictures reach.
  const double s0 = cropMin / kCropMin;
  Hypo aspect{0, 1, 1, -INFINITY};
  for (int axis = 0; axis < 2; axis++)
    for (double a = -kAspectMax; a <= kAspectMax + 1e-9; a += kCropStep) {
      const double sx = axis ? s0 * std::exp(a) : s0, sy = axis ? s0 : s0 * std::exp(a);
      const double score = CombScore(sp, sp.fine, harm, nh, period, 0, sx, sy);
      if (score > aspect.score) aspect = {0, sx, sy, score};
    }
  aspectScore = aspect.score;
  if (aspect.score >= p.aspectGate) {
    if (!nearChosen(aspect)) chosen.push_back(aspect);
  }
  // The rotation plane (the grid's angles, the same scale both ways within kRotScale of the no-geometry one)
  // on the fine plane, where a whole picture's sharp peaks keep their height; coarse to fine like the grid
  // (nearest-bin lookups, each the maximum of the fine plane's 3 x 3 bins around, at every second point,
  // then the fine points around the kRotKeep best coarse cells); its best, refined, is folded from
  // p.rotationGate.
  Hypo rot{0, 1, 1, -INFINITY};
  std::vector<int> js;
  for (int j = 0; j < nA; j++)
    if (std::abs(as[j] - std::log(s0)) <= kRotScale) js.push_back(j);
  if (nT > 0 && !js.empty()) {
    struct Cell {
      int i, j;
      double score;
    };
    std::vector<Cell> cells;
    std::vector<double> rh(size_t(2) * nh);
    const std::vector<int> ci = CoarseIndices(nT), cj = CoarseIndices(int(js.size()));
    for (const int i : ci) {
      RotateHarmonics(harm, nh, cs[i], sn[i], rh.data());
      for (const int jj : cj) {
        const int j = js[jj];
        const double score = CombNearestMax(sp.fine, sp.nx, sp.ny, sp.notch, rh.data(), nh, period, ex[j]);
        if (cells.size() == size_t(kRotKeep) && !(score > cells.back().score)) continue;
        size_t at = cells.size();
        while (at > 0 && score > cells[at - 1].score) at--;
        cells.insert(cells.begin() + at, Cell{i, jj, score});
        if (cells.size() > size_t(kRotKeep)) cells.pop_back();
      }
    }
    std::vector<uint8_t> seen(size_t(nT) * js.size(), 0);
    for (const Cell& c : cells)
      for (int i = std::max(0, c.i - 1); i <= std::min(nT - 1, c.i + 1); i++)
        for (int jj = std::max(0, c.j - 1); jj <= std::min(int(js.size()) - 1, c.j + 1); jj++) {
          uint8_t& done = seen[size_t(i) * js.size() + jj];
          if (done) continue;
          done = 1;
          const int j = js[jj];
          const double score = CombScoreCS(sp, sp.fine, harm, nh, period, cs[i], sn[i], ex[j], ex[j]);
          if (score > rot.score) rot = {ths[i], ex[j], ex[j], score};
        }
  }
  if (rot.score > -INFINITY) rot = RefineHypo(sp, harm, nh, period, rot);
  rotationScore = rot.score;
  if (rot.score >= p.rotationGate) {
    if (!nearChosen(rot)) chosen.push_back(rot);
  }
  std::vector<std::vector<double>> out;
  for (const Hypo& hy : chosen) {
    const Hypo r = RefineHypo(sp, harm, nh, period, hy);
    const double theta = r.theta, sx = r.sx, sy = r.sy;
    const double c = std::cos(theta), s = std::sin(theta);
    out.push_back({period * sx * c, period * sy * s, -period * sx * s, period * sy * c});
  }
  return out;
}

// One run of samples of a lattice row, all inside the picture: bilinear at (baseX + ax i, baseY + ay i),
// added to row[i & kTM] (see foldLattice in reference-v2.ts).
inline void FoldRun(const float* x, int fw, int fh, double baseX, double baseY, double ax, double ay, int lo, int hi, double* row) {
  for (int i = lo; i <= hi; i++) {
    const double sx = baseX + ax * i, sy = baseY + ay * i;
    int x0 = int(sx), y0 = int(sy);  // sx, sy >= 0 here: truncation is the floor
    if (x0 >= fw - 1) x0 = fw - 2;
    if (y0 >= fh - 1) y0 = fh - 2;
    const double fx = sx - x0, fy = sy - y0;
    const float* p = x + size_t(y0) * fw + x0;
    const double top = p[0] + fx * (double(p[1]) - p[0]);
    const double bot = p[fw] + fx * (double(p[fw + 1]) - p[fw]);
    row[i & kTM] += top + fy * (bot - top);
  }
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define OPTMARK_FOLD_AVX2 1
// The groups of four samples of FoldRunAvx2, i from g0 to g1 (multiples of 4). kNarrow: |ax| < 1.99, so
// the columns x0 of four consecutive samples span at most 6 (3 |ax| plus the roundings) and are not
// tested; kUp: ax >= 0, so the group's lowest column is its first sample's (else its last's).
template <bool kNarrow, bool kUp>
__attribute__((target("avx2"), always_inline)) inline void FoldGroupsAvx2(const float* x, int fw, int fh, double baseX, double baseY, double ax, double ay,
                                                                          int g0, int g1, double* row) {
  const __m256d vbx = _mm256_set1_pd(baseX), vby = _mm256_set1_pd(baseY), vax = _mm256_set1_pd(ax), vay = _mm256_set1_pd(ay);
  const __m256d four = _mm256_set1_pd(4.0);
  const __m128i xmax = _mm_set1_epi32(fw - 2), ymax = _mm_set1_epi32(fh - 2), vfw = _mm_set1_epi32(fw);
  const __m256i next = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256d all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1)), none = _mm256_setzero_pd();
  const double* base = reinterpret_cast<const double*>(x);
  // Windows whose second row's 8 pixels would end past the picture are gathered instead.
  const ptrdiff_t lastWindow = ptrdiff_t(fw) * fh - fw - 8;
  __m256d vi = _mm256_setr_pd(g0, g0 + 1, g0 + 2, g0 + 3);
  for (int i = g0; i < g1; i += 4, vi = _mm256_add_pd(vi, four)) {
    const __m256d sx = _mm256_add_pd(vbx, _mm256_mul_pd(vax, vi));
    const __m256d sy = _mm256_add_pd(vby, _mm256_mul_pd(vay, vi));
    const __m128i x0 = _mm_min_epi32(_mm256_cvttpd_epi32(sx), xmax);
    const __m128i y0 = _mm_min_epi32(_mm256_cvttpd_epi32(sy), ymax);
    const __m256d fx = _mm256_sub_pd(sx, _mm256_cvtepi32_pd(x0));
    const __m256d fy = _mm256_sub_pd(sy, _mm256_cvtepi32_pd(y0));
    __m256 t01, b01;
    const int ya = _mm_cvtsi128_si32(y0), yb = _mm_extract_epi32(y0, 3);
    const int ylo = std::min(ya, yb);
    const __m128i lo4 = _mm_shuffle_epi32(x0, kUp ? 0x00 : 0xff);  // the lowest column, in every lane
    const ptrdiff_t at0 = ptrdiff_t(ylo) * fw + _mm_cvtsi128_si32(lo4);
    bool window = at0 <= lastWindow - (ya != yb ? fw : 0);
    if (!kNarrow) {
      const int xa = _mm_cvtsi128_si32(x0), xb = _mm_extract_epi32(x0, 3);
      window = window && unsigned(xb - xa + 6) <= 12u;
    }
    const __m128i d = _mm_sub_epi32(x0, lo4);
    const __m256i perm = _mm256_add_epi32(_mm256_inserti128_si256(_mm256_castsi128_si256(d), d, 1), next);
    if (window && ya == yb) {
      t01 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + at0), perm);
      b01 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + at0 + fw), perm);
    } else if (window && std::abs(yb - ya) == 1) {
      // Pixel rows ylo and ylo + 1 (the samples from the first on or up to the last): windows of the three
      // pixel rows they read, each sample's pairs picked from its own two.
      const __m128i m = _mm_cmpeq_epi32(y0, _mm_set1_epi32(ylo));
      const __m256 in0 = _mm256_castsi256_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(m), m, 1));
      const __m256 r0 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + at0), perm);
      const __m256 r1 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + at0 + fw), perm);
      const __m256 r2 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + at0 + 2 * fw), perm);
      t01 = _mm256_blendv_ps(r1, r0, in0);
      b01 = _mm256_blendv_ps(r2, r1, in0);
    } else {
      const __m128i at = _mm_add_epi32(_mm_mullo_epi32(y0, vfw), x0);
      t01 = _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_mask_i32gather_pd(none, base, at, all, 4)), split);
      b01 = _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_mask_i32gather_pd(none, base, _mm_add_epi32(at, vfw), all, 4)), split);
    }
    const __m256d p0 = _mm256_cvtps_pd(_mm256_castps256_ps128(t01)), p1 = _mm256_cvtps_pd(_mm256_extractf128_ps(t01, 1));
    const __m256d p2 = _mm256_cvtps_pd(_mm256_castps256_ps128(b01)), p3 = _mm256_cvtps_pd(_mm256_extractf128_ps(b01, 1));
    const __m256d top = _mm256_add_pd(p0, _mm256_mul_pd(fx, _mm256_sub_pd(p1, p0)));
    const __m256d bot = _mm256_add_pd(p2, _mm256_mul_pd(fx, _mm256_sub_pd(p3, p2)));
    const __m256d val = _mm256_add_pd(top, _mm256_mul_pd(fy, _mm256_sub_pd(bot, top)));
    double* r = row + (i & kTM);
    _mm256_storeu_pd(r, _mm256_add_pd(_mm256_loadu_pd(r), val));
  }
}

// FoldRun four samples at a time (AVX2): the same double operations per sample as FoldRun (no FMA). The
// groups start at multiples of 4 of i (the few samples before the first and after the last go through
// FoldRun), so the four samples of a group land on four consecutive tile columns without wrapping around
// the tile, and adding them as a vector gives each column the same sums in the same order. sx and sy are
// monotone in i (a product by one factor, then one sum, each rounded), so x0 and y0 are too: a group's pixel
// rows are one when its first and last samples' are, and its columns lie between its first and last
// samples'. Then (most lattices: scale up to about 2, small angles) the two pixel pairs of the four samples
// are one window of 8 pixels of each row, loaded and permuted (three rows blended when the samples lie on
// two pixel rows); else they are gathered.
__attribute__((target("avx2"))) void FoldRunAvx2(const float* x, int fw, int fh, double baseX, double baseY, double ax, double ay, int lo, int hi,
                                                 double* row) {
  const int g0 = std::min(hi + 1, (lo + 3) & ~3);  // first group's i
  const int g1 = g0 + ((hi + 1 - g0) & ~3);        // past the last group
  if (lo < g0) FoldRun(x, fw, fh, baseX, baseY, ax, ay, lo, g0 - 1, row);
  if (g0 < g1) {
    const bool narrow = std::abs(ax) < 1.99;
    if (ax >= 0) {
      if (narrow) FoldGroupsAvx2<true, true>(x, fw, fh, baseX, baseY, ax, ay, g0, g1, row);
      else FoldGroupsAvx2<false, true>(x, fw, fh, baseX, baseY, ax, ay, g0, g1, row);
    } else {
      if (narrow) FoldGroupsAvx2<true, false>(x, fw, fh, baseX, baseY, ax, ay, g0, g1, row);
      else FoldGroupsAvx2<false, false>(x, fw, fh, baseX, baseY, ax, ay, g0, g1, row);
    }
  }
  if (g1 <= hi) FoldRun(x, fw, fh, baseX, baseY, ax, ay, std::max(g1, lo), hi, row);
}

// FoldRun eight samples at a time (AVX-512F) when |ax| < 1.98: the columns x0 of eight consecutive samples
// then span at most 14 (7 |ax| plus the roundings), so the two pixel pairs of a group lie in one window of
// 16 pixels of each pixel row it reads, loaded and permuted (two rows, or three or four when its samples
// are on two or three pixel rows, each sample's pairs then picked from its own two). The same double
// operations per sample as FoldRun (no FMA). The groups start at multiples of 8 of i, so they do not wrap
// around the tile; the samples before the first, and the rest of the row from a group on more than three
// pixel rows or with windows past the picture, go through FoldRunAvx2, so every tile column gets its
// samples in the same order.
template <bool kUp>
__attribute__((target("avx512f,avx2"))) void FoldRunAvx512(const float* x, int fw, int fh, double baseX, double baseY, double ax, double ay, int lo, int hi,
                                                           double* row) {
  const int g0 = std::min(hi + 1, (lo + 7) & ~7);  // first group's i
  const int g1 = g0 + ((hi + 1 - g0) & ~7);        // past the last group
  if (lo < g0) FoldRunAvx2(x, fw, fh, baseX, baseY, ax, ay, lo, g0 - 1, row);
  const __m512d vbx = _mm512_set1_pd(baseX), vby = _mm512_set1_pd(baseY), vax = _mm512_set1_pd(ax), vay = _mm512_set1_pd(ay);
  const __m512d eight = _mm512_set1_pd(8.0);
  const __m256i xmax = _mm256_set1_epi32(fw - 2), ymax = _mm256_set1_epi32(fh - 2);
  const __m512i next = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m256i lowest = _mm256_set1_epi32(kUp ? 0 : 7);
  const ptrdiff_t last = ptrdiff_t(fw) * fh - 16;
  __m512d vi = _mm512_setr_pd(g0, g0 + 1, g0 + 2, g0 + 3, g0 + 4, g0 + 5, g0 + 6, g0 + 7);
  int i = g0;
  for (; i < g1; i += 8, vi = _mm512_add_pd(vi, eight)) {
    const __m512d sx = _mm512_add_pd(vbx, _mm512_mul_pd(vax, vi));
    const __m512d sy = _mm512_add_pd(vby, _mm512_mul_pd(vay, vi));
    const __m256i x0 = _mm256_min_epi32(_mm512_cvttpd_epi32(sx), xmax);
    const __m256i y0 = _mm256_min_epi32(_mm512_cvttpd_epi32(sy), ymax);
    const int ya = _mm256_cvtsi256_si32(y0), yb = _mm_extract_epi32(_mm256_extracti128_si256(y0, 1), 3);
    const int ylo = std::min(ya, yb), dy = std::abs(yb - ya);
    const __m256i lo8 = _mm256_permutevar8x32_epi32(x0, lowest);  // the lowest column, in every lane
    const ptrdiff_t at0 = ptrdiff_t(ylo) * fw + _mm256_cvtsi256_si32(lo8);
    // More than three pairs of pixel rows, or windows past the picture: the rest of the row to FoldRunAvx2.
    if (dy > 2 || at0 > last - (dy + 1) * ptrdiff_t(fw)) break;
    const __m512d fx = _mm512_sub_pd(sx, _mm512_cvtepi32_pd(x0));
    const __m512d fy = _mm512_sub_pd(sy, _mm512_cvtepi32_pd(y0));
    const __m256i d = _mm256_sub_epi32(x0, lo8);
    const __m512i perm = _mm512_add_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(d), d, 1), next);
    __m512 t01 = _mm512_permutexvar_ps(perm, _mm512_loadu_ps(x + at0));
    __m512 b01 = _mm512_permutexvar_ps(perm, _mm512_loadu_ps(x + at0 + fw));
    if (dy) {
      // Samples on pixel row ylo + 1 (and ylo + 2) take their pairs from the next window(s).
      const __m512i rel = _mm512_sub_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(y0), y0, 1), _mm512_set1_epi32(ylo));
      const __m512 r2 = _mm512_permutexvar_ps(perm, _mm512_loadu_ps(x + at0 + 2 * fw));
      const __mmask16 past0 = _mm512_cmpneq_epi32_mask(rel, _mm512_setzero_si512());
      t01 = _mm512_mask_mov_ps(t01, past0, b01);
      b01 = _mm512_mask_mov_ps(b01, past0, r2);
      if (dy == 2) {
        const __m512 r3 = _mm512_permutexvar_ps(perm, _mm512_loadu_ps(x + at0 + 3 * fw));
        const __mmask16 past1 = _mm512_cmpeq_epi32_mask(rel, _mm512_set1_epi32(2));
        t01 = _mm512_mask_mov_ps(t01, past1, r2);
        b01 = _mm512_mask_mov_ps(b01, past1, r3);
      }
    }
    const __m512d p0 = _mm512_cvtps_pd(_mm512_castps512_ps256(t01));
    const __m512d p1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t01), 1)));
    const __m512d p2 = _mm512_cvtps_pd(_mm512_castps512_ps256(b01));
    const __m512d p3 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b01), 1)));
    const __m512d top = _mm512_add_pd(p0, _mm512_mul_pd(fx, _mm512_sub_pd(p1, p0)));
    const __m512d bot = _mm512_add_pd(p2, _mm512_mul_pd(fx, _mm512_sub_pd(p3, p2)));
    const __m512d val = _mm512_add_pd(top, _mm512_mul_pd(fy, _mm512_sub_pd(bot, top)));
    double* r = row + (i & kTM);
    _mm512_storeu_pd(r, _mm512_add_pd(_mm512_loadu_pd(r), val));
  }
  if (i <= hi) FoldRunAvx2(x, fw, fh, baseX, baseY, ax, ay, std::max(i, lo), hi, row);
}
#endif

// Resample on the lattice frame and fold onto one kTile x kTile tile (see foldLattice in reference-v2.ts).
void FoldLattice(const float* x, int fw, int fh, const double* v, int period, double ox, double oy, double* out) {
  std::fill(out, out + kT2, 0.0);
  const double cx = (fw - 1) / 2.0, cy = (fh - 1) / 2.0;
  const double ax = v[0] / period, ay = v[1] / period, bx = v[2] / period, by = v[3] / period;
  const double det = ax * by - bx * ay;
  if (!(std::abs(det) > 1e-9)) return;
  double imin = INFINITY, imax = -INFINITY, jmin = INFINITY, jmax = -INFINITY;
  const double corners[4][2] = {{0, 0}, {double(fw - 1), 0}, {0, double(fh - 1)}, {double(fw - 1), double(fh - 1)}};
  for (const auto& pc : corners) {
    const double dx = pc[0] - cx, dy = pc[1] - cy;
    const double fi = (by * dx - bx * dy) / det - ox;
    const double fj = (-ay * dx + ax * dy) / det - oy;
    imin = std::min(imin, fi);
    imax = std::max(imax, fi);
    jmin = std::min(jmin, fj);
    jmax = std::max(jmax, fj);
  }
  const int i0 = int(std::floor(imin)), i1 = int(std::ceil(imax));
  const int j0 = int(std::floor(jmin)), j1 = int(std::ceil(jmax));
#ifdef OPTMARK_FOLD_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  const int wide = avx512 && std::abs(ax) < 1.98 ? (ax >= 0 ? 1 : 2) : 0;  // FoldRunAvx512, columns rising or falling
#endif
  for (int j = j0; j <= j1; j++) {
    const double baseX = cx + bx * (j + oy) + ax * ox;
    const double baseY = cy + by * (j + oy) + ay * ox;
    double* row = out + size_t(j & kTM) * kT;
    auto inside = [&](int i) {
      const double sx = baseX + ax * i, sy = baseY + ay * i;
      return sx >= 0 && sy >= 0 && sx <= fw - 1 && sy <= fh - 1;
    };
    // The samples of row j inside the picture: sx and sy are rounded from monotone functions of i, so
    // the set is one run [lo, hi]. Estimated from the two constraints, then settled with the exact test.
    double flo = i0, fhi = i1;
    auto clip = [&](double base, double a, double top) {
      if (a == 0) {
        if (!(base >= 0 && base <= top)) fhi = flo - 1;
        return;
      }
      const double e0 = -base / a, e1 = (top - base) / a;
      flo = std::max(flo, std::min(e0, e1));
      fhi = std::min(fhi, std::max(e0, e1));
    };
    clip(baseX, ax, fw - 1);
    clip(baseY, ay, fh - 1);
    int lo = i0, hi = i1;
    bool found = false;
    if (flo <= fhi) {
      lo = std::max(i0, int(std::ceil(flo)));
      hi = std::min(i1, int(std::floor(fhi)));
      while (lo <= hi && !inside(lo)) lo++;
      found = lo <= hi;
    }
    if (!found) {  // no sample in the estimate (rounding at a corner of the picture): every i is tested
      for (lo = i0, hi = i1; lo <= hi && !inside(lo);) lo++;
      if (lo > hi) continue;
    }
    while (lo > i0 && inside(lo - 1)) lo--;
    while (!inside(hi)) hi--;
    while (hi < i1 && inside(hi + 1)) hi++;
#ifdef OPTMARK_FOLD_AVX2
    if (wide) {
      if (wide == 1) FoldRunAvx512<true>(x, fw, fh, baseX, baseY, ax, ay, lo, hi, row);
      else FoldRunAvx512<false>(x, fw, fh, baseX, baseY, ax, ay, lo, hi, row);
      continue;
    }
    if (avx2) {
      FoldRunAvx2(x, fw, fh, baseX, baseY, ax, ay, lo, hi, row);
      continue;
    }
#endif
    FoldRun(x, fw, fh, baseX, baseY, ax, ay, lo, hi, row);
  }
}

std::vector<double> Transformed(const float* key, int n, const int* d) {
  std::vector<double> out(size_t(n) * n);
  const int m = n - 1;
  for (int y = 0; y < n; y++)
    for (int x = 0; x < n; x++) {
      const int kx = (d[0] * x + d[1] * y) & m;
      const int ky = (d[2] * x + d[3] * y) & m;
      out[size_t(y) * n + x] = key[size_t(ky) * n + kx];
    }
  return out;
}

struct SyncHit {
  double z = -INFINITY;
  int d = 0, tx = 0, ty = 0;
  double fx = 0, fy = 0;
};

// The hit at surface index i (value z after normalising) with its sub-pixel offset from the parabola
// through its neighbours.
SyncHit PeakAt(const double* pr, int n, size_t i, double z, int d) {
  const int m = n - 1;
  const int ty = int(i / n), tx = int(i % n);
  const double v = pr[i];
  auto sub = [v](double a, double b) {
    const double den = a - 2 * v + b;
    if (!(den < 0)) return 0.0;
    const double r = 0.5 * (a - b) / den;
    return r > 0.5 ? 0.5 : r < -0.5 ? -0.5 : r;
  };
  SyncHit hit;
  hit.z = z;
  hit.d = d;
  hit.tx = tx;
  hit.ty = ty;
  hit.fx = sub(pr[size_t(ty) * n + ((tx - 1) & m)], pr[size_t(ty) * n + ((tx + 1) & m)]);
  hit.fy = sub(pr[size_t((ty - 1) & m) * n + tx], pr[size_t((ty + 1) & m) * n + tx]);
  return hit;
}

// Pushes the local maxima (no cyclic 3 x 3 neighbour higher) of a sync surface whose z (value / sd)
// reaches `floor`.
void LocalPeaks(const double* pr, int n, double sd, double floor, int d, std::vector<SyncHit>& out) {
  const int m = n - 1;
  const double min = floor * sd;
  for (size_t i = 0; i < size_t(n) * n; i++) {
    const double v = pr[i];
    if (!(v >= min)) continue;
    const int ty = int(i / n), tx = int(i % n);
    bool top = true;
    for (int ey = -1; ey <= 1 && top; ey++)
      for (int ex = -1; ex <= 1; ex++)
        if ((ex || ey) && pr[size_t((ty + ey) & m) * n + ((tx + ex) & m)] > v) {
          top = false;
          break;
        }
    if (top) out.push_back(PeakAt(pr, n, i, v / sd, d));
  }
}

// Correlates a period x period fold with part A under each symmetry, each frequency of A at the power
// 0.25 of its amplitude (its phase kept); sync z is the peak over the surface's noise level sqrt(sum_k |W_D(k)|^2 Q(k)),
// Q the fold's power except at the template's frequencies, where it is the mean of their other 3 x 3
// neighbours (reference-v2.ts says why).
struct SyncA {
  int n;
  std::vector<double> re[8], im[8], w2[8];
  std::vector<unsigned char> tpl;  // 1 at the template's frequencies (the same set under every symmetry)
  double power;
  SyncA(const float* a, int period, const double* harm, int nh, double pw) : n(period), power(pw) {
    const size_t n2 = size_t(n) * n;
    const int m = n - 1;
    tpl.assign(n2, 0);
    for (int i = 0; i < 2 * nh; i += 2) {
      const int m1 = int(harm[i]), m2 = int(harm[i + 1]);
      tpl[size_t(m2 & m) * n + (m1 & m)] = 1;
      tpl[size_t(-m2 & m) * n + (-m1 & m)] = 1;
    }
    for (int d = 0; d < 8; d++) {
      re[d] = Transformed(a, n, kDihedral[d]);
      im[d].assign(n2, 0.0);
      Fft2dRect(re[d].data(), im[d].data(), n, n, -1);
      w2[d].resize(n2);
      for (size_t i = 0; i < n2; i++) {
        // |A|^(power - 1) = (|A|^2)^((power - 1) / 2).
        const double a2 = re[d][i] * re[d][i] + im[d][i] * im[d][i];
        const double k = a2 > 0 ? std::pow(a2, 0.5 * (power - 1)) : 0;
        re[d][i] *= k;
        im[d][i] *= k;
        w2[d][i] = re[d][i] * re[d][i] + im[d][i] * im[d][i];
      }
    }
  }
  // The best peak over the symmetries (or `only`); with `peaks`, also every local maximum from z `floor`.
  SyncHit Best(const double* f, int only, std::vector<SyncHit>* peaks = nullptr, double floor = INFINITY) const {
    const size_t n2 = size_t(n) * n;
    // Scratch planes kept per thread (the refinement calls this up to 48 times per picture).
    thread_local std::vector<double> fr, fi, pr, pi, q, qn;
    fr.assign(f, f + n2);
    fi.assign(n2, 0.0);
    pr.resize(n2);
    pi.resize(n2);
    q.resize(n2);
    Fft2dRect(fr.data(), fi.data(), n, n, -1);
    const int m = n - 1;
    for (size_t k = 0; k < n2; k++) q[k] = fr[k] * fr[k] + fi[k] * fi[k];
    qn = q;
    for (size_t k = 0; k < n2; k++) {
      if (!tpl[k]) continue;
      const int ky = int(k / n), kx = int(k % n);
      double acc = 0;
      int cnt = 0;
      for (int ey = -1; ey <= 1; ey++)
        for (int ex = -1; ex <= 1; ex++) {
          const size_t j = size_t((ky + ey) & m) * n + ((kx + ex) & m);
          if (tpl[j]) continue;
          acc += q[j];
          cnt++;
        }
      if (cnt) qn[k] = acc / cnt;
    }
    SyncHit hit;
    for (int d = only < 0 ? 0 : only; d < (only < 0 ? 8 : only + 1); d++) {
      double noise = 0;
      for (size_t i = 0; i < n2; i++) {
        pr[i] = fr[i] * re[d][i] + fi[i] * im[d][i];
        pi[i] = fr[i] * im[d][i] - fi[i] * re[d][i];
        noise += w2[d][i] * qn[i];
      }
      Fft2dRect(pr.data(), pi.data(), n, n, 1);
      size_t best = 0;
      for (size_t i = 1; i < n2; i++)
        if (pr[i] > pr[best]) best = i;
      const double sd = std::sqrt(noise);
      const double z = sd > 0 ? pr[best] / sd : 0;
      if (z > hit.z) hit = PeakAt(pr.data(), n, best, z, d);
      if (peaks && sd > 0) LocalPeaks(pr.data(), n, sd, floor, d, *peaks);
    }
    return hit;
  }
};

// The sync correlator of the last key part A seen on this thread (workers verify with one secret).
const SyncA& SyncAFor(const float* a, int period, const double* harm, int nh, double power) {
  thread_local std::vector<float> key;
  thread_local std::vector<double> keyHarm;
  thread_local std::unique_ptr<SyncA> last;
  const size_t n2 = size_t(period) * period;
  if (!last || last->n != period || last->power != power || keyHarm.size() != size_t(2 * nh) || std::memcmp(key.data(), a, sizeof(float) * n2) != 0 ||
      std::memcmp(keyHarm.data(), harm, sizeof(double) * 2 * nh) != 0) {
    key.assign(a, a + n2);
    keyHarm.assign(harm, harm + 2 * nh);
    last = std::make_unique<SyncA>(a, period, harm, nh, power);
  }
  return *last;
}

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

void DetectCore2(const Core2In& in, const Core2Params& p, Core2Out& out) {
  const int w = in.width, h = in.height, period = p.period;
  const size_t n = size_t(w) * h;
  // Per-thread planes (their pages are kept from call to call). Every lattice is folded from the picture
  // prefiltered at its own resolution, however large the period (docs/fingerprint.md, step 5). Version 2
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
  // phaseLooks choices, in its order (reference-v2.ts, step 7 of docs/fingerprint.md).
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
  // chosen symmetry is not the identity (reference-v2.ts, runnerPeaks and step 10 of docs/fingerprint.md).
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
  // sync z from latticeLookZ, whatever the chosen alignment's sync z (reference-v2.ts, step 11).
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
