// Lowering driver: read the PTQ model, place and partition its float view, move the nodes
// without an integer lowering to the CPU, order the segments, and run the rules.
#include "lowering.h"

#include <algorithm>
#include <map>
#include <set>

#include "lowering_context.h"
#include "partition_plan.h"
#include "qdq_model.h"
#include "qflow/runtime/cpu_ops.h"

namespace qflow {

namespace {

using lowering::Lowerer;

bool default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

enum class Concept { None, Constant, Linear, Eltwise, Pool, Table, Layout };

Concept concept_of(const Node& node) {
  static const std::map<std::string, Concept> kDefault = {
      {"Constant", Concept::Constant},
      {"Conv", Concept::Linear}, {"ConvTranspose", Concept::Linear}, {"Gemm", Concept::Linear}, {"MatMul", Concept::Linear},
      {"Add", Concept::Eltwise}, {"Sub", Concept::Eltwise}, {"Mul", Concept::Eltwise}, {"Relu", Concept::Eltwise},
      {"Clip", Concept::Eltwise}, {"Concat", Concept::Eltwise}, {"Identity", Concept::Eltwise}, {"Dropout", Concept::Eltwise},
      {"MaxPool", Concept::Pool}, {"AveragePool", Concept::Pool}, {"GlobalAveragePool", Concept::Pool},
      {"GlobalMaxPool", Concept::Pool}, {"Resize", Concept::Pool},
      {"Sigmoid", Concept::Table}, {"Tanh", Concept::Table}, {"HardSigmoid", Concept::Table}, {"HardSwish", Concept::Table},
      {"Gelu", Concept::Table}, {"Exp", Concept::Table}, {"Reciprocal", Concept::Table}, {"LeakyRelu", Concept::Table},
      {"Softmax", Concept::Table}, {"LayerNormalization", Concept::Table},
      {"Reshape", Concept::Layout}, {"Flatten", Concept::Layout}, {"Squeeze", Concept::Layout},
      {"Unsqueeze", Concept::Layout}, {"Transpose", Concept::Layout}, {"Slice", Concept::Layout},
  };
  if (default_domain(node)) {
    auto it = kDefault.find(node.op_type());
    return it == kDefault.end() ? Concept::None : it->second;
  }
  if (node.domain() == "com.microsoft" && node.op_type() == "Gelu") return Concept::Table;
  return Concept::None;
}

// "" when the node has an integer lowering, else the reason.
std::string lowering_gap(const Lowerer& l, const Node& node) {
  const Concept c = concept_of(node);
  if (c == Concept::Constant) return {};
  if (c == Concept::None) return lowering::no_lowering(node, node.domain().empty() ? "" : "(domain " + node.domain() + ")");
  // Output 0 is always written; further outputs only matter when something reads them.
  if (!node.output(0)) return lowering::no_lowering(node, "without its first output");
  for (std::size_t i = 0; i < node.outputs().size(); ++i) {
    const Value* out = node.output(i);
    const bool read = out && (!out->uses().empty() ||
                              std::find(l.graph.outputs.begin(), l.graph.outputs.end(), out) != l.graph.outputs.end());
    if ((i == 0 || read) && !l.quant(out))
      return lowering::no_lowering(node, "(output '" + out->name() + "' is not quantized)");
  }
  switch (c) {
    case Concept::Linear: return lowering::gap_linear(l, node);
    case Concept::Eltwise: return lowering::gap_eltwise(l, node);
    case Concept::Pool: return lowering::gap_pool(l, node);
    case Concept::Table: return lowering::gap_table(l, node);
    case Concept::Layout: return lowering::gap_layout(l, node);
    default: return {};
  }
}

Status lower_bpu_node(Lowerer& l, const Node& node) {
  switch (concept_of(node)) {
    case Concept::Linear: return lowering::lower_linear(l, node);
    case Concept::Eltwise: return lowering::lower_eltwise(l, node);
    case Concept::Pool: return lowering::lower_pool(l, node);
    case Concept::Table: return lowering::lower_table(l, node);
    case Concept::Layout: return lowering::lower_layout(l, node);
    default: return l.node_error(node, "no integer lowering");
  }
}

// The single consumer of a Conv / ConvTranspose / Gemm / MatMul output when it is a Relu or
// Clip with constant bounds in the same BPU subgraph.
const Node* fusable_activation(const Lowerer& l, const Node& node) {
  static const std::set<std::string> kLinear = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
  if (!default_domain(node) || !kLinear.count(node.op_type())) return nullptr;
  const Value* y = node.output(0);
  if (!y || y->uses().size() != 1) return nullptr;
  if (std::find(l.graph.outputs.begin(), l.graph.outputs.end(), y) != l.graph.outputs.end()) return nullptr;
  const Node* act = y->uses().front().first;
  if (y->uses().front().second != 0 || !default_domain(*act)) return nullptr;
  if (act->op_type() != "Relu" && act->op_type() != "Clip") return nullptr;
  if (l.subgraph_of.at(act) != l.subgraph_of.at(&node)) return nullptr;
  double lo = 0.0, hi = 0.0;
  if (!lowering::activation_bounds(l, *act, lo, hi) || !l.quant(act->output(0))) return nullptr;
  return act;
}

// Units (BPU subgraphs, single CPU nodes) in an order that respects every data edge; ties
// go to the unit whose first node comes first in the topological order.
std::vector<int64_t> unit_order(const Graph& graph, const std::vector<Node*>& order, const PartitionPlan& plan,
                                std::vector<int64_t>& unit_of) {
  const auto subgraphs = static_cast<int64_t>(plan.subgraphs.size());
  std::map<const Node*, std::size_t> position;
  for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  unit_of.assign(order.size(), -1);
  std::map<int64_t, std::size_t> first;
  for (std::size_t i = 0; i < order.size(); ++i) {
    unit_of[i] = plan.subgraph_of[i] >= 0 ? plan.subgraph_of[i] : subgraphs + static_cast<int64_t>(i);
    first.emplace(unit_of[i], i);
  }
  std::map<int64_t, std::set<int64_t>> successors;
  std::map<int64_t, int64_t> indegree;
  for (const auto& [unit, pos] : first) indegree[unit] = 0;
  for (std::size_t i = 0; i < order.size(); ++i)
    for (const Value* in : order[i]->inputs()) {
      if (!in || !in->producer()) continue;
      const int64_t from = unit_of[position.at(in->producer())];
      const int64_t to = unit_of[i];
      if (from != to && successors[from].insert(to).second) ++indegree[to];
    }
  (void)graph;
  std::set<std::pair<std::size_t, int64_t>> ready;
  for (const auto& [unit, degree] : indegree)
    if (degree == 0) ready.insert({first.at(unit), unit});
  std::vector<int64_t> result;
  while (!ready.empty()) {
    const int64_t unit = ready.begin()->second;
    ready.erase(ready.begin());
    result.push_back(unit);
    for (int64_t next : successors[unit])
      if (--indegree[next] == 0) ready.insert({first.at(next), next});
  }
  return result;
}

}  // namespace

Expected<PartitionPlan> lowering_partition(const QdqModel& qdq, const BpuBackend& backend,
                                           const std::vector<std::string>& run_on_bpu) {
  const Graph& graph = *qdq.view.graph;
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, backend.plan(qdq.view, qdq.table));
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  Lowerer l(qdq, backend.platform());
  // Nodes the platform accepts but the lowering cannot express run on the CPU; partitioning
  // again keeps the subgraphs convex.
  bool moved = false;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!plan.nodes[i].supported) continue;
    std::string reason = lowering_gap(l, *order[i]);
    if (reason.empty()) continue;
    if (std::find(run_on_bpu.begin(), run_on_bpu.end(), order[i]->name()) != run_on_bpu.end())
      return invalid_input("run-on-bpu: node '" + order[i]->name() + "' cannot run on " + backend.platform().name + ": " +
                           reason);
    plan.nodes[i].supported = false;
    plan.nodes[i].reason = std::move(reason);
    moved = true;
  }
  if (!moved) return plan;
  return build_partition_plan(graph, plan.nodes);
}

