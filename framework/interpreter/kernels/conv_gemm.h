// Conv's GEMM on the packed sgemm: a constant float32 weight packed once per group, and the
// image's columns written by im2col straight into sgemm's packed-B layout.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/interpreter/kernels/conv_geometry.h"
#include "framework/interpreter/kernels/sgemm.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// A Conv weight [M, C/group, k1..kn] packed as one sgemm A operand [M/group x C/group*k] per
// group. It keeps a handle on the tensor it packed, so `packs` can tell that tensor from one
// fed at run time in its place (a weight that is also a graph input).
class PackedConvWeights {
 public:
  // Null when packing does not apply: not float32, rank below 3, M not divisible by group, or
  // a depthwise weight (one input channel per group), which Conv runs without a GEMM.
  static std::unique_ptr<PackedConvWeights> make(const Tensor& weight, int64_t group);
  bool packs(const Tensor& weight) const;
  const SgemmPackedA& group(int64_t g) const { return groups_[static_cast<std::size_t>(g)]; }

 private:
  Tensor source_;
  std::vector<SgemmPackedA> groups_;
};

// Output positions [col_begin, col_begin + count) of one group: out [M/group x count] (row
// pitch ldc) = the group's weights times its column matrix. `image` is the group's first
// input plane ([C/group, in_spatial...]).
void conv_gemm_tile(const SgemmPackedA& weights, const float* image, const ConvGeometry& g, int64_t col_begin,
                    int64_t count, float* out, int64_t ldc);

}  // namespace qflow
