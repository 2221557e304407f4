// Tests of the BPU partition: convex subgraphs (no cycle through the CPU), full coverage and boundary conversions.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plugins/backends/bpu/partition_plan.h"
#include "test_bpu_helpers.h"

namespace qflow {
namespace {

using namespace bpu_test;

// Capability entries in topological order with the given nodes on the CPU.
std::vector<NodeCapability> placement(const Graph& graph, const std::set<std::string>& cpu) {
  auto order = graph.topological_order();
  REQUIRE(order.has_value());
  std::vector<NodeCapability> caps;
  for (const Node* node : order.value())
    caps.push_back({node->name(), node->op_type(), !cpu.count(node->name()), cpu.count(node->name()) ? "test" : ""});
  return caps;
}

// Contracts each subgraph to one unit (CPU nodes are units of their own) and runs Kahn's
// algorithm: every unit is emitted only when the contracted graph has no cycle.
bool contraction_is_acyclic(const Graph& graph, const PartitionPlan& plan) {
  auto order_or = graph.topological_order();
  REQUIRE(order_or.has_value());
  const std::vector<Node*>& order = order_or.value();
  std::map<const Node*, std::size_t> position;
  for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  // Units: subgraph s -> s, CPU node i -> subgraphs.size() + i.
  const std::size_t units = plan.subgraphs.size() + order.size();
  auto unit_of = [&](std::size_t i) {
    return plan.subgraph_of[i] >= 0 ? static_cast<std::size_t>(plan.subgraph_of[i]) : plan.subgraphs.size() + i;
  };
  std::vector<std::set<std::size_t>> edges(units);
  for (std::size_t i = 0; i < order.size(); ++i)
    for (const Value* in : order[i]->inputs())
      if (const Node* p = in ? in->producer() : nullptr) {
        const std::size_t from = unit_of(position[p]), to = unit_of(i);
        if (from != to) edges[from].insert(to);
      }
  // Kahn's algorithm over the units: all of them are emitted only when there is no cycle.
  std::vector<int> indegree(units, 0);
  for (const auto& out : edges)
    for (std::size_t to : out) ++indegree[to];
  std::vector<std::size_t> ready;
  for (std::size_t u = 0; u < units; ++u)
    if (indegree[u] == 0) ready.push_back(u);
  std::size_t emitted = 0;
  while (!ready.empty()) {
    const std::size_t u = ready.back();
    ready.pop_back();
    ++emitted;
    for (std::size_t to : edges[u])
      if (--indegree[to] == 0) ready.push_back(to);
  }
  return emitted == units;
}

// The properties every plan must have, checked from the graph alone:
//  * every BPU node is in exactly one subgraph, every CPU node in none;
//  * each subgraph is connected through edges inside it;
//  * contracting each subgraph to one unit (CPU nodes are units of their own) leaves a
//    DAG, i.e. no path leaves a subgraph and comes back: the subgraphs are convex.
void check_plan_properties(const Graph& graph, const PartitionPlan& plan) {
  auto order_or = graph.topological_order();
  REQUIRE(order_or.has_value());
  const std::vector<Node*>& order = order_or.value();
  REQUIRE(plan.nodes.size() == order.size());
  std::map<const Node*, std::size_t> position;
  for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;

  std::vector<int> seen(order.size(), 0);
  for (const BpuSubgraph& sub : plan.subgraphs)
    for (int64_t n : sub.nodes) {
      ++seen[static_cast<std::size_t>(n)];
      CHECK(plan.subgraph_of[static_cast<std::size_t>(n)] == sub.id);
    }
  for (std::size_t i = 0; i < order.size(); ++i) {
    CHECK(seen[i] == (plan.nodes[i].supported ? 1 : 0));
    CHECK((plan.subgraph_of[i] >= 0) == plan.nodes[i].supported);
  }

  CHECK(contraction_is_acyclic(graph, plan));

  // Connectivity of each subgraph through its own edges (undirected flood fill).
  for (const BpuSubgraph& sub : plan.subgraphs) {
    std::set<std::size_t> members, reached;
    for (int64_t n : sub.nodes) members.insert(static_cast<std::size_t>(n));
    std::vector<std::size_t> work = {*members.begin()};
    reached.insert(work.back());
    while (!work.empty()) {
      const std::size_t v = work.back();
      work.pop_back();
      std::vector<std::size_t> next;
      for (const Value* in : order[v]->inputs())
        if (const Node* p = in ? in->producer() : nullptr) next.push_back(position[p]);
      for (const Value* out : order[v]->outputs())
        if (out)
          for (const auto& [user, index] : out->uses()) {
            (void)index;
            next.push_back(position[user]);
          }
      for (std::size_t n : next)
        if (members.count(n) && reached.insert(n).second) work.push_back(n);
    }
    CHECK(reached == members);
  }
}

// A BPU region that leaves through the CPU twice, at two depths:
//
//   x -> a -> b ----------------> e -> f -> g -> y
//        |                        ^         ^
//        +-> c1 (CPU) -> d -------+         |
//                        +-> c2 (CPU) ------+
//
// {a..g} minus the CPU nodes is connected through a -> b -> e and d -> e, but a -> c1 -> d
// re-enters it, and d -> c2 -> g re-enters it again: the subgraphs are {a, b}, {d, e, f}
// and {g}.
Model split_model() {
  Model model;
  Graph& g = *model.graph;
  g.name = "split";
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* a = unary(g, "Relu", "a", x);
  Value* b = unary(g, "Relu", "b", a);
  Value* c1 = unary(g, "Softmax", "c1", a);
  Value* d = unary(g, "Relu", "d", c1);
  Value* e = binary(g, "Add", "e", b, d);
  Value* f = unary(g, "Relu", "f", e);
  Value* c2 = unary(g, "Softmax", "c2", d);
  Value* gg = binary(g, "Add", "g", f, c2);
  g.outputs = {gg};
  return model;
}

TEST_CASE("bpu partition: a region re-entered through the CPU is split into convex subgraphs") {
  const Model model = split_model();
  const Graph& g = *model.graph;
  auto plan = build_partition_plan(g, placement(g, {"c1", "c2"}));
  REQUIRE(plan.has_value());
  check_plan_properties(g, plan.value());
  std::map<std::string, int64_t> sub;
  for (std::size_t i = 0; i < plan->nodes.size(); ++i) sub[plan->nodes[i].node] = plan->subgraph_of[i];
  CHECK(sub["a"] == sub["b"]);
  CHECK(sub["d"] == sub["e"]);
  CHECK(sub["e"] == sub["f"]);
  CHECK(sub["a"] != sub["d"]);
  CHECK(sub["g"] != sub["f"]);
  CHECK(sub["g"] != sub["a"]);
  REQUIRE(plan->subgraphs.size() == 3);
  // Ids follow the topological position of the first node.
  CHECK(sub["a"] == 0);
  CHECK(sub["d"] == 1);
  CHECK(sub["g"] == 2);

  // The connected region alone, unsplit, would contain a cycle through the CPU: the
  // acyclicity check sees it.
  const std::vector<NodeCapability> caps = placement(g, {"c1", "c2"});
  PartitionPlan naive = plan.value();
  naive.subgraphs = {BpuSubgraph{0, {}, {}, {}}};
  for (std::size_t i = 0; i < caps.size(); ++i) {
    naive.subgraph_of[i] = caps[i].supported ? 0 : -1;
    if (caps[i].supported) naive.subgraphs[0].nodes.push_back(static_cast<int64_t>(i));
  }
  CHECK_FALSE(contraction_is_acyclic(g, naive));
}

TEST_CASE("bpu partition: boundary conversions and their quantization parameters") {
  const Model model = split_model();
  const Graph& g = *model.graph;
  auto plan = build_partition_plan(g, placement(g, {"c1", "c2"}));
  REQUIRE(plan.has_value());
  const BpuSubgraph& first = plan->subgraphs[0];
  REQUIRE(first.inputs.size() == 1);
  CHECK(first.inputs[0].name == "x");
  CHECK(first.inputs[0].conversion == BoundaryConversion::Quantize);  // graph input
  REQUIRE(first.outputs.size() == 2);
  CHECK(first.outputs[0].name == "a_out");  // read by c1 on the CPU
  CHECK(first.outputs[0].conversion == BoundaryConversion::Dequantize);
  CHECK(first.outputs[1].name == "b_out");  // read only by subgraph 1
  CHECK(first.outputs[1].conversion == BoundaryConversion::None);
  const BpuSubgraph& second = plan->subgraphs[1];
  REQUIRE(second.inputs.size() == 2);
  CHECK(second.inputs[0].name == "c1_out");
  CHECK(second.inputs[0].conversion == BoundaryConversion::Quantize);
  CHECK(second.inputs[1].name == "b_out");
  CHECK(second.inputs[1].conversion == BoundaryConversion::None);
  const BpuSubgraph& last = plan->subgraphs[2];
  REQUIRE(last.outputs.size() == 1);
  CHECK(last.outputs[0].name == "g_out");  // graph output
  CHECK(last.outputs[0].conversion == BoundaryConversion::Dequantize);

  QuantParams q;
  q.dtype = DType::Int8;
  q.scale = {0.5f};
  q.zero_point = {-3};
  const std::string json = partition_plan_json(plan.value(), "test", "split", {{"x", q}});
  CHECK(json.find("{\"name\": \"x\", \"conversion\": \"quantize\", \"quant\": {\"dtype\": \"int8\", \"axis\": -1, "
                  "\"scale\": [0.5], \"zero_point\": [-3]}}") != std::string::npos);
  CHECK(json.find("{\"name\": \"b_out\", \"conversion\": \"none\", \"quant\": null}") != std::string::npos);
  CHECK(json.find("\"version\": 2,") != std::string::npos);
}

TEST_CASE("bpu partition: a convex region is never split, a graph without BPU nodes has no subgraph") {
  const Model model = split_model();
  const Graph& g = *model.graph;
  auto all_bpu = build_partition_plan(g, placement(g, {}));
  REQUIRE(all_bpu.has_value());
  CHECK(all_bpu->subgraphs.size() == 1);
  check_plan_properties(g, all_bpu.value());
  // c1 alone on the CPU: d and everything after it re-enter once.
  auto one = build_partition_plan(g, placement(g, {"c1"}));
  REQUIRE(one.has_value());
  CHECK(one->subgraphs.size() == 2);
  check_plan_properties(g, one.value());
  auto none = build_partition_plan(g, placement(g, {"a", "b", "c1", "d", "e", "f", "c2", "g"}));
  REQUIRE(none.has_value());
  CHECK(none->subgraphs.empty());
}

TEST_CASE("bpu partition: a constant read on both sides of a CPU node joins one side") {
  // k feeds a and d, which the CPU node c separates: k can join a, not both.
  Model model;
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* k = g.get_or_create_value("k_out");
  g.add_node("Constant", {}, {k}, "k");
  Value* k2 = g.get_or_create_value("k2_out");
  g.add_node("Constant", {}, {k2}, "k2");
  Value* a = binary(g, "Add", "a", x, k);
  Value* c = unary(g, "Softmax", "c", a);
  Value* d = binary(g, "Add", "d", c, k);
  Value* e = binary(g, "Mul", "e", d, k2);
  Value* f = binary(g, "Add", "f", e, a);
  g.outputs = {f};
  auto plan = build_partition_plan(g, placement(g, {"c"}));
  REQUIRE(plan.has_value());
  check_plan_properties(g, plan.value());
  std::map<std::string, int64_t> sub;
  for (std::size_t i = 0; i < plan->nodes.size(); ++i) sub[plan->nodes[i].node] = plan->subgraph_of[i];
  CHECK(sub["k2"] == sub["e"]);  // read only by e: inside e's subgraph
  CHECK(sub["k"] == sub["a"]);   // the first reader takes it
  CHECK(sub["k"] != sub["d"]);   // d, behind c, reads it across a boundary
  CHECK(sub["d"] == sub["f"]);
  CHECK(plan->subgraphs.size() == 2);
}

TEST_CASE("bpu partition: random graphs and placements always give convex, covering plans") {
  // A fixed linear congruential sequence, so the graphs are the same on every run.
  uint64_t state = 12345;
  auto next = [&state](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  for (int round = 0; round < 200; ++round) {
    Model model;
    Graph& g = *model.graph;
    std::vector<Value*> values = {g.get_or_create_value("x")};
    g.inputs = {values[0]};
    std::set<std::string> cpu;
    const std::size_t nodes = 3 + next(18);
    for (std::size_t i = 0; i < nodes; ++i) {
      std::string name = "n";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict) on "n" + to_string
      name += std::to_string(i);
      Value* a = values[next(values.size())];
      Value* out = nullptr;
      if (next(5) == 0) {  // a constant: no inputs, so no path can enter it
        out = g.get_or_create_value(name + "_out");
        g.add_node("Constant", {}, {out}, name);
      } else {
        out = next(2) ? binary(g, "Add", name, a, values[next(values.size())]) : unary(g, "Relu", name, a);
      }
      values.push_back(out);
      if (next(3) == 0) cpu.insert(name);
    }
    g.outputs = {values.back()};
    auto plan = build_partition_plan(g, placement(g, cpu));
    REQUIRE(plan.has_value());
    check_plan_properties(g, plan.value());
  }
}

}  // namespace
}  // namespace qflow
