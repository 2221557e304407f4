// PartitionPlan: BPU subgraphs grown greedily while the graph of units stays acyclic, their boundaries, and the JSON encoding.
#include "partition_plan.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <numeric>
#include <map>
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

std::string json_boundary(const std::vector<BpuBoundary>& boundary, const QuantTable& qparams) {
  std::string out = "[";
  for (std::size_t i = 0; i < boundary.size(); ++i)
    out += std::string(i ? "," : "") + "\n        {\"name\": " + json_string(boundary[i].name) + ", \"conversion\": " +
           json_string(std::string(boundary_conversion_name(boundary[i].conversion))) +
           ", \"quant\": " + plan_json_quant(qparams, boundary[i].name) + "}";
  return out + (boundary.empty() ? "]" : "\n      ]");
}

bool is_graph_output(const Graph& graph, const Value* value) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), value) != graph.outputs.end();
}

// Producers and consumers of each node as positions in `order`.
struct Adjacency {
  std::vector<std::vector<std::size_t>> producers;
  std::vector<std::vector<std::size_t>> consumers;
};

Adjacency adjacency(const std::vector<Node*>& order, const std::unordered_map<const Node*, std::size_t>& position) {
  Adjacency adj;
  adj.producers.resize(order.size());
  adj.consumers.resize(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    for (const Value* in : order[i]->inputs())
      if (const Node* producer = in ? in->producer() : nullptr) {
        adj.producers[i].push_back(position.at(producer));
        adj.consumers[position.at(producer)].push_back(i);
      }
  }
  return adj;
}

// Units of the partition: BPU groups being grown, and single CPU nodes. The graph of units
// (an edge wherever a node edge crosses units) starts as the node graph, a DAG, and a
// merge is made only when it keeps it one.
class Units {
 public:
  explicit Units(const Adjacency& adj)
      : adj_(adj), sets_(adj.producers.size()), members_(adj.producers.size()), last_(adj.producers.size()),
        seen_(adj.producers.size(), 0) {
    for (std::size_t i = 0; i < members_.size(); ++i) members_[i] = {i}, last_[i] = i;
  }
  std::size_t find(std::size_t node) { return sets_.find(node); }

  // Merges the units of a and b unless that closes a cycle, i.e. unless one reaches the
  // other through a third unit. Returns whether they are (now) one unit.
  bool try_merge(std::size_t a, std::size_t b) {
    const std::size_t ua = find(a), ub = find(b);
    if (ua == ub) return true;
    if (reaches_through_other(ua, ub) || reaches_through_other(ub, ua)) return false;
    sets_.unite(ua, ub);
    const std::size_t root = find(ua), other = root == ua ? ub : ua;
    members_[root].insert(members_[root].end(), members_[other].begin(), members_[other].end());
    members_[other].clear();
    last_[root] = std::max(last_[root], last_[other]);
    return true;
  }

 private:
  // Depth-first search over units from `from`'s successors other than `to` itself. Node
  // edges go forward in topological order and a unit's root is its earliest node, so a unit
  // whose root comes after `to`'s last node cannot reach `to`: the search skips it (the
  // greedy growth asks about the node being placed, so most of the graph lies beyond).
  bool reaches_through_other(std::size_t from, std::size_t to) {
    const std::size_t limit = last_[to];
    work_.clear();
    touched_.clear();
    const auto mark = [&](std::size_t u) {
      seen_[u] = 1;
      touched_.push_back(u);
    };
    mark(from);
    auto push_successors = [&](std::size_t unit, bool skip_target) {
      for (std::size_t n : members_[unit])
        for (std::size_t c : adj_.consumers[n]) {
          const std::size_t u = find(c);
          if (u == unit || u > limit || seen_[u] || (skip_target && u == to)) continue;
          mark(u);
          work_.push_back(u);
        }
    };
    push_successors(from, true);
    bool reached = false;
    while (!work_.empty() && !reached) {
      const std::size_t u = work_.back();
      work_.pop_back();
      if (u == to) reached = true;
      else push_successors(u, false);
    }
    for (std::size_t u : touched_) seen_[u] = 0;
    return reached;
  }

  const Adjacency& adj_;
  DisjointSets sets_;
  std::vector<std::vector<std::size_t>> members_;
  std::vector<std::size_t> last_;  // per unit root: the position of its last node
  // The search's state, kept between calls (seen_ is all zero outside one).
  std::vector<char> seen_;
  std::vector<std::size_t> work_, touched_;
};

}  // namespace

