// FoldBatchNorm: folds inference-form BatchNormalization into the preceding linear node.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// A BatchNormalization whose five inputs are initializers (training_mode off, only its
// first output used) computes y = x * scale + shift per channel, with
// scale = gamma / sqrt(var + eps) and shift = beta - mean * scale. When x is the only use
// of a Conv, ConvTranspose, Gemm or 2-D MatMul output with constant weights, scale goes
// into the weights' output channels and shift into the bias, and the BatchNormalization
// disappears; the linear node takes over the BatchNormalization's output name. Weights
// used elsewhere are copied, never changed in place. A BatchNormalization with nothing
// to fold into becomes Mul + Add by per-channel constants when its input rank is
// declared. Folded parameters are computed in double and rounded to float once.
// Counters: folded-into-conv, folded-into-convtranspose, folded-into-gemm,
// folded-into-matmul, converted-to-mul-add.
class FoldBatchNorm final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
