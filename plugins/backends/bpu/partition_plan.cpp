// PartitionPlan: union-find over BPU-BPU edges, convexity check, and the JSON encoding.
#include "partition_plan.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <numeric>
#include <set>
#include <unordered_map>

namespace qflow {

namespace {

class DisjointSets {
 public:
  explicit DisjointSets(std::size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), std::size_t{0}); }
  std::size_t find(std::size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  // The smaller index becomes the root, so roots are the earliest node of each set.
  void unite(std::size_t a, std::size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<std::size_t> parent_;
};

void append_unique(std::vector<std::string>& list, std::set<std::string>& seen, const std::string& name) {
  if (seen.insert(name).second) list.push_back(name);
}

// Walks forward from the subgraph's external consumers; reaching the subgraph again means
// a path leaves and re-enters it.
bool is_convex(const std::vector<Node*>& order, const std::unordered_map<const Node*, std::size_t>& position,
               const std::vector<int64_t>& subgraph_of, int64_t id) {
  std::vector<char> visited(order.size(), 0);
  std::vector<std::size_t> work;
  auto push_consumers = [&](const Node* node, bool from_inside) {
    for (const Value* out : node->outputs()) {
      if (!out) continue;
      for (const auto& [user, index] : out->uses()) {
        (void)index;
        const std::size_t p = position.at(user);
        if (from_inside && subgraph_of[p] == id) continue;
        if (!visited[p]) {
          visited[p] = 1;
          work.push_back(p);
        }
      }
    }
  };
  for (std::size_t i = 0; i < order.size(); ++i)
    if (subgraph_of[i] == id) push_consumers(order[i], true);
  while (!work.empty()) {
    const std::size_t p = work.back();
    work.pop_back();
    if (subgraph_of[p] == id) return false;
    push_consumers(order[p], false);
  }
  return true;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Shortest text that reads back as the same float: stable and exact.
std::string json_float(float value) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

std::string json_boundary(const std::vector<std::string>& names, const QuantTable& qparams) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += std::string(i ? "," : "") + "\n        {\"name\": " + json_string(names[i]) + ", \"quant\": ";
    const auto it = qparams.find(names[i]);
    if (it == qparams.end()) {
      out += "null}";
      continue;
    }
    const QuantParams& q = it->second;
    out += "{\"dtype\": " + json_string(std::string(dtype_name(q.dtype))) + ", \"axis\": " + std::to_string(q.axis) +
           ", \"scale\": [";
    for (std::size_t k = 0; k < q.scale.size(); ++k) out += (k ? ", " : "") + json_float(q.scale[k]);
    out += "], \"zero_point\": [";
    for (std::size_t k = 0; k < q.zero_point.size(); ++k) out += (k ? ", " : "") + std::to_string(q.zero_point[k]);
    out += "]}}";
  }
  return out + (names.empty() ? "]" : "\n      ]");
}

}  // namespace

Expected<PartitionPlan> build_partition_plan(const Graph& graph, std::vector<NodeCapability> capability) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  if (order.size() != capability.size())
    return internal_error("bpu partition: " + std::to_string(capability.size()) + " capability entries for " +
                          std::to_string(order.size()) + " nodes");
  std::unordered_map<const Node*, std::size_t> position;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (capability[i].node != order[i]->name())
      return internal_error("bpu partition: capability entry " + std::to_string(i) + " names '" + capability[i].node +
                            "', the node at that position is '" + order[i]->name() + "'");
    position.emplace(order[i], i);
  }

  DisjointSets sets(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!capability[i].supported) continue;
    for (const Value* in : order[i]->inputs()) {
      const Node* producer = in ? in->producer() : nullptr;
      if (producer && capability[position.at(producer)].supported) sets.unite(i, position.at(producer));
    }
  }

  PartitionPlan plan;
  plan.subgraph_of.assign(order.size(), -1);
  std::unordered_map<std::size_t, int64_t> id_of_root;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!capability[i].supported) continue;
    const auto [it, inserted] = id_of_root.emplace(sets.find(i), static_cast<int64_t>(plan.subgraphs.size()));
    if (inserted) plan.subgraphs.push_back(BpuSubgraph{it->second, {}, {}, {}, true});
    plan.subgraph_of[i] = it->second;
    plan.subgraphs[static_cast<std::size_t>(it->second)].nodes.push_back(static_cast<int64_t>(i));
  }

  for (BpuSubgraph& sub : plan.subgraphs) {
    std::set<std::string> seen_in, seen_out;
    for (int64_t index : sub.nodes) {
      const Node* node = order[static_cast<std::size_t>(index)];
      for (const Value* in : node->inputs()) {
        if (!in || graph.is_initializer(in)) continue;
        const Node* producer = in->producer();
        if (!producer || plan.subgraph_of[position.at(producer)] != sub.id) append_unique(sub.inputs, seen_in, in->name());
      }
      for (const Value* out : node->outputs()) {
        if (!out) continue;
        bool escapes = std::find(graph.outputs.begin(), graph.outputs.end(), out) != graph.outputs.end();
        for (const auto& [user, input_index] : out->uses()) {
          (void)input_index;
          escapes = escapes || plan.subgraph_of[position.at(user)] != sub.id;
        }
        if (escapes) append_unique(sub.outputs, seen_out, out->name());
      }
    }
    sub.convex = is_convex(order, position, plan.subgraph_of, sub.id);
  }
  plan.nodes = std::move(capability);
  return plan;
}

std::string partition_plan_json(const PartitionPlan& plan, const std::string& platform, const std::string& model_name,
                                const QuantTable& qparams) {
  std::string out = "{\n";
  out += "  \"format\": \"qflow-bpu-partition-plan\",\n";
  out += "  \"version\": 1,\n";
  out += "  \"platform\": " + json_string(platform) + ",\n";
  out += "  \"model\": " + json_string(model_name) + ",\n";
  out += "  \"nodes\": [";
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    const NodeCapability& n = plan.nodes[i];
    out += std::string(i ? "," : "") + "\n    {\"index\": " + std::to_string(i) + ", \"name\": " + json_string(n.node) +
           ", \"op_type\": " + json_string(n.op_type) + ", \"placement\": " + (n.supported ? "\"bpu\"" : "\"cpu\"") +
           ", \"subgraph\": " + (plan.subgraph_of[i] < 0 ? std::string("null") : std::to_string(plan.subgraph_of[i])) +
           ", \"reason\": " + json_string(n.reason) + "}";
  }
  out += plan.nodes.empty() ? "],\n" : "\n  ],\n";
  out += "  \"subgraphs\": [";
  for (std::size_t s = 0; s < plan.subgraphs.size(); ++s) {
    const BpuSubgraph& sub = plan.subgraphs[s];
    std::string nodes = "[";
    for (std::size_t k = 0; k < sub.nodes.size(); ++k) nodes += (k ? ", " : "") + std::to_string(sub.nodes[k]);
    nodes += "]";
    out += std::string(s ? "," : "") + "\n    {\n      \"id\": " + std::to_string(sub.id) + ",\n      \"nodes\": " + nodes +
           ",\n      \"convex\": " + (sub.convex ? "true" : "false") + ",\n      \"inputs\": " +
           json_boundary(sub.inputs, qparams) + ",\n      \"outputs\": " + json_boundary(sub.outputs, qparams) + "\n    }";
  }
  out += plan.subgraphs.empty() ? "]\n" : "\n  ]\n";
  out += "}\n";
  return out;
}

}  // namespace qflow
