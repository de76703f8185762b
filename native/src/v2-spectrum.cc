// Version 2's lattice search, its first step (src/fingerprint/v2/spectrum.ts): the whitened power
// spectrum of the prefiltered picture. The same operations as the reference, in the same order.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "fft.h"
#include "simd.h"
#include "v2-internal.h"

namespace optmark {
namespace v2 {
namespace {

constexpr double kSpecClip = 6;
constexpr int kWhitenBox = 17;

inline double JsRound(double x) { return std::floor(x + 0.5); }

int NextPow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Twiddles per (length, sign), computed with the same expression as fft.ts (cos/sin of sign*2*pi/len*k),

OPTMARK_CLONES
void FftColumns(double* __restrict re, double* __restrict im, int nx, int ny, int sign) { FftColumnsOf<0>(re, im, nx, ny, TwiddlesFor(ny, sign)); }

// The same at width 32 fixed at compile time (the sync correlation's period transforms: inner loop unrolled).
OPTMARK_CLONES
void FftColumns32(double* __restrict re, double* __restrict im, int ny, int sign) { FftColumnsOf<32>(re, im, 32, ny, TwiddlesFor(ny, sign)); }

constexpr int kRowBlock = 16;

OPTMARK_CLONES
void FftColumnsBlock(double* __restrict re, double* __restrict im, int ny, int sign) { FftColumnsOf<kRowBlock>(re, im, kRowBlock, ny, TwiddlesFor(ny, sign)); }

// Half spectra (bins 0 .. nx/2) of the rows of the windowed picture (row y: x's row times wy[y] wx[i], zero
// past w), two rows per complex transform: with Z = FFT(a + i b), A(k) = (Z(k) + conj Z(-k)) / 2 and
// B(k) = (Z(k) - conj Z(-k)) / 2i. Sixteen row pairs at a time: interleaved into a small block, transformed
// there as columns (per element the same butterflies as fft1d, vectorised across the sixteen pairs), split
// into the hw = nx/2 + 1 wide rows of re and im (rows from h on untouched). The same operations as
// halfSpectrumRows in src/fingerprint/v2/.
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
// smooth() in src/fingerprint/v2/; the interior runs without wrap-around indexing so that it vectorises.
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

}  // namespace

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

}  // namespace v2
}  // namespace optmark
