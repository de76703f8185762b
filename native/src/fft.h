// The radix-2 FFT both versions' native cores run: the column transform of a row-major array, all columns
// at once (rows of butterflies, so the inner loop runs along contiguous memory and vectorises); per element
// the same operations in the same order as fft1d in src/fingerprint/common/fft.ts, so that every engine
// rounds the same way. The twiddles use the same expression as fft.ts (cos/sin of sign*2*pi/len*k).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <vector>

namespace optmark {

struct Twiddles {
  std::vector<double> wr, wi;  // stages concatenated: len = 2, 4, ..., n; len/2 entries each
};

inline Twiddles MakeTwiddles(int n, int sign) {
  Twiddles t;
  for (int len = 2; len <= n; len <<= 1) {
    const double ang = sign * 2 * M_PI / len;
    for (int k = 0; k < len / 2; k++) {
      t.wr.push_back(std::cos(ang * k));
      t.wi.push_back(std::sin(ang * k));
    }
  }
  return t;
}

// The twiddles of length n and sign, cached per thread.
inline const Twiddles& TwiddlesFor(int n, int sign) {
  thread_local std::map<int, Twiddles> cache;
  const int key = sign < 0 ? -n : n;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  return cache.emplace(key, MakeTwiddles(n, sign)).first->second;
}

// Column transforms of an nx x ny row-major array (ny a power of two) with the twiddles of ny and the
// sign. NX > 0 fixes the width at compile time (the inner loop is then unrolled); inlined into each
// caller, so that it is compiled for the caller's target clones.
template <int NX>
inline __attribute__((always_inline)) void FftColumnsOf(double* __restrict re, double* __restrict im, int width, int ny, const Twiddles& tw) {
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

}  // namespace optmark