Expected<lowered::Model> lower_ptq_model(const Model& ptq, const BpuBackend& backend, LoweringReport* report,
                                         const LoweringOptions& options) {
  QFLOW_ASSIGN_OR_RETURN(QdqModel qdq, read_qdq_model(ptq));
  const Graph& graph = *qdq.view.graph;
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, lowering_partition(qdq, backend, options.run_on_bpu));
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  Lowerer l(qdq, backend.platform());
  for (std::size_t i = 0; i < order.size(); ++i) l.subgraph_of[order[i]] = plan.subgraph_of[i];

  // Every CPU node needs a float kernel in the runtime.
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Node& node = *order[i];
    if (plan.subgraph_of[i] >= 0 || (node.op_type() == "Constant" && default_domain(node))) continue;
    const bool ms_gelu = node.domain() == "com.microsoft" && node.op_type() == "Gelu";
    if ((!default_domain(node) && !ms_gelu) || !lowered::cpu_op_supported(node.op_type()))
      return unsupported("CPU node '" + node.name() + "' (" + node.op_type() + "): the runtime has no float kernel for " +
                         (default_domain(node) || ms_gelu ? node.op_type() : node.domain() + "::" + node.op_type()) +
                         (plan.nodes[i].reason.empty() ? std::string() : " (on the CPU because: " + plan.nodes[i].reason + ")"));
  }

  for (std::size_t i = 0; i < order.size(); ++i)
    if (options.fuse_activations && plan.subgraph_of[i] >= 0)
      if (const Node* act = fusable_activation(l, *order[i])) {
        l.fused_activation[order[i]] = act;
        l.fused.insert(act);
      }

  l.model.name = graph.name;
  l.model.platform = backend.platform().name;
  for (const Value* in : graph.inputs) l.model.inputs.push_back(l.write_float(in));

  std::vector<int64_t> unit_of;
  const std::vector<int64_t> units = unit_order(graph, order, plan, unit_of);
  const auto subgraphs = static_cast<int64_t>(plan.subgraphs.size());
  for (int64_t unit : units) {
    if (unit < subgraphs) {
      l.model.segments.push_back({0, lowered::SegmentKind::bpu, {}});
      l.current_segment = l.model.segments.size() - 1;
      for (int64_t pos : plan.subgraphs[static_cast<std::size_t>(unit)].nodes) {
        const Node& node = *order[static_cast<std::size_t>(pos)];
        if (l.fused.count(&node) || concept_of(node) == Concept::Constant) continue;
        QFLOW_RETURN_IF_ERROR(lower_bpu_node(l, node));
      }
    } else {
      const Node& node = *order[static_cast<std::size_t>(unit - subgraphs)];
      if (node.op_type() == "Constant" && default_domain(node)) continue;
      if (l.model.segments.empty() || l.model.segments.back().kind != lowered::SegmentKind::cpu)
        l.model.segments.push_back({0, lowered::SegmentKind::cpu, {}});
      l.current_segment = l.model.segments.size() - 1;
      QFLOW_RETURN_IF_ERROR(lowering::lower_cpu(l, node));
    }
  }

  // Graph outputs: f32 tensors with the PTQ model's output names.
  for (const Value* out : graph.outputs) {
    if (!out->producer()) {
      QFLOW_ASSIGN_OR_RETURN(int32_t t, l.read_float(out));
      l.model.outputs.push_back(t);
      continue;
    }
    if (l.on_bpu(out->producer())) {
      QFLOW_ASSIGN_OR_RETURN(int32_t q, l.read_quantized(out));
      l.current_segment = l.written_in.at(q);
    }
    QFLOW_ASSIGN_OR_RETURN(int32_t t, l.read_float(out));
    l.model.outputs.push_back(t);
  }

  std::vector<lowered::Segment> segments;
  for (lowered::Segment& s : l.model.segments)
    if (!s.ops.empty()) segments.push_back(std::move(s));
  for (std::size_t i = 0; i < segments.size(); ++i) segments[i].id = static_cast<uint32_t>(i);
  l.model.segments = std::move(segments);
  if (report) report->nodes = plan.nodes;
  return std::move(l.model);
}

}  // namespace qflow
