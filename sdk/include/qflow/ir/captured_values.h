// Values a subgraph (If/Loop/Scan body) reads from the graphs that enclose it.
#pragma once

#include <string>
#include <vector>

#include "qflow/ir/graph.h"

namespace qflow {

// Whether `graph` itself defines `value`: an input, an initializer or a node's output (a
// value a subgraph merely reads from enclosing graphs is not).
bool defined_in(const Graph& graph, const Value& value);

// The names `subgraph` reads from enclosing scopes, sorted: read by one of its nodes (or by
// a subgraph nested in one) or named as its output, and defined nowhere inside (not an
// input, an initializer or a node's output).
std::vector<std::string> captured_value_names(const Graph& subgraph);
// The union over the graph attributes of `node`, sorted (empty for most nodes).
std::vector<std::string> captured_value_names(const Node& node);

}  // namespace qflow
