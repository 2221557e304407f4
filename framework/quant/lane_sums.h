// Sums over pairs of float sequences in eight fixed lanes: element i of a sequence goes to
// lane i % 8, each lane adds in index order, and the lanes are combined in one fixed tree.
// Independent chains vectorize (one dependent addition per element was most of the layer
// comparison's and the output cosine's time), and the baseline, AVX2 and AVX-512 copies
// (picked within the cap, QFLOW_ISA) give the same bits: nothing is contracted into FMA.
#pragma once

#include <cstdint>

namespace qflow {

struct LaneSums {
  static constexpr int64_t kLanes = 8;
  double dot[kLanes] = {};       // sum x * q
  double float_sq[kLanes] = {};  // sum x^2
  double quant_sq[kLanes] = {};  // sum q^2
  double error_sq[kLanes] = {};  // sum (x - q)^2 (with_error only)
  double max_abs[kLanes] = {};   // max |x - q| (with_error only; a NaN error leaves it)
};

// Adds x[k], q[k] for k < n as elements first + k of the sequence: a sequence passed in
// pieces gives the sums of one call over all of it.
void add_lane_sums(const float* x, const float* q, int64_t n, int64_t first, bool with_error, LaneSums& sums);

// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
double lane_tree(const double* lanes);

}  // namespace qflow
