// Version 2's sync (src/fingerprint/v2/sync.ts): a period fold correlated with part A under the 8
// symmetries of the square, and the peaks of its surfaces.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "v2-internal.h"

namespace optmark {
namespace v2 {
namespace {

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

// The hit at surface index i (value z after normalising) with its sub-pixel offset from the parabola
// through its neighbours.
SyncHit PeakAt(const double* pr, int n, size_t i, double z, int d) {
  const int m = n - 1;
  const int ty = int(i / n), tx = int(i % n);
  const double v = pr[i];
  auto sub = [v](double a, double b) { return SubPixel(a, v, b); };
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

}  // namespace

SyncA::SyncA(const float* a, int period, const double* harm, int nh, double pw) : n(period), power(pw) {
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
SyncHit SyncA::Best(const double* f, int only, std::vector<SyncHit>* peaks, double floor) const {
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

// The sync correlator of the last key part A seen on this thread (workers verify with one secret).
const SyncA& SyncAFor(const float* a, int period, const double* harm, int nh, double power) {
  thread_local std::vector<unsigned char> kept;
  thread_local std::unique_ptr<SyncA> last;
  const size_t n2 = size_t(period) * period;
  if (!SameKey(kept, {{a, sizeof(float) * n2}, {harm, sizeof(double) * 2 * nh}, {&period, sizeof period}, {&power, sizeof power}}) || !last) {
    last = std::make_unique<SyncA>(a, period, harm, nh, power);
  }
  return *last;
}

}  // namespace v2
}  // namespace optmark
