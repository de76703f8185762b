// What both versions' native detection cores share: the tile, the picture-side filters (prefilter.cc,
// a port of src/fingerprint/common/filters.ts), the sub-pixel peak and the per-thread key cache.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

namespace optmark {

constexpr int kTile = 128;
constexpr int kTile2 = kTile * kTile;
constexpr int kMask = kTile - 1;

// BT.601 luma of 8-bit interleaved pixels (the first channel alone for grey).
void LumaOf(const uint8_t* px, int w, int h, int ch, float* y);

// `x` receives version 1's prefilter (the high-pass over the local RMS); `energy`, when not null, the same
// high-pass over the local energy (the RMS squared) plus `energyFloor`: version 2's plane.
void PrefilterOf(const float* y, int w, int h, double sigmaHighpass, double sigmaLocal, double localFloor, float* x, float* energy, double energyFloor);

// Offset in [-0.5, 0.5] of the top of the parabola through (-1, m), (0, c), (1, p); 0 unless c is a strict
// maximum of its curvature (parabolaPeak in filters.ts).
inline double SubPixel(double m, double c, double p) {
  const double den = m - 2 * c + p;
  if (!(den < 0)) return 0;
  const double v = 0.5 * (m - p) / den;
  return v > 0.5 ? 0.5 : v < -0.5 ? -0.5 : v;
}

// The cores build their key's spectra once per thread for the last key seen (the workers verify with one
// secret): true when `parts` are bitwise the bytes in `kept`; else `kept` takes them and the answer is false.
inline bool SameKey(std::vector<unsigned char>& kept, std::initializer_list<std::pair<const void*, size_t>> parts) {
  size_t n = 0;
  for (const auto& p : parts) n += p.second;
  bool same = kept.size() == n;
  size_t at = 0;
  for (const auto& p : parts) {
    same = same && std::memcmp(kept.data() + at, p.first, p.second) == 0;
    at += p.second;
  }
  if (same) return true;
  kept.resize(n);
  at = 0;
  for (const auto& p : parts) {
    std::memcpy(kept.data() + at, p.first, p.second);
    at += p.second;
  }
  return false;
}

// Which code path the hot loops use on this CPU ("avx512f", "avx2" or "portable").
const char* SimdPath();

}  // namespace optmark
