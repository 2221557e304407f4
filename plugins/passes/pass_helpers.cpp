// Graph queries and node-order bookkeeping shared by the rewriting passes.
#include "pass_helpers.h"

#include <algorithm>

namespace qflow::pass_helpers {

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool contains(const std::vector<Value*>& values, const Value* v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

const Tensor* constant_float(const Graph& graph, const Value* v) {
  if (!v || contains(graph.inputs, v)) return nullptr;
  const Tensor* t = graph.initializer(v);
  const Node* producer = v->producer();
  if (!t && producer && producer->op_type() == "Constant" && is_default_domain(*producer)) {
    const Attribute* value = producer->find_attribute("value");
    if (value && value->type == AttributeType::Tensor) t = &value->t;
  }
  return t && t->dtype() == DType::Float32 ? t : nullptr;
}

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
  for (Node* n : order_) graph.move_node_to_end(n);
}

}  // namespace qflow::pass_helpers
