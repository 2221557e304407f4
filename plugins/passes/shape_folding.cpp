// ShapeFolding: static shapes to constants, then the shape arithmetic on them.
#include "shape_folding.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "constant_folding.h"

namespace qflow {

namespace {

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

std::optional<Shape> static_shape_of(const Graph& graph, const Value* v) {
  if (!v) return std::nullopt;
  if (const Tensor* t = graph.initializer(v)) {
    // A graph input may override its initializer with another shape.
    if (std::find(graph.inputs.begin(), graph.inputs.end(), v) == graph.inputs.end()) return t->shape();
  }
  if (v->type) return v->type->static_shape();
  return std::nullopt;
}

// Shape's output for opset 15+ start/end (negative counts from the back, clamped).
Tensor shape_slice(const Shape& shape, const Node& node, int64_t opset) {
  const auto rank = static_cast<int64_t>(shape.size());
  int64_t start = opset >= 15 ? node.attr_int("start", 0) : 0;
  int64_t end = opset >= 15 ? node.attr_int("end", rank) : rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(shape[static_cast<std::size_t>(i)]);
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(dims.size())}, dims);
}

// Replaces Shape/Size nodes over static shapes; returns how many.
int64_t fold_shape_nodes(Model& model, std::vector<Value*>& orphan_candidates) {
  Graph& graph = *model.graph;
  std::vector<Node*> targets;
  for (const auto& node : graph.nodes())
    if (is_default_domain(*node) && (node->op_type() == "Shape" || node->op_type() == "Size"))
      targets.push_back(node.get());
  int64_t folded = 0;
  for (Node* node : targets) {
    Value* out = node->output(0);
    const std::optional<Shape> shape = static_shape_of(graph, node->input(0));
    if (!out || !shape) continue;
    if (std::find(graph.outputs.begin(), graph.outputs.end(), out) != graph.outputs.end()) continue;
    const int64_t numel = shape_numel(*shape);
    if (numel < 0) continue;  // a negative or overflowing declared dimension is not a shape to trust
    Tensor value = node->op_type() == "Shape" ? shape_slice(*shape, *node, model.opset(""))
                                              : Tensor::scalar<int64_t>(numel);
    orphan_candidates.push_back(node->input(0));
    graph.remove_node(node);
    if (!out->uses().empty()) graph.set_initializer(out, std::move(value));
    ++folded;
  }
  return folded;
}

// Arithmetic and tests, which belong to shapes only when they compute on integers (or on the
// booleans such tests give).
bool is_integer_arithmetic(const Node& node) {
  static const std::set<std::string> kOps = {"Add",  "Sub",     "Mul", "Div",         "Equal",
                                             "Less", "Greater", "Not", "LessOrEqual", "GreaterOrEqual"};
  return kOps.count(node.op_type()) != 0;
}

bool is_shape_arithmetic(const Node& node) {
  // If: a branch chosen by a shape test (a batch of 1 squeezed) is inlined once the test folds.
  static const std::set<std::string> kOps = {"Gather",  "Slice",    "Concat",   "Cast",  "Unsqueeze", "Squeeze",
                                             "Reshape", "Identity", "Constant", "Shape", "Size",      "If"};
  if (!is_default_domain(node)) return false;
  return kOps.count(node.op_type()) != 0 || is_integer_arithmetic(node);
}

}  // namespace

ComponentInfo ShapeFolding::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "shape-folding";
  info.summary = "Replace Shape/Size of statically shaped values by constants and fold the shape arithmetic on them";
  return info;
}

Expected<std::unique_ptr<Pass>> ShapeFolding::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<ShapeFolding>());
}

bool ShapeFolding::matches(const Model& model) const {
  if (!model.graph) return false;
  return std::any_of(model.graph->nodes().begin(), model.graph->nodes().end(), [](const auto& node) {
    return node->op_type() == "Shape" || node->op_type() == "Size";
  });
}

Expected<PassResult> ShapeFolding::run_impl(Model& model) {
  Graph& graph = *model.graph;
  std::vector<Value*> orphan_candidates;
  const int64_t shapes = fold_shape_nodes(model, orphan_candidates);
  int64_t initializers_removed = folding::remove_orphaned_initializers(graph, orphan_candidates);
  folding::FoldStats stats;
  if (shapes > 0) {
    const auto integer_only = [&graph](const Node& node) {
      if (!is_shape_arithmetic(node)) return false;
      if (!is_integer_arithmetic(node)) return true;
      for (const Value* in : node.inputs()) {
        const Tensor* t = in ? graph.initializer(in) : nullptr;
        if (!t || !(is_integer(t->dtype()) || t->dtype() == DType::Bool)) return false;
      }
      return true;
    };
    QFLOW_ASSIGN_OR_RETURN(stats, folding::fold_constants(model, kMaxFoldedBytes, integer_only));
    initializers_removed += stats.initializers_removed;
    graph.prune_unused_values();
  }
  PassResult result;
  result.counters["shapes-folded"] = shapes;
  result.counters["nodes-folded"] = stats.nodes_folded;
  result.counters["initializers-removed"] = initializers_removed;
  result.counters["if-inlined"] = stats.ifs_inlined;
  result.changed = shapes > 0;
  result.types_stale = stats.ifs_inlined > 0;
  return result;
}

}  // namespace qflow
