// ShapeFolding: replaces Shape/Size of statically shaped values by constants and folds the shape arithmetic on them.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// A Shape (or Size) node whose input has a fully static shape, as declared by the graph's
// inputs, initializers or value_info, becomes an int64 initializer (Shape's start/end
// honoured). The shape computations fed by those constants (Gather, Slice, Concat, Cast,
// Unsqueeze, Squeeze, Reshape, Identity, Constant, integer Add/Sub/Mul/Div and the tests
// Equal/Less/Greater/LessOrEqual/GreaterOrEqual/Not on integers) are then evaluated with the
// same rules as constant-folding, bounded to small results so the pass stays about shapes,
// and an If whose test folds is inlined (asking the host to infer types again, so the
// branch's own shape tests fold on the next run). The pass works only with what is declared:
// values produced inside a graph usually carry no type until shape inference fills
// value_info (`qflow convert --infer-shapes`). Shape nodes whose output is a graph output
// stay. Counters: shapes-folded, nodes-folded, initializers-removed, if-inlined.
class ShapeFolding final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

  // Results of the follow-up folding above this size are not shape computations.
  static constexpr int64_t kMaxFoldedBytes = int64_t{64} << 10;

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
