// Example out-of-tree pass "name-nodes": gives every unnamed node of the main graph a stable name.
//
// ONNX allows nodes without names, but reports, `run-on-cpu` lists and per-layer comparisons
// name nodes. The names depend only on the graph: "<prefix><op type>_<n>", n counting that op
// type in graph order and skipping names already taken, so the same model always gets the
// same names. It shows the pass interface end to end (a cheap `matches`, `run_impl` reporting
// what it changed through a counter, an option) and runs inside a `passes` stage's list.
#include <map>
#include <memory>
#include <set>
#include <string>

#include "qflow/plugin/entry.h"

namespace {

class NameNodesPass final : public qflow::Pass {
 public:
  explicit NameNodesPass(std::string prefix) : prefix_(std::move(prefix)) {}

 private:
  bool matches(const qflow::Model& model) const override {
    for (const auto& node : model.graph->nodes())
      if (node->name().empty()) return true;
    return false;
  }

  qflow::Expected<qflow::PassResult> run_impl(qflow::Model& model) override {
    std::set<std::string> taken;
    for (const auto& node : model.graph->nodes())
      if (!node->name().empty()) taken.insert(node->name());
    std::map<std::string, int64_t> next_index;  // per op type
    qflow::PassResult result;
    int64_t named = 0;
    for (const auto& node : model.graph->nodes()) {
      if (!node->name().empty()) continue;
      std::string name;
      do {
        name = prefix_ + node->op_type() + "_" + std::to_string(next_index[node->op_type()]++);
      } while (taken.count(name));
      taken.insert(name);
      node->set_name(std::move(name));
      ++named;
    }
    result.changed = named > 0;
    result.counters["nodes-named"] = named;
    return result;
  }

  std::string prefix_;
};

qflow::Status register_components(qflow::ComponentRegistrar& registrar) {
  qflow::ComponentInfo info;
  info.kind = qflow::ComponentKind::Pass;
  info.name = "name-nodes";
  info.summary = "example: name every unnamed node <prefix><op type>_<n>, stable for a given graph";
  info.options.push_back({"prefix", qflow::OptionType::String, std::string(), "text put before every new name"});
  return registrar.add_pass(std::move(info), [](const qflow::Options& options) -> qflow::Expected<std::unique_ptr<qflow::Pass>> {
    return std::unique_ptr<qflow::Pass>(std::make_unique<NameNodesPass>(options.get_string("prefix")));
  });
}

}  // namespace

QFLOW_PLUGIN("qflow-example-pass", "1.0.0", register_components)
