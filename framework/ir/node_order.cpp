// NodeOrder: keeps the node insertion order an execution order while nodes are replaced.
#include "qflow/ir/node_order.h"

namespace qflow {

NodeOrder::NodeOrder(const Graph& graph) {
  for (const auto& n : graph.nodes()) where_[n.get()] = order_.insert(order_.end(), n.get());
}

void NodeOrder::replace(Node* old, const std::vector<Node*>& replacements) {
  // A replacement may live at the address the old node had: unmap the old one first.
  const auto it = where_.at(old);
  where_.erase(old);
  for (Node* n : replacements) where_[n] = order_.insert(it, n);
  order_.erase(it);
}

void NodeOrder::erase(Node* node) {
  order_.erase(where_.at(node));
  where_.erase(node);
}

void NodeOrder::apply(Graph& graph) const {
  graph.move_nodes_to_end(std::vector<Node*>(order_.begin(), order_.end()));
}

}  // namespace qflow
