// The greedy rewrite driver: sweeps in topological order until no rule matches.
#include "qflow/ir/rewrite.h"

#include <algorithm>
#include <unordered_set>

#include "qflow/ir/pattern.h"

namespace qflow {

namespace {

// Erases the pattern's nodes a rewrite left without a reader, then the constants that only
// they read. `inputs` are the pattern's inputs taken before the rewrite (so the former
// inputs of a node rewritten in place count). Every node destroyed joins `erased`.
void erase_dead(Graph& graph, const std::vector<Node*>& pattern_nodes, const std::vector<Value*>& inputs,
                std::unordered_set<const Node*>& erased) {
  auto dead = [&graph](const Node* node) {
    return std::all_of(node->outputs().begin(), node->outputs().end(), [&graph](const Value* v) {
      return !v || (v->uses().empty() && !pattern::is_graph_output(graph, v));
    });
  };
  // Erasing one node can free the node feeding it: repeat until nothing more dies.
  std::vector<Node*> alive;
  for (Node* node : pattern_nodes)
    if (node && std::find(alive.begin(), alive.end(), node) == alive.end()) alive.push_back(node);
  for (bool progress = true; progress;) {
    progress = false;
    for (auto it = alive.begin(); it != alive.end();) {
      if (!dead(*it)) {
        ++it;
        continue;
      }
      erased.insert(*it);
      graph.remove_node(*it);
      it = alive.erase(it);
      progress = true;
    }
  }
  for (Value* v : inputs) {
    if (!v->uses().empty() || pattern::is_graph_output(graph, v)) continue;
    if (Node* constant = pattern::producer_of(v, "Constant")) {
      erased.insert(constant);
      graph.remove_node(constant);
    } else if (graph.is_initializer(v) && !pattern::is_graph_input(graph, v)) {
      graph.remove_initializer(v);
    }
  }
}

std::vector<Value*> inputs_of(const std::vector<Node*>& nodes) {
  std::vector<Value*> inputs;
  for (const Node* node : nodes)
    for (Value* v : node->inputs())
      if (v && std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
  return inputs;
}

}  // namespace

void replace_op(Node& node, const std::string& op_type, const std::string& domain, const std::vector<Value*>& inputs) {
  std::vector<std::string> names;
  for (const Attribute& a : node.attributes()) names.push_back(a.name);
  for (const std::string& name : names) node.remove_attribute(name);
  node.set_op_type(op_type);
  node.set_domain(domain);
  node.set_inputs(inputs);
}

int64_t RewriteReport::total() const {
  int64_t sum = 0;
  for (const auto& [rule, count] : rewrites) sum += count;
  return sum;
}

Expected<RewriteReport> GreedyRewriter::run(Model& model) {
  RewriteReport report;
  for (const auto& rule : rules_) report.rewrites[rule->name()] = 0;
  Graph& graph = *model.graph;
  while (report.iterations < options_.max_iterations) {
    Expected<std::vector<Node*>> order = graph.topological_order();
    if (!order) return order.status();
    ++report.iterations;
    // Node addresses, not names: a rewrite may erase a node the sweep has yet to visit.
    std::unordered_set<const Node*> erased;
    int64_t rewrites = 0;
    for (Node* node : *order) {
      if (erased.count(node)) continue;
      for (const auto& rule : rules_) {
        const std::optional<std::vector<Node*>> nodes = rule->match_pending(model, *node);
        if (!nodes) continue;
        const std::vector<Value*> inputs = inputs_of(*nodes);
        QFLOW_RETURN_IF_ERROR(rule->rewrite_pending(model));
        erase_dead(graph, *nodes, inputs, erased);
        ++report.rewrites[rule->name()];
        ++rewrites;
        break;
      }
    }
    if (rewrites == 0) {
      report.converged = true;
      break;
    }
  }
  if (report.total() > 0) graph.prune_unused_values();
  return report;
}

}  // namespace qflow
