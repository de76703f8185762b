// Version 2's lattice search, its second step (src/fingerprint/v2/lattice.ts): hypotheses of the
// geometry scored by the template's comb on the whitened spectrum, coarse to fine, then refined by a
// pattern search. The same operations as the reference, in the same order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "simd.h"
#include "v2-internal.h"

namespace optmark {
namespace v2 {
namespace {

constexpr double kGridSkip = 2;  // template peaks this close (bins) to a notched grid line leave the comb
const double kCropStep = std::log(1.005);
constexpr int kPoolRadius = 1;             // max filter of the coarse pass, bins
constexpr int kCoarseKeep = 32;            // coarse cells refined
constexpr int kRotKeep = 4;                // coarse cells of the rotation plane refined
const double kRotScale = std::log(1.45);   // the rotation plane: scales within 1.45x of the no-geometry one
constexpr double kGatedScaleMin = 0.85;    // below the gate, grid hypotheses from this times the no-geometry scale
const double kAspectMax = std::log(1.36);  // the aspect lines: one axis at the no-geometry scale, the other within 1.36x of it

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

#ifdef OPTMARK_X86_SIMD
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
#ifdef OPTMARK_X86_SIMD
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

}  // namespace

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
    // Unless a chosen hypothesis is the same lattice to within the grid's resolution (src/fingerprint/v2/ says why).
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

}  // namespace v2
}  // namespace optmark
