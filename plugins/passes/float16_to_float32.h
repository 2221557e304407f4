// Float16ToFloat32: a model stored and computed in float16 (or bfloat16) computes in float32.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Calibration observes float32 activations and the quantizer takes float32 weights, so a
// half-precision model is widened before either sees it: float16 and bfloat16 initializers,
// Constant/ConstantOfShape values and declared value types (graph inputs and outputs too)
// become float32, and a Cast or a random/EyeLike op that produces half precision produces
// float32 instead. The Casts a half-precision export puts around its body then cast float32
// to float32, which eliminate-identity removes. Every value keeps its name; subgraphs are
// widened too. Widening is exact, so the result differs from the original only where the
// original rounded its intermediate results to half precision.
// Counters: initializers-widened, constants-widened, casts-retargeted, values-retyped.
class Float16ToFloat32 final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
