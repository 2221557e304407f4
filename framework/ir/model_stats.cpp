// Model statistics: histogram, parameter totals and per-node MACs from declared or inferred shapes.
#include "framework/ir/model_stats.h"

#include <limits>

namespace qflow {

namespace {

// A shape where symbolic dimensions read as 1; nullopt when rank or a dimension is unknown.
struct ResolvedShape {
  Shape dims;
  bool had_symbolic = false;
};

std::optional<ResolvedShape> resolve(const Graph& graph, const Value* value) {
  if (!value) return std::nullopt;
  if (const Tensor* init = graph.initializer(value)) return ResolvedShape{init->shape(), false};
  if (!value->type || !value->type->shape) return std::nullopt;
  ResolvedShape out;
  for (const Dim& d : *value->type->shape) {
    if (d.value && *d.value >= 0) {
      out.dims.push_back(*d.value);
    } else if (!d.param.empty()) {
      out.dims.push_back(1);
      out.had_symbolic = true;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// Product of the given factors, nullopt on overflow.
std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t result = 1;
  for (int64_t f : factors) {
    if (f < 0) return std::nullopt;
    if (f != 0 && result > std::numeric_limits<int64_t>::max() / f) return std::nullopt;
    result *= f;
  }
  return result;
}

int64_t product_from(const Shape& shape, std::size_t first) {
  Shape tail(shape.begin() + static_cast<std::ptrdiff_t>(std::min(first, shape.size())), shape.end());
  return shape_numel(tail);
}

struct MacRule {
  const char* op_type;
  int data_input;    // X of a convolution, A of a matrix product
  int weight_input;  // W of a convolution, B of a matrix product
  bool transposed_conv;
  bool matrix;
};

constexpr MacRule kRules[] = {
    {"Conv", 0, 1, false, false},        {"ConvInteger", 0, 1, false, false},
    {"QLinearConv", 0, 3, false, false}, {"ConvTranspose", 0, 1, true, false},
    {"Gemm", 0, 1, false, true},         {"MatMul", 0, 1, false, true},
    {"MatMulInteger", 0, 1, false, true}, {"QLinearMatMul", 0, 3, false, true},
};

const MacRule* find_rule(const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return nullptr;
  for (const MacRule& rule : kRules)
    if (node.op_type() == rule.op_type) return &rule;
  return nullptr;
}

// MACs of one node, or nullopt when a needed shape is unknown; `symbolic` is set when a
// symbolic dimension was read as 1.
std::optional<int64_t> node_macs(const Graph& graph, const Node& node, const MacRule& rule, bool& symbolic) {
  auto x = resolve(graph, node.input(static_cast<std::size_t>(rule.data_input)));
  auto w = resolve(graph, node.input(static_cast<std::size_t>(rule.weight_input)));
  auto y = resolve(graph, node.output(0));
  if (!x || !w || !y) return std::nullopt;
  std::optional<int64_t> macs;
  if (!rule.matrix) {
    // W is [M, C/group, k...] (Conv) or [C, M/group, k...] (ConvTranspose): every output
    // element of Conv, every input element of ConvTranspose, meets prod(W.shape[1:]) weights.
    if (w->dims.size() < 2) return std::nullopt;
    const int64_t per_element = product_from(w->dims, 1);
    const int64_t elements = shape_numel(rule.transposed_conv ? x->dims : y->dims);
    macs = checked_product({elements, per_element});
    symbolic = symbolic || (rule.transposed_conv ? x->had_symbolic : y->had_symbolic);
  } else {
    if (x->dims.empty()) return std::nullopt;
    int64_t k = x->dims.back();
    if (node.op_type() == "Gemm" && node.attr_int("transA", 0) != 0 && x->dims.size() == 2) k = x->dims[0];
    macs = checked_product({shape_numel(y->dims), k});
    symbolic = symbolic || y->had_symbolic || x->had_symbolic;
  }
  return macs;
}

ValueStats value_stats(const Value* value) {
  if (!value) return {};
  return {value->name(), value->type};
}

}  // namespace

const std::vector<std::string>& mac_counted_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> out;
    for (const MacRule& rule : kRules) out.push_back(rule.op_type);
    return out;
  }();
  return ops;
}

Expected<ModelStats> compute_model_stats(const Model& model) {
  const Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  ModelStats stats;
  for (const Value* v : graph.runtime_inputs()) stats.inputs.push_back(value_stats(v));
  for (const Value* v : graph.outputs) stats.outputs.push_back(value_stats(v));

  for (const Value* v : graph.initializer_order()) {
    const Tensor* t = graph.initializer(v);
    ++stats.initializer_count;
    stats.parameter_count += t->numel();
    stats.parameter_bytes += static_cast<int64_t>(t->nbytes());
  }

  for (const Node* node : order) {
    NodeStats ns;
    ns.name = node->name();
    const bool default_domain = node->domain().empty() || node->domain() == "ai.onnx";
    ns.op_type = default_domain ? node->op_type() : node->domain() + "::" + node->op_type();
    for (const Value* out : node->outputs())
      if (out) ns.outputs.push_back(value_stats(out));
    ++stats.op_histogram[ns.op_type];
    if (const MacRule* rule = find_rule(*node)) {
      bool symbolic = false;
      ns.macs = node_macs(graph, *node, *rule, symbolic);
      if (ns.macs && *ns.macs <= std::numeric_limits<int64_t>::max() - stats.total_macs) {
        stats.total_macs += *ns.macs;
        stats.symbolic_dims_in_macs = stats.symbolic_dims_in_macs || symbolic;
      } else {
        ns.macs.reset();
        ++stats.macs_unknown_nodes;
      }
    }
    stats.nodes.push_back(std::move(ns));
  }
  return stats;
}

}  // namespace qflow
