// DeadCodeElimination: removes nodes whose outputs never reach a graph output, then unused initializers.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// A node is live when one of its outputs is a graph output or feeds a live node, either
// as an input or by name from inside a live node's subgraph (If/Loop/Scan bodies read
// outer values without listing them as inputs). Everything else is removed, then the
// initializers nothing uses any more (those that are also graph inputs stay: they are
// part of the model's interface), then values left without producer or use, together
// with their value_info. Counters: nodes-removed, initializers-removed, values-removed.
class DeadCodeElimination final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
