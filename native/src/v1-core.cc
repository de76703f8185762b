// Version 1's detection core (frozen: version 1 no longer embeds; its marks are detected as they always
// were), a line-by-line port of src/fingerprint/v1/core.ts (see v1.h): resample-and-fold over a scale
// search, the sync correlation and the per-cell count. Written so that GCC/Clang vectorise the inner loops
// at -O3 (simd.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "fft.h"
#include "simd.h"
#include "v1.h"

namespace optmark {
namespace {

struct Axis {
  int start = 0;
  std::vector<int> idx;
  std::vector<float> frac;
};

// Output u samples source position c + (u - off - c*s)/s about the centre c; only in-range samples are kept.
Axis MakeAxis(int n, double s, double off) {
  Axis a;
  const double c = (n - 1) / 2.0;
  const int outN = int(std::ceil(n * s)) + 2;
  int start = -1;
  for (int u = 0; u < outN; u++) {
    const double b = c + (u - off - c * s) / s;
    if (b < 0 || b > n - 1) continue;
    if (start < 0) start = u;
    int i = int(std::floor(b));
    if (i >= n - 1) i = n - 2;
    a.idx.push_back(i);
    a.frac.push_back(float(b - i));
  }
  a.start = std::max(0, start);
  return a;
}

#ifdef OPTMARK_X86_SIMD
// The bilinear samples of one output row (Fold's line), eight at a time while the eight samples' pixel
// pairs lie within a window of 16 pixels of the row (scales from about 0.55): two loads per source row and
// permutations instead of one load per pixel; per sample the same float operations (no FMA). Returns how
// many samples it wrote (the rest are left to the scalar loop). `end` bounds the plane.
// Pixels r[d] (d < 16 per lane; `hi` set where d >= 8) from two windows of 8.
__attribute__((target("avx2"))) inline __m256 PickAvx2(const float* r, __m256i d, __m256 hi) {
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(r), d), _mm256_permutevar8x32_ps(_mm256_loadu_ps(r + 8), d), hi);
}

__attribute__((target("avx2"))) int InterpRowAvx2(const float* r0, const float* r1, const int* xi, const float* xf, int nx, float fy, const float* end,
                                                  float* line) {
  const __m256 vfy = _mm256_set1_ps(fy);
  const __m256i one = _mm256_set1_epi32(1), seven = _mm256_set1_epi32(7);
  int i = 0;
  for (; i + 8 <= nx; i += 8) {
    const int k0 = xi[i];
    if (xi[i + 7] - k0 > 14 || r1 + k0 + 16 > end) break;
    const __m256i d0 = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xi + i)), _mm256_set1_epi32(k0));
    const __m256i d1 = _mm256_add_epi32(d0, one);
    // Lanes whose index is 8 or more take the second window.
    const __m256 h0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(d0, seven)), h1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(d1, seven));
    const __m256 fx = _mm256_loadu_ps(xf + i);
    const __m256 a0 = PickAvx2(r0 + k0, d0, h0), a1 = PickAvx2(r0 + k0, d1, h1);
    const __m256 b0 = PickAvx2(r1 + k0, d0, h0), b1 = PickAvx2(r1 + k0, d1, h1);
    const __m256 top = _mm256_add_ps(a0, _mm256_mul_ps(fx, _mm256_sub_ps(a1, a0)));
    const __m256 bot = _mm256_add_ps(b0, _mm256_mul_ps(fx, _mm256_sub_ps(b1, b0)));
    _mm256_storeu_ps(line + i, _mm256_add_ps(top, _mm256_mul_ps(vfy, _mm256_sub_ps(bot, top))));
  }
  return i;
}

