// A test plugin whose pass corrupts the graph (a node input no one produces), so that
// `qflow run --verify-each` has something to catch.
#include <memory>

#include "qflow/plugin/entry.h"

namespace {

using namespace qflow;

class DanglingInputPass final : public Pass {
 public:
  static ComponentInfo info() {
    return {ComponentKind::Pass, "dangle-first-input", "Rewire the first node's first input to a value no one produces", {}};
  }

 private:
  Expected<PassResult> run_impl(Model& model) override {
    Graph& graph = *model.graph;
    if (graph.nodes().empty()) return PassResult{};
    Node* first = graph.nodes().front().get();
    first->set_input(0, graph.create_unique_value("dangling"));
    PassResult result;
    result.changed = true;
    result.counters["inputs-dangled"] = 1;
    return result;
  }
};

Status register_breaking_pass(ComponentRegistrar& registrar) {
  return registrar.add_pass(DanglingInputPass::info(), [](const Options&) -> Expected<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(std::make_unique<DanglingInputPass>());
  });
}

}  // namespace

QFLOW_PLUGIN("test-breaking-pass", "1.0.0", register_breaking_pass)
