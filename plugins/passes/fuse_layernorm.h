// FuseLayerNorm: rewrites the decomposed mean/variance spelling of layer normalization into LayerNormalization.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Matches ReduceMean(x) -> Sub -> Pow(2) | Mul(d, d) -> ReduceMean -> Add(eps) -> Sqrt -> Div,
// then optional Mul(gamma) and Add(beta), both ReduceMeans over the same last k axes with
// keepdims. LayerNormalization exists from opset 17: below it the model is left alone and
// the matches are counted, since changing the opset is not this pass's decision.
// Counters: fused, skipped-opset-below-17.
class FuseLayerNorm final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