// InterpRowAvx2 sixteen samples at a time (AVX-512F) while their pixel pairs lie within a window of 32
// pixels of the row: two loads per source row and a two-table permutation per pixel of the pair; per
// sample the same float operations (no FMA).
__attribute__((target("avx512f"))) int InterpRowAvx512(const float* r0, const float* r1, const int* xi, const float* xf, int nx, float fy, const float* end,
                                                       float* line) {
  const __m512 vfy = _mm512_set1_ps(fy);
  const __m512i one = _mm512_set1_epi32(1);
  int i = 0;
  for (; i + 16 <= nx; i += 16) {
    const int k0 = xi[i];
    if (xi[i + 15] - k0 > 30 || r1 + k0 + 32 > end) break;
    const __m512i d0 = _mm512_sub_epi32(_mm512_loadu_si512(xi + i), _mm512_set1_epi32(k0));
    const __m512i d1 = _mm512_add_epi32(d0, one);
    const __m512 fx = _mm512_loadu_ps(xf + i);
    const __m512 w0 = _mm512_loadu_ps(r0 + k0), w1 = _mm512_loadu_ps(r0 + k0 + 16);
    const __m512 v0 = _mm512_loadu_ps(r1 + k0), v1 = _mm512_loadu_ps(r1 + k0 + 16);
    const __m512 a0 = _mm512_permutex2var_ps(w0, d0, w1), a1 = _mm512_permutex2var_ps(w0, d1, w1);
    const __m512 b0 = _mm512_permutex2var_ps(v0, d0, v1), b1 = _mm512_permutex2var_ps(v0, d1, v1);
    const __m512 top = _mm512_add_ps(a0, _mm512_mul_ps(fx, _mm512_sub_ps(a1, a0)));
    const __m512 bot = _mm512_add_ps(b0, _mm512_mul_ps(fx, _mm512_sub_ps(b1, b0)));
    _mm512_storeu_ps(line + i, _mm512_add_ps(top, _mm512_mul_ps(vfy, _mm512_sub_ps(bot, top))));
  }
  return i;
}
#endif

