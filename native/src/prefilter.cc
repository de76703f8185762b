// The picture-side filters of both versions' detectors (a port of src/fingerprint/common/filters.ts): luma,
// the separable Gaussian blur and the prefilter. Written so that GCC/Clang vectorise the inner loops at
// -O3: contiguous float arrays, no aliasing, branch-free interiors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common.h"
#include "simd.h"

namespace optmark {
namespace {

std::vector<float> GaussianTaps(double sigma) {
  const int r = static_cast<int>(std::ceil(3 * sigma));
  std::vector<float> t(2 * r + 1);
  double s = 0;
  for (int i = -r; i <= r; i++) s += std::exp(-double(i) * i / (2 * sigma * sigma));
  for (int i = -r; i <= r; i++) t[i + r] = float(std::exp(-double(i) * i / (2 * sigma * sigma)) / s);
  return t;
}

void Luma(const uint8_t* px, int w, int h, int ch, float* y) {
  const int n = w * h;
  if (ch >= 3) {
    for (int i = 0; i < n; i++) {
      const uint8_t* p = px + size_t(i) * ch;
      y[i] = float(0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]);
    }
  } else {
    for (int i = 0; i < n; i++) y[i] = px[size_t(i) * ch];
  }
}

#ifdef OPTMARK_X86_SIMD
// d[x] = sum over k of t[k] * rows[k][x], k in order from a sum of 0 (the blur's passes), for the pixels
// from x on in blocks of four vectors V held in registers (the compiled loop loads and stores d once per
// tap): per pixel the same float products and sums in the same order, no FMA. Returns the first pixel
// not done.
template <class V>
__attribute__((always_inline)) inline int TapBlocks(const float* const* rows, const float* t, int taps, int w, float* d, int x) {
  constexpr int L = sizeof(V) / sizeof(float);
  // Unaligned loads (no vector return value: its ABI depends on the target).
  auto load = [](V& v, const float* p) { std::memcpy(&v, p, sizeof v); };
  for (; x + 4 * L <= w; x += 4 * L) {
    V a0 = V{}, a1 = a0, a2 = a0, a3 = a0, s0, s1, s2, s3;
    for (int k = 0; k < taps; k++) {
      const float tk = t[k];
      const float* s = rows[k] + x;
      load(s0, s);
      load(s1, s + L);
      load(s2, s + 2 * L);
      load(s3, s + 3 * L);
      a0 = a0 + tk * s0;
      a1 = a1 + tk * s1;
      a2 = a2 + tk * s2;
      a3 = a3 + tk * s3;
    }
    std::memcpy(d + x, &a0, sizeof a0);
    std::memcpy(d + x + L, &a1, sizeof a1);
    std::memcpy(d + x + 2 * L, &a2, sizeof a2);
    std::memcpy(d + x + 3 * L, &a3, sizeof a3);
  }
  for (; x + L <= w; x += L) {
    V a0 = V{}, s0;
    for (int k = 0; k < taps; k++) {
      load(s0, rows[k] + x);
      a0 = a0 + t[k] * s0;
    }
    std::memcpy(d + x, &a0, sizeof a0);
  }
  return x;
}

typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats16 __attribute__((vector_size(64)));

// TapBlocks 32 pixels at a time (AVX2), then 8, the row's last pixels one by one.
__attribute__((target("avx2"))) void TapSumAvx2(const float* const* rows, const float* t, int taps, int w, float* d) {
  for (int x = TapBlocks<Floats8>(rows, t, taps, w, d, 0); x < w; x++) {
    float a = 0;
    for (int k = 0; k < taps; k++) a += t[k] * rows[k][x];
    d[x] = a;
  }
}

// TapBlocks 64 pixels at a time (AVX-512F), then 16, the row's last pixels under a mask (the lanes past
// it load 0 and are not stored).
__attribute__((target("avx512f"))) void TapSumAvx512(const float* const* rows, const float* t, int taps, int w, float* d) {
  const int x = TapBlocks<Floats16>(rows, t, taps, w, d, 0);
  if (x < w) {
    const __mmask16 m = __mmask16((1u << (w - x)) - 1);
    __m512 a0 = _mm512_setzero_ps();
    for (int k = 0; k < taps; k++) a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_set1_ps(t[k]), _mm512_maskz_loadu_ps(m, rows[k] + x)));
    _mm512_mask_storeu_ps(d + x, m, a0);
  }
}
#endif

