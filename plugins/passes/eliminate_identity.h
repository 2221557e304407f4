// EliminateIdentity: removes nodes that pass their input through unchanged.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Removes Identity; Dropout in inference (no training_mode input, or a constant false one)
// whose mask output nothing reads; Reshape whose constant target resolves to the static
// input shape; Transpose with the identity permutation; Cast to the input's declared
// dtype; and Transpose pairs whose permutations cancel when the first has no other user.
// Readers of the removed output read the input instead. When the removed output is a graph
// output, the input's producer is rebuilt to write that output directly, which keeps the
// model's interface names; when the input is itself a graph input, output or initializer
// the node stays. Values read by name from a subgraph are never renamed.
// Counters: identity-removed, dropout-removed, reshape-removed, transpose-removed,
// cast-removed, transpose-pairs-removed.
class EliminateIdentity final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow
