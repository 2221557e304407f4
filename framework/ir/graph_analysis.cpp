// Graph analyses: topological order (stable Kahn), cycle reporting (Boost.Graph), validation.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>

#include "qflow/ir/captured_values.h"
#include "qflow/ir/graph.h"

namespace qflow {

namespace {

std::string node_label(const Node* node) {
  return node->op_type() + " '" + node->name() + "'";
}

// Nodes on some cycle, found as strongly connected components of size > 1 or self-loops.
std::vector<const Node*> nodes_on_cycle(const std::vector<const Node*>& nodes,
                                        const std::unordered_map<const Node*, std::size_t>& index) {
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  G g(nodes.size());
  bool self_loop_found = false;
  std::vector<const Node*> self_loops;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (const Value* out : nodes[i]->outputs()) {
      if (!out) continue;
      for (const auto& [user, slot] : out->uses()) {
        auto it = index.find(user);
        if (it == index.end()) continue;
        if (it->second == i) {
          self_loop_found = true;
          self_loops.push_back(nodes[i]);
        }
        boost::add_edge(i, it->second, g);
      }
    }
  }
  if (self_loop_found) return self_loops;
  std::vector<int> component(nodes.size());
  const int count = boost::strong_components(g, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, g)));
  std::vector<int> sizes(static_cast<std::size_t>(count), 0);
  for (int c : component) ++sizes[static_cast<std::size_t>(c)];
  std::vector<const Node*> out;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (sizes[static_cast<std::size_t>(component[i])] > 1) out.push_back(nodes[i]);
  return out;
}

}  // namespace

Expected<std::vector<Node*>> Graph::topological_order() const {
  std::vector<const Node*> all;
  std::unordered_map<const Node*, std::size_t> index;
  for (const auto& n : nodes_) {
    index[n.get()] = all.size();
    all.push_back(n.get());
  }
  // Edges producer -> user, one per input slot, and one per value a subgraph of the user
  // captures (an If branch reading an outer value runs after that value's producer).
  std::vector<std::vector<std::size_t>> users(all.size());
  std::vector<int> pending(all.size(), 0);
  auto add_edge = [&](const Value* v, std::size_t user) {
    if (!v || !v->producer()) return;
    auto it = index.find(v->producer());
    if (it == index.end()) return;
    users[it->second].push_back(user);
    ++pending[user];
  };
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (const Value* in : all[i]->inputs()) add_edge(in, i);
    for (const std::string& name : captured_value_names(*all[i])) add_edge(find_value(name), i);
  }
  // Min-heap on insertion index keeps the order stable and deterministic.
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<Node*> order;
  order.reserve(all.size());
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    order.push_back(const_cast<Node*>(all[i]));
    for (std::size_t user : users[i])
      if (--pending[user] == 0) ready.push(user);
  }
  if (order.size() != all.size()) {
    const auto cycle = nodes_on_cycle(all, index);
    std::string names;
    for (std::size_t i = 0; i < cycle.size() && i < 5; ++i) names += (i ? ", " : "") + node_label(cycle[i]);
    if (cycle.size() > 5) names += ", ...";
    return invalid_input("graph has a cycle through " + std::to_string(cycle.size()) + " node(s): " + names);
  }
  return order;
}

Status Graph::validate() const {
  std::unordered_set<const Value*> available;
  for (const Value* v : inputs) available.insert(v);
  for (const Value* v : initializer_order_) available.insert(v);
  std::unordered_map<const Value*, const Node*> producer_of;
  for (const auto& n : nodes_) {
    for (const Value* out : n->outputs()) {
      if (!out) continue;
      auto [it, inserted] = producer_of.emplace(out, n.get());
      if (!inserted)
        return invalid_input("value '" + out->name() + "' is produced by both " + node_label(it->second) +
                             " and " + node_label(n.get()));
      if (available.count(out) && std::find(inputs.begin(), inputs.end(), out) != inputs.end())
        return invalid_input("value '" + out->name() + "' is a graph input and also produced by " + node_label(n.get()));
    }
  }
  for (const auto& n : nodes_) {
    for (const Value* in : n->inputs()) {
      if (in && !producer_of.count(in) && !available.count(in))
        return invalid_input("input '" + in->name() + "' of " + node_label(n.get()) +
                             " is not produced by any node, nor a graph input or initializer");
    }
  }
  for (const Value* out : outputs) {
    if (!producer_of.count(out) && !available.count(out))
      return invalid_input("graph output '" + out->name() + "' is not produced by any node");
  }
  auto order = topological_order();
  return order.status();
}

}  // namespace qflow
