// DeadCodeElimination: liveness from the graph outputs backwards, then removal.
#include "dead_code_elimination.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace qflow {

namespace {

// Names a subgraph reads from enclosing scopes: used values it neither produces, takes as
// an input nor holds as an initializer, including those its own nested subgraphs read.
void collect_outer_references(const Graph& graph, std::set<std::string>& names);

void collect_node_outer_references(const Node& node, std::set<std::string>& names) {
  for (const Attribute& attr : node.attributes()) {
    if (attr.g) collect_outer_references(*attr.g, names);
    for (const auto& g : attr.graphs)
      if (g) collect_outer_references(*g, names);
  }
}

void collect_outer_references(const Graph& graph, std::set<std::string>& names) {
  std::set<std::string> inner;
  for (const auto& node : graph.nodes()) {
    for (const Value* v : node->inputs())
      if (v && !v->producer() && !graph.is_initializer(v) &&
          std::find(graph.inputs.begin(), graph.inputs.end(), v) == graph.inputs.end())
        names.insert(v->name());
    collect_node_outer_references(*node, inner);
  }
  for (const Value* v : graph.outputs)
    if (v && !v->producer() && !graph.is_initializer(v) &&
        std::find(graph.inputs.begin(), graph.inputs.end(), v) == graph.inputs.end())
      names.insert(v->name());
  // A nested body's outer reference may be satisfied here; only the rest escapes further.
  for (const std::string& name : inner) {
    const Value* v = graph.find_value(name);
    const bool defined_here = v && (v->producer() || graph.is_initializer(v) ||
                                    std::find(graph.inputs.begin(), graph.inputs.end(), v) != graph.inputs.end());
    if (!defined_here) names.insert(name);
  }
}

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
    std::set<std::string> refs;
    collect_node_outer_references(*producer, refs);
    for (const std::string& name : refs) {
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
