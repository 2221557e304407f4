// AdaRound: learned rounding of weights (Nagel et al. 2020, "Up or Down? Adaptive Rounding for
// Post-Training Quantization"), a pass that rewrites float weights onto the quantization grid.
#pragma once

#include <cstdint>
#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"
#include "soft_rounding.h"

namespace qflow {

// For every Conv (2-D), Gemm and MatMul with a private float32 weight, in topological order:
// the grams of its inputs on the first `samples` calibration samples (`inputs = "rounded"`:
// the inputs it reads once the layers before it are rounded, fitted to the float model's
// output; "float": the float model's inputs, one run), then the rounding of each weight
// learned (soft_rounding.h), then the weight
// replaced by w' = s * clamp(floor(w / s) + [h >= 0.5], -qmax, qmax), s the per-channel
// max-abs scale the QDQ builder computes from the node's QuantSpec (weight-bits, weight-dtype,
// reduce-range, per-channel). Each channel's largest |w| lies on the grid, so max|w'| = max|w|
// and the builder's round-to-nearest of w' gives back exactly the learned integers.
// A layer with fewer than min-vectors input vectors per weight of a row keeps round-to-nearest.
// Counters: layers-rounded, layers-underdetermined, weights-rounded-away (weights not on
// round-to-nearest's choice).
class AdaRound final : public Pass {
 public:
  AdaRound(adaround::SoftRoundingOptions options, int64_t samples, int64_t weight_bits, bool rounded_inputs,
           double min_vectors)
      : options_(options),
        samples_(samples),
        weight_bits_(weight_bits),
        rounded_inputs_(rounded_inputs),
        min_vectors_(min_vectors) {}

  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  Expected<PassResult> run_impl(Model& model) override;
  Expected<PassResult> run_with_context(Model& model, const PassContext& context) override;

  adaround::SoftRoundingOptions options_;
  int64_t samples_;
  int64_t weight_bits_;  // 0: each node's QuantSpec decides
  bool rounded_inputs_;  // asymmetric reconstruction (inputs = "rounded")
  double min_vectors_;   // input vectors per weight of a row below which a layer is not rounded
};

}  // namespace qflow
