// Subgraph captures: names read inside and defined nowhere inside.
#include "qflow/ir/captured_values.h"

#include <algorithm>
#include <set>

namespace qflow {

namespace {

void add_captured(const Graph& graph, std::set<std::string>& names);

void add_captured_of_node(const Node& node, std::set<std::string>& names) {
  for (const Attribute& a : node.attributes()) {
    if (a.g) add_captured(*a.g, names);
    for (const auto& g : a.graphs)
      if (g) add_captured(*g, names);
  }
}

void add_captured(const Graph& graph, std::set<std::string>& names) {
  auto defined = [&graph](const Value* v) { return defined_in(graph, *v); };
  for (const auto& node : graph.nodes()) {
    for (const Value* in : node->inputs())
      if (in && !defined(in)) names.insert(in->name());
    std::set<std::string> nested;
    add_captured_of_node(*node, nested);
    for (const std::string& name : nested) {
      const Value* v = graph.find_value(name);
      if (!v || !defined(v)) names.insert(name);
    }
  }
  for (const Value* out : graph.outputs)
    if (!defined(out)) names.insert(out->name());
}

}  // namespace

bool defined_in(const Graph& graph, const Value& value) {
  return value.producer() || graph.is_initializer(&value) ||
         std::find(graph.inputs.begin(), graph.inputs.end(), &value) != graph.inputs.end();
}

std::vector<std::string> captured_value_names(const Graph& subgraph) {
  std::set<std::string> names;
  add_captured(subgraph, names);
  return {names.begin(), names.end()};
}

std::vector<std::string> captured_value_names(const Node& node) {
  std::set<std::string> names;
  add_captured_of_node(node, names);
  return {names.begin(), names.end()};
}

}  // namespace qflow
