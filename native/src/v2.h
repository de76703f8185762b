// Version-2 detection core of the fingerprint (geometry of its own): one call per image, plain inputs,
// plain outputs. A port of src/fingerprint/v2/ (one .cc per step, as there: v2-spectrum, v2-lattice,
// v2-fold, v2-sync, v2-core); keep the two in step.
#pragma once
#include <cstdint>
#include <vector>

#include "common.h"

namespace optmark {

struct Core2Params {
  int period;                                    // lattice period of the sync part, work pixels (divides kTile, power of two)
  int cell;                                      // count cell side
  double fastZ;                                  // sync z of the no-geometry hypothesis that skips the lattice search
  double pMin, pMax;                             // period range searched, base pixels
  double angle;                                  // rotation window, degrees
  int candidates;                                // lattice candidates kept
  double gate;                                   // comb score below which only the crop line is tried
  double refineZ;                                // sync z below which the coherent refinement is skipped
  double phasesZ;                                // sync z from which the other tile phases' cells are reported
  int phaseLooks;                                // part B's next choices of tile phase counted from phasesZ
  double secondT;                                // count T from which an unrefined spectrum lattice is refined anyway
  double aspectGate;                             // fine comb score from which the best aspect-line hypothesis is folded
  double rotationGate;                           // fine comb score from which the rotation plane's best hypothesis is folded
  double syncPower;                              // power of part A's amplitude in the sync correlation (phase kept)
  double sameAsIdentity;                         // spectrum lattices within this fraction of the no-geometry one are not folded
  int runners;                                   // runner-up alignments counted when the search's best sync z is under refineZ
  double runnerZ;                                // sync z from which a runner-up alignment is counted
  int identityLooks;                             // identity looks counted with the runner-ups (bench/RESULTS.md, "Fingerprint", step 10)
  int latticeLooks;                              // lattice looks counted when the lattice search ran (step 11)
  double latticeLookZ;                           // sync z from which a lattice's best peak is a lattice look
  double sigmaHighpass, sigmaLocal, localFloor;  // prefilter
  double energyFloor;                            // version 2 divides the high-pass by the local energy plus this
};

struct Core2In {
  const uint8_t* pixels;
  int width, height, channels;
  int workShort;
  int native;
  const float* a;           // period^2
  const double* harmonics;  // nHarmonics pairs (m1, m2)
  int nHarmonics;
  const float* b;         // kTile^2
  const float* c;         // kTile^2
  float* prefilteredOut;  // optional (width*height): receives the prefiltered luma, for version 1 to reuse
};

struct Core2Out {
  double lattice[4];
  int dihedral;
  double dx, dy, syncZ, phaseZ;
  int tier, candidates;
  double combScore;                  // best comb score of the lattice grid (-inf when the search did not run)
  double aspectScore;                // best fine comb score of the aspect lines (-inf when the search did not run)
  double rotationScore;              // fine comb score of the rotation plane's best hypothesis, refined (-inf: no search)
  double* cells;                     // (kTile/cell)^2, filled by the core
  std::vector<double> phaseCells;    // the other tile phases' cells, one block after another (empty under phasesZ)
  std::vector<double> refinedCells;  // the second look's cells (empty when it did not run)
  double refinedSyncZ;
  std::vector<double> runnerCells;    // runners blocks of cells, zeros where not counted (empty when none was)
  std::vector<double> runnerZ;        // the runner-ups' sync z (runners entries, 0 where not counted)
  std::vector<double> identityCells;  // identityLooks blocks of cells, zeros where not counted (empty when none was)
  std::vector<double> identityZ;      // the identity looks' sync z (identityLooks entries, 0 where not counted)
  std::vector<double> latticeCells;   // latticeLooks blocks of cells, zeros where not counted (empty when none was)
  std::vector<double> latticeZ;       // the lattice looks' sync z (latticeLooks entries, 0 where not counted)
};

void DetectCore2(const Core2In& in, const Core2Params& p, Core2Out& out);

}  // namespace optmark
