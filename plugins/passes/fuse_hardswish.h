// FuseHardSwish: rewrites x * hardsigmoid(x) spellings into HardSwish, or HardSigmoid + Mul before opset 14.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Matches x * S * Clip(a * x + b, 0, U) with S * U = 1 (Paddle's x * Clip(x + 3, 0, 6) / 6, the
// scale before or after the outer Mul) and x * HardSigmoid(x). When alpha = 1/6, beta = 0.5
// and the default-domain opset is >= 14 the result is one HardSwish; otherwise, when that
// saves nodes, HardSigmoid(alpha, beta) followed by Mul with x, the same function in the
// ops older opsets have. Counters: fused, fused-hardswish, fused-hardsigmoid-mul.
class FuseHardSwish final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
