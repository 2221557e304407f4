// Graph editing: values, nodes, def-use maintenance and initializers.
#include "qflow/ir/graph.h"

#include <algorithm>
#include <unordered_map>

namespace qflow {

std::optional<Shape> ValueType::static_shape() const {
  if (!shape) return std::nullopt;
  Shape out;
  for (const Dim& d : *shape) {
    if (!d.value || *d.value < 0) return std::nullopt;
    out.push_back(*d.value);
  }
  return out;
}

// Node ------------------------------------------------------------------------------------

const Attribute* Node::find_attribute(const std::string& name) const {
  for (const Attribute& a : attributes_)
    if (a.name == name) return &a;
  return nullptr;
}

void Node::set_attribute(Attribute attribute) {
  for (Attribute& a : attributes_) {
    if (a.name == attribute.name) {
      a = std::move(attribute);
      return;
    }
  }
  attributes_.push_back(std::move(attribute));
}

bool Node::remove_attribute(const std::string& name) {
  auto it = std::find_if(attributes_.begin(), attributes_.end(), [&](const Attribute& a) { return a.name == name; });
  if (it == attributes_.end()) return false;
  attributes_.erase(it);
  return true;
}

int64_t Node::attr_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = find_attribute(name);
  return a && a->type == AttributeType::Int ? a->i : fallback;
}

float Node::attr_float(const std::string& name, float fallback) const {
  const Attribute* a = find_attribute(name);
  return a && a->type == AttributeType::Float ? a->f : fallback;
}

std::string Node::attr_string(const std::string& name, const std::string& fallback) const {
  const Attribute* a = find_attribute(name);
  return a && a->type == AttributeType::String ? a->s : fallback;
}

std::vector<int64_t> Node::attr_ints(const std::string& name, const std::vector<int64_t>& fallback) const {
  const Attribute* a = find_attribute(name);
  return a && a->type == AttributeType::Ints ? a->ints : fallback;
}

std::vector<float> Node::attr_floats(const std::string& name, const std::vector<float>& fallback) const {
  const Attribute* a = find_attribute(name);
  return a && a->type == AttributeType::Floats ? a->floats : fallback;
}

namespace {
void erase_use(Value* value, Node* node, int index) {
  auto& uses = value->uses();
  auto& mutable_uses = const_cast<std::vector<std::pair<Node*, int>>&>(uses);
  auto it = std::find(mutable_uses.begin(), mutable_uses.end(), std::make_pair(node, index));
  if (it != mutable_uses.end()) mutable_uses.erase(it);
}
}  // namespace

void Node::set_input(std::size_t i, Value* value) {
  if (i >= inputs_.size()) inputs_.resize(i + 1, nullptr);
  if (inputs_[i]) erase_use(inputs_[i], this, static_cast<int>(i));
  inputs_[i] = value;
  if (value) value->uses_.emplace_back(this, static_cast<int>(i));
}

void Node::set_inputs(const std::vector<Value*>& values) {
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i]) erase_use(inputs_[i], this, static_cast<int>(i));
  inputs_.clear();
  for (std::size_t i = 0; i < values.size(); ++i) set_input(i, values[i]);
}

// Graph -----------------------------------------------------------------------------------

Value* Graph::find_value(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second.get();
}

Value* Graph::get_or_create_value(const std::string& name) {
  auto& slot = values_[name];
  if (!slot) slot.reset(new Value(name));
  return slot.get();
}

Value* Graph::create_unique_value(const std::string& hint) {
  std::string name = hint;
  while (values_.count(name)) name = hint + "_" + std::to_string(++unique_counter_);
  return get_or_create_value(name);
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  out.reserve(values_.size());
  for (const auto& [name, value] : values_) out.push_back(value.get());
  std::sort(out.begin(), out.end(), [](const Value* a, const Value* b) { return a->name() < b->name(); });
  return out;
}

void Graph::set_initializer(Value* value, Tensor tensor) {
  if (!initializers_.count(value)) initializer_order_.push_back(value);
  initializers_[value] = std::move(tensor);
}

const Tensor* Graph::initializer(const Value* value) const {
  auto it = initializers_.find(value);
  return it == initializers_.end() ? nullptr : &it->second;
}

void Graph::remove_initializer(Value* value) {
  if (initializers_.erase(value))
    initializer_order_.erase(std::find(initializer_order_.begin(), initializer_order_.end(), value));
}

std::vector<Value*> Graph::runtime_inputs() const {
  std::vector<Value*> out;
  for (Value* v : inputs)
    if (!is_initializer(v)) out.push_back(v);
  return out;
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& node_inputs,
                      const std::vector<Value*>& node_outputs, const std::string& name,
                      const std::string& domain) {
  std::unique_ptr<Node> node(new Node());
  node->name_ = name;
  node->op_type_ = op_type;
  node->domain_ = domain;
  Node* raw = node.get();
  raw->set_inputs(node_inputs);
  raw->outputs_ = node_outputs;
  for (std::size_t i = 0; i < node_outputs.size(); ++i) {
    if (Value* v = node_outputs[i]) {
      v->producer_ = raw;
      v->producer_index_ = static_cast<int>(i);
    }
  }
  nodes_.push_back(std::move(node));
  return raw;
}

void Graph::remove_node(Node* node) {
  node->set_inputs({});
  for (Value* v : node->outputs_) {
    if (v && v->producer_ == node) {
      v->producer_ = nullptr;
      v->producer_index_ = -1;
    }
  }
  nodes_.remove_if([node](const std::unique_ptr<Node>& n) { return n.get() == node; });
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  const auto uses = from->uses();  // copy: set_input edits the list
  for (const auto& [node, index] : uses) node->set_input(static_cast<std::size_t>(index), to);
  for (Value*& out : outputs)
    if (out == from) out = to;
}

void Graph::move_node_to_end(Node* node) {
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [node](const std::unique_ptr<Node>& n) { return n.get() == node; });
  if (it != nodes_.end()) nodes_.splice(nodes_.end(), nodes_, it);
}

void Graph::move_nodes_to_end(const std::vector<Node*>& nodes) {
  std::unordered_map<const Node*, std::list<std::unique_ptr<Node>>::iterator> where;
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) where.emplace(it->get(), it);
  for (Node* node : nodes)
    if (auto it = where.find(node); it != where.end()) nodes_.splice(nodes_.end(), nodes_, it->second);
}

void Graph::prune_unused_values() {
  std::vector<std::string> dead;
  for (const auto& [name, value] : values_) {
    const Value* v = value.get();
    if (v->producer() || !v->uses().empty() || is_initializer(v)) continue;
    if (std::find(inputs.begin(), inputs.end(), v) != inputs.end()) continue;
    if (std::find(outputs.begin(), outputs.end(), v) != outputs.end()) continue;
    dead.push_back(name);
  }
  for (const std::string& name : dead) {
    Value* v = values_[name].get();
    value_info.erase(std::remove(value_info.begin(), value_info.end(), v), value_info.end());
    values_.erase(name);
  }
}

int64_t Model::opset(const std::string& domain) const {
  const bool default_domain = domain.empty() || domain == "ai.onnx";
  for (const OpsetImport& o : opset_imports) {
    const bool match = default_domain ? (o.domain.empty() || o.domain == "ai.onnx") : o.domain == domain;
    if (match) return o.version;
  }
  return 0;
}

}  // namespace qflow
