// Stable topological sort of ModelProto graphs, subgraph captures counted as inputs.
#include "framework/onnx/proto_topological_sort.h"

#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace qflow::onnx_proto {

namespace {

void add_free_names(const onnx::GraphProto& graph, std::unordered_set<std::string>& free);

// Names `node` reads: its inputs and the outer values its subgraphs use.
std::unordered_set<std::string> names_read(const onnx::NodeProto& node) {
  std::unordered_set<std::string> names(node.input().begin(), node.input().end());
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.has_g()) add_free_names(a.g(), names);
    for (const onnx::GraphProto& g : a.graphs()) add_free_names(g, names);
  }
  names.erase("");
  return names;
}

// Adds the names `graph` reads from enclosing scopes: read by a node, defined nowhere inside.
void add_free_names(const onnx::GraphProto& graph, std::unordered_set<std::string>& free) {
  std::unordered_set<std::string> defined;
  for (const auto& v : graph.input()) defined.insert(v.name());
  for (const auto& t : graph.initializer()) defined.insert(t.name());
  for (const auto& n : graph.node())
    for (const std::string& out : n.output()) defined.insert(out);
  for (const auto& n : graph.node())
    for (const std::string& name : names_read(n))
      if (!defined.count(name)) free.insert(name);
  for (const auto& v : graph.output())
    if (!defined.count(v.name())) free.insert(v.name());
}

}  // namespace

bool sort_nodes_topologically(onnx::GraphProto& graph) {
  bool changed = false;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) changed |= sort_nodes_topologically(*a.mutable_g());
      for (onnx::GraphProto& g : *a.mutable_graphs()) changed |= sort_nodes_topologically(g);
    }
  }
  const int count = graph.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < count; ++i)
    for (const std::string& out : graph.node(i).output())
      if (!out.empty()) producer.emplace(out, i);
  std::vector<std::vector<int>> users(static_cast<std::size_t>(count));
  std::vector<int> pending(static_cast<std::size_t>(count), 0);
  for (int i = 0; i < count; ++i) {
    for (const std::string& name : names_read(graph.node(i))) {
      auto it = producer.find(name);
      if (it == producer.end() || it->second == i) continue;
      users[static_cast<std::size_t>(it->second)].push_back(i);
      ++pending[static_cast<std::size_t>(i)];
    }
  }
  // The smallest ready index first: a graph already in order keeps it exactly.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < count; ++i)
    if (pending[static_cast<std::size_t>(i)] == 0) ready.push(i);
  std::vector<int> order;
  std::vector<bool> placed(static_cast<std::size_t>(count), false);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    placed[static_cast<std::size_t>(i)] = true;
    for (int user : users[static_cast<std::size_t>(i)])
      if (--pending[static_cast<std::size_t>(user)] == 0) ready.push(user);
  }
  for (int i = 0; i < count; ++i)
    if (!placed[static_cast<std::size_t>(i)]) order.push_back(i);
  bool moved = false;
  for (int i = 0; i < count; ++i) moved |= order[static_cast<std::size_t>(i)] != i;
  if (!moved) return changed;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  for (int i : order) sorted.Add()->Swap(graph.mutable_node(i));
  graph.mutable_node()->Swap(&sorted);
  return true;
}

}  // namespace qflow::onnx_proto