// Separable Gaussian blur with replicated borders.
OPTMARK_CLONES
void Blur(const float* __restrict src, int w, int h, const std::vector<float>& taps, float* __restrict tmp, float* __restrict out) {
  const int r = int(taps.size() - 1) / 2;
  const float* t = taps.data();
  // Each row is copied with r replicated pixels on either side, so that the whole row (borders included)
  // runs through the vectorised loop: per pixel the same products summed in the same order as before.
  thread_local std::vector<float> padded;
  padded.resize(size_t(w) + 2 * r);
  float* __restrict pad = padded.data();
#ifdef OPTMARK_X86_SIMD
  static const bool avx2 = __builtin_cpu_supports("avx2");
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  if (avx2) {
    const auto tapSum = avx512 ? TapSumAvx512 : TapSumAvx2;
    thread_local std::vector<const float*> rows;
    rows.resize(size_t(2 * r + 1));
    for (int y = 0; y < h; y++) {
      const float* s = src + size_t(y) * w;
      std::fill(pad, pad + r, s[0]);
      std::copy(s, s + w, pad + r);
      std::fill(pad + r + w, pad + 2 * r + w, s[w - 1]);
      for (int k = 0; k <= 2 * r; k++) rows[k] = pad + k;
      tapSum(rows.data(), t, 2 * r + 1, w, tmp + size_t(y) * w);
    }
    for (int y = 0; y < h; y++) {
      for (int k = -r; k <= r; k++) rows[k + r] = tmp + size_t(std::clamp(y + k, 0, h - 1)) * w;
      tapSum(rows.data(), t, 2 * r + 1, w, out + size_t(y) * w);
    }
    return;
  }
#endif
  for (int y = 0; y < h; y++) {
    const float* s = src + size_t(y) * w;
    float* d = tmp + size_t(y) * w;
    std::fill(pad, pad + r, s[0]);
    std::copy(s, s + w, pad + r);
    std::fill(pad + r + w, pad + 2 * r + w, s[w - 1]);
    for (int x = 0; x < w; x++) d[x] = 0;
    for (int k = 0; k <= 2 * r; k++) {
      const float tk = t[k];
      const float* sk = pad + k;
      for (int x = 0; x < w; x++) d[x] += tk * sk[x];
    }
  }
  for (int y = 0; y < h; y++) {
    float* d = out + size_t(y) * w;
    for (int x = 0; x < w; x++) d[x] = 0;
    for (int k = -r; k <= r; k++) {
      const float tk = t[k + r];
      const float* s = tmp + size_t(std::clamp(y + k, 0, h - 1)) * w;
      for (int x = 0; x < w; x++) d[x] += tk * s[x];
    }
  }
}

OPTMARK_CLONES
void Prefilter(const float* __restrict y, int w, int h, double sigmaHighpass, double sigmaLocal, double localFloor, float* __restrict x,
               float* __restrict energy, float energyFloor) {
  const size_t n = size_t(w) * h;
  // Per-thread scratch planes (reused across calls rather than fresh pages every time).
  thread_local std::vector<float> low, tmp, sq, loc;
  for (std::vector<float>* v : {&low, &tmp, &sq, &loc}) v->resize(n);
  Blur(y, w, h, GaussianTaps(sigmaHighpass), tmp.data(), low.data());
  for (size_t i = 0; i < n; i++) {
    x[i] = y[i] - low[i];
    sq[i] = x[i] * x[i];
  }
  Blur(sq.data(), w, h, GaussianTaps(sigmaLocal), tmp.data(), loc.data());
  const float floor = float(localFloor);
  if (energy) {
    for (size_t i = 0; i < n; i++) energy[i] = x[i] / (loc[i] + energyFloor);
  }
  for (size_t i = 0; i < n; i++) x[i] = x[i] / std::sqrt(loc[i] + floor);
}

}  // namespace

const char* SimdPath() {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
  __builtin_cpu_init();
  // The same test as the hot loops' dispatch: AVX-512F only with AVX2 (the hand-written paths need both).
  if (!__builtin_cpu_supports("avx2")) return "portable";
  return __builtin_cpu_supports("avx512f") ? "avx512f" : "avx2";
#else
  return "portable";
#endif
}

void LumaOf(const uint8_t* px, int w, int h, int ch, float* y) { Luma(px, w, h, ch, y); }

void PrefilterOf(const float* y, int w, int h, double sigmaHighpass, double sigmaLocal, double localFloor, float* x, float* energy, double energyFloor) {
  Prefilter(y, w, h, sigmaHighpass, sigmaLocal, localFloor, x, energy, float(energyFloor));
}

}  // namespace optmark
