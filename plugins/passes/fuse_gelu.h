// FuseGelu: rewrites x * 0.5 * (1 + Erf(x / sqrt(2))) into com.microsoft Gelu.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// ONNX has no Gelu before opset 20, so the fused op is ONNX Runtime's contrib Gelu (domain
// com.microsoft, imported at version 1 when absent), which qflow's interpreter also runs.
// Matches the product of x, 0.5 (or a final Div by 2) and 1 + Erf(x / sqrt(2)) (or
// Erf(x * 0.70710678)) in any grouping and operand order. Counters: fused.
class FuseGelu final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
