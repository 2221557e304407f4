// DeadCodeElimination: liveness from the graph outputs backwards, then removal.
#include "dead_code_elimination.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "qflow/ir/captured_values.h"

namespace qflow {

namespace {

struct Liveness {
  std::unordered_set<const Node*> live_nodes;
  std::set<std::string> subgraph_references;  // outer names read by live nodes' subgraphs
};

Liveness compute_liveness(const Graph& graph) {
  Liveness result;
  std::vector<const Value*> work(graph.outputs.begin(), graph.outputs.end());
  while (!work.empty()) {
    const Value* value = work.back();
    work.pop_back();
    const Node* producer = value ? value->producer() : nullptr;
    if (!producer || !result.live_nodes.insert(producer).second) continue;
    for (const Value* in : producer->inputs())
      if (in) work.push_back(in);
    for (const std::string& name : captured_value_names(*producer)) {
      result.subgraph_references.insert(name);
      if (const Value* v = graph.find_value(name)) work.push_back(v);
    }
  }
  return result;
}

}  // namespace

ComponentInfo DeadCodeElimination::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "dead-code-elimination";
  info.summary = "Remove nodes that do not contribute to a graph output, then initializers and values left unused";
  return info;
}

Expected<std::unique_ptr<Pass>> DeadCodeElimination::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<DeadCodeElimination>());
}

bool DeadCodeElimination::matches(const Model& model) const {
  return model.graph && (model.graph->node_count() > 0 || !model.graph->initializer_order().empty());
}

Expected<PassResult> DeadCodeElimination::run_impl(Model& model) {
  Graph& graph = *model.graph;
  const Liveness liveness = compute_liveness(graph);

  std::vector<Node*> dead;
  for (const auto& node : graph.nodes())
    if (!liveness.live_nodes.count(node.get())) dead.push_back(node.get());
  for (Node* node : dead) graph.remove_node(node);

  std::vector<Value*> unused_initializers;
  for (Value* v : graph.initializer_order()) {
    const bool interface = std::find(graph.inputs.begin(), graph.inputs.end(), v) != graph.inputs.end() ||
                           std::find(graph.outputs.begin(), graph.outputs.end(), v) != graph.outputs.end();
    if (v->uses().empty() && !interface && !liveness.subgraph_references.count(v->name()))
      unused_initializers.push_back(v);
  }
  for (Value* v : unused_initializers) graph.remove_initializer(v);

  const std::size_t values_before = graph.values().size();
  // Also drops value_info entries of the values it removes.
  graph.prune_unused_values();
  const std::size_t values_after = graph.values().size();

  PassResult result;
  result.counters["nodes-removed"] = static_cast<int64_t>(dead.size());
  result.counters["initializers-removed"] = static_cast<int64_t>(unused_initializers.size());
  result.counters["values-removed"] = static_cast<int64_t>(values_before - values_after);
  result.changed = !dead.empty() || !unused_initializers.empty() || values_before != values_after;
  return result;
}

}  // namespace qflow
