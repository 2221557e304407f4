// FuseHardSigmoid: rewrites clipped affine spellings of hard-sigmoid into one ONNX HardSigmoid.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Matches S * Clip(a * x + b, 0, U) with S * U = 1 (S from Mul/Div by constants, 1 when the
// Clip is the result): Clip(Add(Mul(x, a), b), 0, 1), Clip(Add(x, 3), 0, 6) / 6 and the
// Relu6-style variants, operands in either order, constants as initializers or Constant
// nodes. Emits HardSigmoid(alpha = a * S, beta = b * S) (opset >= 6). Intermediate values
// must have no other users. Counters: fused.
class FuseHardSigmoid final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
