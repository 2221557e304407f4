// Graph::copy and Model::copy: in-memory copies that share initializer storage.
#include "qflow/ir/graph.h"

namespace qflow {

namespace {

Attribute copy_attribute(const Attribute& a) {
  Attribute out = a;
  if (a.g) out.g = a.g->copy();
  for (std::shared_ptr<Graph>& g : out.graphs)
    if (g) g = g->copy();
  return out;
}

}  // namespace

std::shared_ptr<Graph> Graph::copy() const {
  auto out = std::make_shared<Graph>();
  out->name = name;
  out->doc_string = doc_string;
  out->unique_counter_ = unique_counter_;
  auto same = [&](const Value* v) -> Value* { return v ? out->find_value(v->name()) : nullptr; };
  for (const auto& [value_name, value] : values_) {
    Value* v = out->get_or_create_value(value_name);
    v->type = value->type;
    v->doc_string = value->doc_string;
  }
  for (const Value* v : initializer_order_) out->set_initializer(same(v), *initializer(v));
  for (const auto& node : nodes_) {
    std::vector<Value*> ins, outs;
    for (const Value* v : node->inputs()) ins.push_back(same(v));
    for (const Value* v : node->outputs()) outs.push_back(same(v));
    Node* n = out->add_node(node->op_type(), ins, outs, node->name(), node->domain());
    for (const Attribute& a : node->attributes()) n->attributes_.push_back(copy_attribute(a));
    n->doc_string = node->doc_string;
    n->overload = node->overload;
  }
  for (const Value* v : inputs) out->inputs.push_back(same(v));
  for (const Value* v : outputs) out->outputs.push_back(same(v));
  for (const Value* v : value_info) out->value_info.push_back(same(v));
  return out;
}

Model Model::copy() const {
  Model out = *this;
  out.graph = graph->copy();
  return out;
}

}  // namespace qflow
