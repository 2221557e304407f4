// ConstantFolding: evaluates nodes whose inputs are all constant and stores their results as initializers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// A node is folded when every input it has is an initializer that is not also a graph
// input (those can be overridden by a caller), it has a built-in kernel, it is
// deterministic (no Random*, Multinomial, Bernoulli, training-mode Dropout), it carries no
// subgraph, and none of its outputs is a graph output (not every runtime accepts an
// initializer as a graph output, so those nodes stay). Each used output becomes an
// initializer under the same value name, so by-name references from subgraphs still
// resolve. Constant nodes have no inputs and so become initializers too. Results above
// `max-bytes` (default 64 MiB) are skipped; ConstantOfShape and nodes with a declared
// static output type are checked before they run. Initializers left unused by folding are
// removed. An If whose condition is constant is replaced by the branch it takes
// (inline_constant_if), whose nodes then fold like any other. Counters: nodes-folded,
// initializers-removed (of those the model had before), if-inlined.
class ConstantFolding final : public Pass {
 public:
  explicit ConstantFolding(int64_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}

  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

  static constexpr int64_t kDefaultMaxBytes = int64_t{64} << 20;

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;

  int64_t max_bytes_;
};

// Shared with shape-folding: the evaluation loop behind ConstantFolding.
namespace folding {

struct FoldStats {
  int64_t nodes_folded = 0;
  int64_t initializers_removed = 0;
  int64_t ifs_inlined = 0;
};

// Folds, in topological order and until nothing more folds, every node that passes the
// rules above and `eligible`. Results larger than `max_bytes` are skipped.
Expected<FoldStats> fold_constants(Model& model, int64_t max_bytes,
                                   const std::function<bool(const Node&)>& eligible);

// Names read from inside any subgraph of the graph (at any depth): values that must keep
// their names because a body refers to them without listing them as node inputs.
std::set<std::string> subgraph_referenced_names(const Graph& graph);

// Removes those of `candidates` that are initializers nothing uses any more and that are
// neither graph inputs, graph outputs nor read by name from a subgraph. Returns the count.
int64_t remove_orphaned_initializers(Graph& graph, const std::vector<Value*>& candidates);

}  // namespace folding

}  // namespace qflow