#ifdef OPTMARK_X86_SIMD
// Sync::Correlate's spectral product for columns u in [1, n - 3) in blocks of 4 x 4 bins (AVX2): bin (v, u)
// times the conjugate-mirrored bin ((n - v) & m, n - u), written transposed to (u, v); per bin the same
// double operations as the scalar loop (no FMA).
__attribute__((target("avx2"))) void ProductBlocksAvx2(const double* re, const double* im, const double* sr, const double* si, int n, double* tre,
                                                       double* tim) {
  const int m = n - 1;
  for (int v = 0; v < n; v += 4) {
    for (int u = 1; u <= n - 4; u += 4) {
      __m256d pr[4], pi[4];
      for (int r = 0; r < 4; r++) {
        const int i = (v + r) * n + u, j = ((n - v - r) & m) * n + (n - u - 3);
        // The mirrored bins run backwards: reversed into the order of u.
        const __m256d a = _mm256_permute4x64_pd(_mm256_loadu_pd(re + j), 0x1b), b = _mm256_permute4x64_pd(_mm256_loadu_pd(im + j), 0x1b);
        const __m256d c = _mm256_loadu_pd(sr + i), d = _mm256_loadu_pd(si + i);
        pr[r] = _mm256_sub_pd(_mm256_mul_pd(a, c), _mm256_mul_pd(b, d));
        pi[r] = _mm256_add_pd(_mm256_mul_pd(a, d), _mm256_mul_pd(b, c));
      }
      for (__m256d* q : {pr, pi}) {  // 4 x 4 transpose: row r lane k -> row k lane r
        const __m256d t0 = _mm256_unpacklo_pd(q[0], q[1]), t1 = _mm256_unpackhi_pd(q[0], q[1]);
        const __m256d t2 = _mm256_unpacklo_pd(q[2], q[3]), t3 = _mm256_unpackhi_pd(q[2], q[3]);
        q[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
        q[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
        q[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
        q[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
      }
      for (int k = 0; k < 4; k++) {
        _mm256_storeu_pd(tre + (u + k) * n + v, pr[k]);
        _mm256_storeu_pd(tim + (u + k) * n + v, pi[k]);
      }
    }
  }
}
#endif

#ifdef OPTMARK_X86_SIMD
// b = a transposed, n x n doubles (n a multiple of 4), in 4 x 4 blocks held in registers.
__attribute__((target("avx2"))) void TransposeAvx2(const double* a, double* b, int n) {
  for (int y = 0; y < n; y += 4)
    for (int x = 0; x < n; x += 4) {
      const double* s = a + size_t(y) * n + x;
      const __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + n), r2 = _mm256_loadu_pd(s + 2 * n), r3 = _mm256_loadu_pd(s + 3 * n);
      const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1), t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
      double* d = b + size_t(x) * n + y;
      _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
      _mm256_storeu_pd(d + n, _mm256_permute2f128_pd(t1, t3, 0x20));
      _mm256_storeu_pd(d + 2 * n, _mm256_permute2f128_pd(t0, t2, 0x31));
      _mm256_storeu_pd(d + 3 * n, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
}
#endif

// Bilinear resampling by scale s (with sub-pixel offset), summed onto one N x N tile.
template <int N>
OPTMARK_CLONES void Fold(const float* __restrict x, int w, int h, double s, double ox, double oy, double* __restrict out, float* __restrict line) {
  constexpr int M = N - 1;
  std::fill(out, out + N * N, 0.0);
  const Axis ax = MakeAxis(w, s, ox);
  const Axis ay = MakeAxis(h, s, oy);
  const int nx = int(ax.idx.size());
  const int* xi = ax.idx.data();
  const float* xf = ax.frac.data();
  for (size_t j = 0; j < ay.idx.size(); j++) {
    const float* r0 = x + size_t(ay.idx[j]) * w;
    const float* r1 = r0 + w;
    const float fy = ay.frac[j];
    int i0 = 0;
#ifdef OPTMARK_X86_SIMD
    static const bool avx2 = __builtin_cpu_supports("avx2");
    static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
    if (avx512) i0 = InterpRowAvx512(r0, r1, xi, xf, nx, fy, x + size_t(w) * h, line);
    else if (avx2) i0 = InterpRowAvx2(r0, r1, xi, xf, nx, fy, x + size_t(w) * h, line);
#endif
    for (int i = i0; i < nx; i++) {
      const int k = xi[i];
      const float fx = xf[i];
      const float top = r0[k] + fx * (r0[k + 1] - r0[k]);
      const float bot = r1[k] + fx * (r1[k + 1] - r1[k]);
      line[i] = top + fy * (bot - top);
    }
    double* row = out + size_t((ay.start + int(j)) & M) * N;
    // Runs of consecutive tile columns (split where the column index wraps), in the order of i.
    for (int i = 0; i < nx;) {
      const int c0 = (ax.start + i) & M;
      const int len = std::min(nx - i, N - c0);
      double* __restrict dst = row + c0;
      const float* __restrict src = line + i;
      for (int t = 0; t < len; t++) dst[t] += src[t];
      i += len;
    }
  }
}

// Radix-2 complex 2-D FFT of N x N. Each butterfly works on two whole rows, so the inner loop runs over N
// contiguous doubles and vectorises; the second axis goes through a transpose.
template <int N>
struct Fft {
  Twiddles tw[2] = {MakeTwiddles(N, -1), MakeTwiddles(N, 1)};  // per sign
  // Transforms every column (along y) at once (the kernel in fft.h, compiled here for each target clone).
  OPTMARK_CLONES
  void Columns(double* __restrict re, double* __restrict im, int sign) const { FftColumnsOf<N>(re, im, N, N, tw[sign < 0 ? 0 : 1]); }
  void TwoD(double* re, double* im, int sign, double* tre, double* tim) const {
    Transpose(re, tre);
    Transpose(im, tim);
    Columns(tre, tim, sign);  // the rows of the original
    Transpose(tre, re);
    Transpose(tim, im);
    Columns(re, im, sign);
  }
  static void Transpose(const double* __restrict a, double* __restrict b) {
#ifdef OPTMARK_X86_SIMD
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) {
      TransposeAvx2(a, b, N);
      return;
    }
#endif
    constexpr int B = 16;
    for (int y0 = 0; y0 < N; y0 += B)
      for (int x0 = 0; x0 < N; x0 += B)
        for (int y = y0; y < y0 + B; y++)
          for (int x = x0; x < x0 + B; x++) b[x * N + y] = a[y * N + x];
  }
};

struct Peak {
  double z = 0;
  int dx = 0, dy = 0;
  double fx = 0, fy = 0;
};

template <int N>
const Fft<N>& SharedFft() {
  static const Fft<N> fft;  // immutable after construction; thread-safe static init
  return fft;
}

// Correlates folds of one N x N tile with the sync tile (its spectrum is kept per thread for the last key).
template <int N>
struct Sync {
  static constexpr int N2 = N * N, M = N - 1;
  const Fft<N>& fft = SharedFft<N>();
  std::vector<double> specRe, specIm, re, im, tre, tim;
  explicit Sync(const std::vector<float>& sync) : specRe(N2), specIm(N2), re(N2), im(N2), tre(N2), tim(N2) {
    for (int i = 0; i < N2; i++) specRe[i] = sync[i];
    fft.TwoD(specRe.data(), specIm.data(), -1, tre.data(), tim.data());
  }
  // Correlates two real folds at once: with Z = FFT(a + i b), IFFT(S(k) Z(-k)) = corr_a + i corr_b.
  // The same transforms as TwoD on a copy of the folds, without its copies: the folds are transposed
  // straight into the row pass, and the product is written transposed, ready for the inverse row pass.
  void Correlate(const double* a, const double* b, Peak& pa, Peak& pb) {
    Fft<N>::Transpose(a, tre.data());
    if (b) Fft<N>::Transpose(b, tim.data());
    else std::fill(tim.begin(), tim.end(), 0.0);
    fft.Columns(tre.data(), tim.data(), -1);  // the rows of the folds
    Fft<N>::Transpose(tre.data(), re.data());
    Fft<N>::Transpose(tim.data(), im.data());
    fft.Columns(re.data(), im.data(), -1);
    // tre/tim receive the product transposed: (u, v) holds bin (v, u).
    int u1 = 0;  // columns from u1 on are left to the scalar loop
#ifdef OPTMARK_X86_SIMD
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) {
      ProductBlocksAvx2(re.data(), im.data(), specRe.data(), specIm.data(), N, tre.data(), tim.data());
      u1 = 1 + (N - 4) / 4 * 4;
    }
#endif
    for (int v = 0; v < N; v++) {
      const int nv = (N - v) & M;
      for (int u = 0; u < N; u = (u == 0 && u1 > 0) ? u1 : u + 1) {
        const int i = v * N + u, j = nv * N + ((N - u) & M), t = u * N + v;
        tre[t] = re[j] * specRe[i] - im[j] * specIm[i];
        tim[t] = re[j] * specIm[i] + im[j] * specRe[i];
      }
    }
    fft.Columns(tre.data(), tim.data(), 1);  // the rows of the product
    Fft<N>::Transpose(tre.data(), re.data());
    Fft<N>::Transpose(tim.data(), im.data());
    fft.Columns(re.data(), im.data(), 1);
    pa = PeakOf(re.data());
    if (b) pb = PeakOf(im.data());
  }
  static Peak PeakOf(const double* c) {
    int best = 0;
    double sq = 0;
    for (int i = 0; i < N2; i++) {
      sq += c[i] * c[i];
      if (c[i] > c[best]) best = i;
    }
    const double rms = std::sqrt(sq / N2);
    Peak p;
    p.dy = best / N;
    p.dx = best & M;
    const double v = c[best];
    p.fx = SubPixel(c[p.dy * N + ((p.dx - 1) & M)], v, c[p.dy * N + ((p.dx + 1) & M)]);
    p.fy = SubPixel(c[((p.dy - 1) & M) * N + p.dx], v, c[((p.dy + 1) & M) * N + p.dx]);
    p.z = rms > 0 ? v / rms : 0;
    return p;
  }
};

// Half resolution (2 x 2 means, odd last row/column dropped) of a w x h picture.
std::vector<float> HalfOf(const float* x, int w, int h, int& hw, int& hh) {
  hw = w / 2;
  hh = h / 2;
  std::vector<float> out(size_t(hw) * hh);
  for (int y = 0; y < hh; y++) {
    const float* a = x + size_t(2 * y) * w;
    const float* b = a + w;
    float* o = out.data() + size_t(y) * hw;
    for (int i = 0; i < hw; i++) o[i] = 0.25f * ((a[2 * i] + a[2 * i + 1]) + (b[2 * i] + b[2 * i + 1]));
  }
  return out;
}

// The sync correlators of one key (full and half resolution), kept per thread for the last key seen:
// the workers verify with one secret, so the two spectra are built once.
struct SyncPair {
  std::vector<float> key;
  Sync<kTile> full;
  Sync<kTile / 2> half;
  explicit SyncPair(const float* sync) : key(sync, sync + kTile2), full(key), half(HalfKey(key)) {}
  static std::vector<float> HalfKey(const std::vector<float>& k) {
    int hw = 0, hh = 0;
    return HalfOf(k.data(), kTile, kTile, hw, hh);
  }
};

SyncPair& SyncFor(const float* sync) {
  thread_local std::vector<unsigned char> kept;
  thread_local std::unique_ptr<SyncPair> last;
  if (!SameKey(kept, {{sync, sizeof(float) * kTile2}}) || !last) last = std::make_unique<SyncPair>(sync);
  return *last;
}

}  // namespace

void DetectCore(const CoreIn& in, const CoreParams& params, CoreOut& out) {
  const int w = in.width, h = in.height;
  const size_t n = size_t(w) * h;
  // Per-thread planes (their pages are kept from call to call).
  thread_local std::vector<float> own, line, xh;
  thread_local std::vector<double> fa, fb, ha, hb;
  line.resize(size_t(std::ceil(w * 1.05)) + 8);
  const float* x = in.prefiltered;
  if (!x) {
    std::vector<float> y(n);
    own.resize(n);
    LumaOf(in.pixels, w, h, in.channels, y.data());
    PrefilterOf(y.data(), w, h, params.sigmaHighpass, params.sigmaLocal, params.localFloor, own.data(), nullptr, 0);
    x = own.data();
  }

  SyncPair& sync = SyncFor(in.sync);
  fa.resize(kTile2);
  fb.resize(kTile2);
  double bestS = 1;
  Peak best;
  // Scales are evaluated in pairs; candidates are compared in list order so ties resolve as in reference.ts.
  auto consider = [&](const std::vector<double>& scales) {
    for (size_t i = 0; i < scales.size(); i += 2) {
      Fold<kTile>(x, w, h, scales[i], 0, 0, fa.data(), line.data());
      const bool two = i + 1 < scales.size();
      if (two) Fold<kTile>(x, w, h, scales[i + 1], 0, 0, fb.data(), line.data());
      Peak pa, pb;
      sync.full.Correlate(fa.data(), two ? fb.data() : nullptr, pa, pb);
      if (pa.z > best.z) {
        best = pa;
        bestS = scales[i];
      }
      if (two && pb.z > best.z) {
        best = pb;
        bestS = scales[i + 1];
      }
    }
  };
  best.z = -1e300;
  consider({1.0});
  double coarseZ = best.z;
  int tier = 1;
  if (best.z < params.tier1Z) {
    tier = 2;
    const int steps = int(std::lround((1 - params.scaleMin) / params.scaleStep));
    std::vector<double> coarse;
    for (int i = 1; i <= steps; i++) coarse.push_back(1 - i * params.scaleStep);
    // The coarse scales are ranked at half resolution (a quarter of the work per scale; the key's band
    // lies mostly below the half-resolution Nyquist), and only the best kFullScales are folded at full
    // resolution, then refined there as before.
    int hw = 0, hh = 0;
    xh = HalfOf(x, w, h, hw, hh);
    constexpr int H2 = (kTile / 2) * (kTile / 2);
    ha.resize(H2);
    hb.resize(H2);
    std::vector<std::pair<double, int>> ranked;
    for (size_t i = 0; i < coarse.size(); i += 2) {
      Fold<kTile / 2>(xh.data(), hw, hh, coarse[i], 0, 0, ha.data(), line.data());
      const bool two = i + 1 < coarse.size();
      if (two) Fold<kTile / 2>(xh.data(), hw, hh, coarse[i + 1], 0, 0, hb.data(), line.data());
      Peak pa, pb;
      sync.half.Correlate(ha.data(), two ? hb.data() : nullptr, pa, pb);
      ranked.push_back({pa.z, int(i)});
      if (two) ranked.push_back({pb.z, int(i + 1)});
    }
    // Best first; equal z keeps list order.
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<double> chosen;
    for (size_t k = 0; k < ranked.size() && int(k) < params.fullScales; k++) chosen.push_back(coarse[ranked[k].second]);
    consider(chosen);
    coarseZ = best.z;
    // The refinement sharpens an alignment that is there: below refineZ (unmarked pictures) it is skipped.
    if (best.z >= params.refineZ) {
      for (const double step : {params.scaleStep / 2, params.scaleStep / 4}) {
        const double centre = bestS;
        consider({centre - step, centre + step});
      }
    }
  }
  std::vector<double>& f = fa;

  Fold<kTile>(x, w, h, bestS, best.fx, best.fy, f.data(), line.data());
  const int cell = params.cell;
  const int per = kTile / cell;
  std::fill(out.cells, out.cells + per * per, 0.0);
  for (int ky = 0; ky < kTile; ky++) {
    const double* fr = f.data() + size_t((ky - best.dy) & kMask) * kTile;
    const float* crow = in.count + size_t(ky) * kTile;
    double* cells = out.cells + (ky / cell) * per;
    for (int kx = 0; kx < kTile; kx++) cells[kx / cell] += fr[(kx - best.dx) & kMask] * crow[kx];
  }
  out.scale = bestS;
  out.dx = best.dx + best.fx;
  out.dy = best.dy + best.fy;
  out.syncZ = best.z;
  out.coarseZ = coarseZ;
  out.tier = tier;
}

}  // namespace optmark
