// Graph queries and node-order bookkeeping shared by the rewriting passes.
#pragma once

#include <list>
#include <unordered_map>
#include <vector>

#include "qflow/ir/graph.h"

namespace qflow::pass_helpers {

bool is_default_domain(const Node& node);
bool contains(const std::vector<Value*>& values, const Value* v);

// A float32 constant: an initializer a caller cannot override (not also a graph input),
// or the output of a Constant node (exporters such as paddle2onnx emit weights that way).
const Tensor* constant_float(const Graph& graph, const Value* v);

// Keeps the graph's insertion order a valid execution order while nodes are replaced, so
// exported files stay topologically sorted: a replacement takes the place of the node it
// replaces. apply() writes the order back into the graph.
class NodeOrder {
 public:
  explicit NodeOrder(const Graph& graph);
  void replace(Node* old, const std::vector<Node*>& replacements);
  void erase(Node* node);
  void apply(Graph& graph) const;

 private:
  std::list<Node*> order_;
  std::unordered_map<Node*, std::list<Node*>::iterator> where_;
};

}  // namespace qflow::pass_helpers