std::string_view boundary_conversion_name(BoundaryConversion conversion) {
  switch (conversion) {
    case BoundaryConversion::None: return "none";
    case BoundaryConversion::Quantize: return "quantize";
    case BoundaryConversion::Dequantize: return "dequantize";
  }
  return "none";
}

std::string plan_json_string(const std::string& text) { return json_string(text); }
std::string plan_json_float(float value) { return json_float(value); }

std::string plan_json_quant(const QuantTable& qparams, const std::string& name) {
  const auto it = qparams.find(name);
  if (it == qparams.end()) return "null";
  const QuantParams& q = it->second;
  std::string out = "{\"dtype\": " + json_string(std::string(dtype_name(q.dtype))) + ", \"axis\": " + std::to_string(q.axis) +
                    ", \"scale\": [";
  for (std::size_t k = 0; k < q.scale.size(); ++k) out += (k ? ", " : "") + json_float(q.scale[k]);
  out += "], \"zero_point\": [";
  for (std::size_t k = 0; k < q.zero_point.size(); ++k) out += (k ? ", " : "") + std::to_string(q.zero_point[k]);
  return out + "]}";
}

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
  const Adjacency adj = adjacency(order, position);
  auto on_bpu = [&](std::size_t i) { return capability[i].supported; };

  // Greedy growth in topological order: each BPU node joins the unit of each BPU producer
  // in turn when the graph of units stays acyclic (README.md has the argument).
  Units pieces(adj);
  for (std::size_t i = 0; i < order.size(); ++i)
    if (on_bpu(i))
      for (std::size_t p : adj.producers[i])
        if (on_bpu(p)) pieces.try_merge(p, i);

  PartitionPlan plan;
  plan.subgraph_of.assign(order.size(), -1);
  std::unordered_map<std::size_t, int64_t> id_of_root;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!on_bpu(i)) continue;
    const auto [it, inserted] = id_of_root.emplace(pieces.find(i), static_cast<int64_t>(plan.subgraphs.size()));
    if (inserted) plan.subgraphs.push_back(BpuSubgraph{it->second, {}, {}, {}});
    plan.subgraph_of[i] = it->second;
    plan.subgraphs[static_cast<std::size_t>(it->second)].nodes.push_back(static_cast<int64_t>(i));
  }

  for (BpuSubgraph& sub : plan.subgraphs) {
    std::set<std::string> seen_in, seen_out;
    for (int64_t index : sub.nodes) {
      const Node* node = order[static_cast<std::size_t>(index)];
      for (const Value* in : node->inputs()) {
        if (!in || graph.is_initializer(in) || seen_in.count(in->name())) continue;
        const Node* producer = in->producer();
        const int64_t from = producer ? plan.subgraph_of[position.at(producer)] : -1;
        if (from == sub.id) continue;
        seen_in.insert(in->name());
        sub.inputs.push_back({in->name(), from < 0 ? BoundaryConversion::Quantize : BoundaryConversion::None});
      }
      for (const Value* out : node->outputs()) {
        if (!out || seen_out.count(out->name())) continue;
        bool to_float = is_graph_output(graph, out), escapes = to_float;
        for (const auto& [user, input_index] : out->uses()) {
          (void)input_index;
          const int64_t to = plan.subgraph_of[position.at(user)];
          escapes = escapes || to != sub.id;
          to_float = to_float || to < 0;
        }
        if (!escapes) continue;
        seen_out.insert(out->name());
        sub.outputs.push_back({out->name(), to_float ? BoundaryConversion::Dequantize : BoundaryConversion::None});
      }
    }
  }
  plan.nodes = std::move(capability);
  return plan;
}

std::string partition_plan_json(const PartitionPlan& plan, const std::string& platform, const std::string& model_name,
                                const QuantTable& qparams) {
  std::string out = "{\n";
  out += "  \"format\": \"qflow-bpu-partition-plan\",\n";
  out += "  \"version\": 2,\n";
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
           ",\n      \"inputs\": " +
           json_boundary(sub.inputs, qparams) + ",\n      \"outputs\": " + json_boundary(sub.outputs, qparams) + "\n    }";
  }
  out += plan.subgraphs.empty() ? "]\n" : "\n  ]\n";
  out += "}\n";
  return out;
}

}  // namespace qflow
