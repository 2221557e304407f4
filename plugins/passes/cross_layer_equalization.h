// CrossLayerEqualization: rescales the channels between consecutive convolutions so their per-channel weight ranges match.
#pragma once

#include <cstdint>
#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and Bias
// Correction", section 4.1. For a pair Conv1 -> [act] -> Conv2 and each channel i between
// them, with r1_i = max |W1[i, ...]| and r2_i = max |W2[:, i, ...]| (over the output
// channels of the group that reads channel i), s_i = sqrt(r1_i * r2_i) / r2_i and
//   W1[i] /= s_i, b1[i] /= s_i, W2[:, i] *= s_i,
// after which both ranges equal sqrt(r1_i * r2_i), the optimum of the paper's precision
// objective. The model's function is unchanged when act commutes with positive scaling:
// none, Relu, and Clip with min 0 (or absent) and no max.
//
// Relu6 (Clip with min 0 and a max) does not commute: the equalized model clips channel i
// at max * s_i in the original units. ONNX Clip has a scalar bound, so the bound cannot be
// rescaled per channel; such pairs are skipped unless `through-relu6` accepts the change.
//
// A pair qualifies when Conv1's output (and the activation's) has exactly one user and is
// not a graph output, both weights (and Conv1's bias, if any) are float32 initializers used
// by that conv alone and not graph inputs, and Conv2's input channels match Conv1's output
// channels; any group count works, so Conv(1x1) -> DWConv -> Conv(1x1) forms two pairs and
// the depthwise weights are scaled from both sides. Chains share convs, so scales are
// recomputed over all pairs until the largest |s_i - 1| of a sweep is below `tolerance` or
// `max-iterations` sweeps ran. Rewritten weights get fresh tensors (never written in place,
// since tensor copies share storage) bound to the same values.
//
// High-bias absorption (section 4.2) needs the BatchNorm beta/gamma of Conv1, which are gone
// once BatchNorm is folded into the conv; it is not offered here.
// Counters: pairs-equalized, iterations.
class CrossLayerEqualization final : public Pass {
 public:
  CrossLayerEqualization(double tolerance, int64_t max_iterations, bool through_relu6)
      : tolerance_(tolerance), max_iterations_(max_iterations), through_relu6_(through_relu6) {}

  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;

  double tolerance_;
  int64_t max_iterations_;
  bool through_relu6_;
};

}  // namespace qflow
