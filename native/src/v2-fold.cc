// Version 2's fold (src/fingerprint/v2/fold.ts): the prefiltered picture resampled on a lattice frame
// and summed onto one tile; the same double operations per sample as the reference, in the same order.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "simd.h"
#include "v2-internal.h"

namespace optmark {
namespace v2 {
namespace {

// One run of samples of a lattice row, all inside the picture: bilinear at (baseX + ax i, baseY + ay i),
// added to row[i & kTM] (see foldLattice in src/fingerprint/v2/).
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

#ifdef OPTMARK_X86_SIMD
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

}  // namespace

// Resample on the lattice frame and fold onto one kTile x kTile tile (see foldLattice in src/fingerprint/v2/).
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
#ifdef OPTMARK_X86_SIMD
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
#ifdef OPTMARK_X86_SIMD
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

}  // namespace v2
}  // namespace optmark
