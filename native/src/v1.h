// Version 1's detection core of the fingerprint (frozen, detect-only): one call per image, plain inputs,
// plain outputs. A line-by-line port of src/fingerprint/v1/core.ts; keep the two in step.
#pragma once
#include <cstdint>

#include "common.h"

namespace optmark {

struct CoreParams {
  int cell;              // count cell side (divides kTile)
  double scaleMin;       // smallest scale searched
  double scaleStep;      // coarse scale step
  double tier1Z;         // sync z at scale 1 that skips the search
  int fullScales;        // coarse scales (ranked at half resolution) folded at full resolution
  double refineZ;        // sync z from which the scale is refined around the best coarse one
  double sigmaHighpass;  // prefilter: subtract a Gaussian of this sigma
  double sigmaLocal;     // prefilter: divide by the local RMS over this sigma
  double localFloor;     // added to the local energy so flat areas stay quiet
};

struct CoreIn {
  const uint8_t* pixels;  // interleaved 8-bit, width*height*channels
  int width;
  int height;
  int channels;
  const float* sync;         // kTile2
  const float* count;        // kTile2
  const float* prefiltered;  // optional: the prefiltered luma (width*height), as version 2 computes it
};

struct CoreOut {
  double scale;
  double dx;
  double dy;
  double syncZ;
  double coarseZ;  // sync z of the best scale before the refinement
  int tier;
  double* cells;  // (kTile/cell)^2, filled by the core
};

void DetectCore(const CoreIn& in, const CoreParams& params, CoreOut& out);

}  // namespace optmark
