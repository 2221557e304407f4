// If inlining: copies the branch a constant condition selects into the enclosing graph.
#include "if_inlining.h"

#include <algorithm>
#include <map>
#include <set>

#include "qflow/ir/captured_values.h"

namespace qflow::folding {

namespace {

// The constant condition of an If, or nothing.
std::optional<bool> constant_condition(const Graph& graph, const Node& node) {
  const Value* cond = node.input(0);
  if (!cond || std::find(graph.inputs.begin(), graph.inputs.end(), cond) != graph.inputs.end()) return std::nullopt;
  const Tensor* t = graph.initializer(cond);
  if (!t || t->numel() != 1) return std::nullopt;
  return t->to_doubles()[0] != 0.0;
}

}  // namespace

Expected<bool> inline_constant_if(Graph& graph, Node* node) {
  if (node->op_type() != "If" || !node->domain().empty()) return false;
  const std::optional<bool> condition = constant_condition(graph, *node);
  if (!condition) return false;
  const Attribute* branch_attr = node->find_attribute(*condition ? "then_branch" : "else_branch");
  if (!branch_attr || !branch_attr->g) return invalid_input("If '" + node->name() + "' has no branch graph");
  // Held here: removing the node below frees its attributes.
  const std::shared_ptr<Graph> held = branch_attr->g;
  const Graph& branch = *held;
  if (branch.outputs.size() != node->outputs().size())
    return invalid_input("If '" + node->name() + "': the branch has " + std::to_string(branch.outputs.size()) +
                         " outputs, the node " + std::to_string(node->outputs().size()));
  QFLOW_ASSIGN_OR_RETURN(const std::vector<Node*> order, branch.topological_order());

  // Branch values that would need a new name; subgraphs nested in the branch read values by
  // name, so such a rename would break them.
  std::set<std::string> nested_reads;
  for (const Node* inner : order)
    for (const std::string& name : captured_value_names(*inner)) nested_reads.insert(name);
  auto taken = [&](const std::string& name) { return graph.find_value(name) != nullptr; };
  for (const Value* v : branch.initializer_order())
    if (taken(v->name()) && nested_reads.count(v->name())) return false;
  for (const Node* inner : order)
    for (const Value* out : inner->outputs())
      if (out && taken(out->name()) && nested_reads.count(out->name())) return false;

  std::map<const Value*, Value*> mapped;  // branch value -> value of `graph`
  auto copy_value = [&](const Value* v) {
    Value* copy = graph.create_unique_value(v->name());
    copy->type = v->type;
    mapped[v] = copy;
    return copy;
  };
  for (const Value* v : branch.initializer_order()) graph.set_initializer(copy_value(v), *branch.initializer(v));
  // A branch reads outer values by name; they are found in `graph` (or further out, where
  // the name is simply kept).
  auto outer = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    if (auto it = mapped.find(v); it != mapped.end()) return it->second;
    return graph.get_or_create_value(v->name());
  };
  for (const Node* inner : order) {
    std::vector<Value*> inputs, outputs;
    for (const Value* in : inner->inputs()) inputs.push_back(outer(in));
    for (const Value* out : inner->outputs()) outputs.push_back(out ? copy_value(out) : nullptr);
    Node* copy = graph.add_node(inner->op_type(), inputs, outputs, inner->name(), inner->domain());
    for (const Attribute& a : inner->attributes()) copy->set_attribute(a);
  }
  const std::vector<Value*> results = node->outputs();
  const std::string name = node->name();
  graph.remove_node(node);
  for (std::size_t k = 0; k < results.size(); ++k) {
    if (!results[k]) continue;
    graph.add_node("Identity", {outer(branch.outputs[k])}, {results[k]}, name + "/output_" + std::to_string(k));
  }
  // The copies were appended after the If's readers; a model is written in node order.
  QFLOW_ASSIGN_OR_RETURN(const std::vector<Node*> sorted, graph.topological_order());
  for (Node* n : sorted) graph.move_node_to_end(n);
  return true;
}

}  // namespace qflow::folding
