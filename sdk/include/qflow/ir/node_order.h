// NodeOrder: keeps the node insertion order an execution order while nodes are replaced.
#pragma once

#include <list>
#include <unordered_map>
#include <vector>

#include "qflow/ir/graph.h"

namespace qflow {

// For passes that replace nodes with new ones (a rewrite rule changes nodes in place and
// needs none of this): exported files stay topologically sorted when a replacement takes
// the place of the node it replaces. apply() writes the order back into the graph.
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

}  // namespace qflow
