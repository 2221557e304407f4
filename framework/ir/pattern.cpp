// Pattern helpers for rewrite rules.
#include "qflow/ir/pattern.h"

#include <algorithm>
#include <cmath>

#include "qflow/ir/constants.h"

namespace qflow::pattern {

namespace {

bool flatten_into(const Graph& graph, Value* value, const Node* parent, std::size_t max_nodes, Product& product) {
  Node* node = value->producer();
  const bool expandable = node && is_default_domain(*node) &&
                          (node->op_type() == "Mul" || node->op_type() == "Div") && node->inputs().size() == 2 &&
                          (parent == nullptr || used_only_by(graph, value, parent));
  if (!expandable) {
    product.factors.push_back(value);
    return true;
  }
  if (product.nodes.size() >= max_nodes) return false;
  product.nodes.push_back(node);
  Value* a = node->input(0);
  Value* b = node->input(1);
  if (!a || !b) return false;
  if (node->op_type() == "Div") {
    // Only division by a constant is a product; x / y with y computed is not.
    const std::optional<double> divisor = scalar_constant(graph, b);
    if (!divisor || *divisor == 0.0) return false;
    product.scale /= *divisor;
    return flatten_into(graph, a, node, max_nodes, product);
  }
  for (Value* operand : {a, b}) {
    if (const std::optional<double> c = scalar_constant(graph, operand)) {
      product.scale *= *c;
    } else if (!flatten_into(graph, operand, node, max_nodes, product)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool near(double actual, double expected) {
  const double tolerance = expected == 0.0 ? kRelativeTolerance : kRelativeTolerance * std::fabs(expected);
  return std::fabs(actual - expected) <= tolerance;
}

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool is_graph_input(const Graph& graph, const Value* value) {
  return std::find(graph.inputs.begin(), graph.inputs.end(), value) != graph.inputs.end();
}

bool is_graph_output(const Graph& graph, const Value* value) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), value) != graph.outputs.end();
}

Node* producer_of(const Value* value, const std::string& op_type) {
  Node* node = value ? value->producer() : nullptr;
  return node && node->op_type() == op_type && is_default_domain(*node) ? node : nullptr;
}

bool used_only_by(const Graph& graph, const Value* value, const Node* node) {
  if (!value || value->uses().empty() || is_graph_output(graph, value)) return false;
  return std::all_of(value->uses().begin(), value->uses().end(), [node](const auto& use) { return use.first == node; });
}

Node* single_consumer(const Graph& graph, const Value* value) {
  if (!value || value->uses().size() != 1 || is_graph_output(graph, value)) return nullptr;
  return value->uses().front().first;
}

std::optional<ScalarOperand> split_scalar_operand(const Graph& graph, const Node& node) {
  if (node.inputs().size() != 2 || !node.input(0) || !node.input(1)) return std::nullopt;
  if (const std::optional<double> c = scalar_constant(graph, node.input(1))) return ScalarOperand{node.input(0), *c};
  if (const std::optional<double> c = scalar_constant(graph, node.input(0))) return ScalarOperand{node.input(1), *c};
  return std::nullopt;
}

std::optional<Product> flatten_product(const Graph& graph, Value* root, std::size_t max_nodes) {
  Node* node = root ? root->producer() : nullptr;
  if (!node || !is_default_domain(*node) || (node->op_type() != "Mul" && node->op_type() != "Div")) return std::nullopt;
  Product product;
  if (!flatten_into(graph, root, nullptr, max_nodes, product)) return std::nullopt;
  return product;
}

std::optional<ClipAffine> match_clip_affine(const Graph& graph, Value* clip_out, int64_t opset) {
  Node* clip = producer_of(clip_out, "Clip");
  if (!clip || !clip->input(0)) return std::nullopt;
  const std::optional<ClipBounds> bounds = clip_bounds(graph, *clip, opset);
  if (!bounds || !near(bounds->min, 0.0) || !std::isfinite(bounds->max) || bounds->max <= 0.0) return std::nullopt;
  Node* add = producer_of(clip->input(0), "Add");
  if (!add || !used_only_by(graph, clip->input(0), clip)) return std::nullopt;
  const std::optional<ScalarOperand> shift = split_scalar_operand(graph, *add);
  if (!shift) return std::nullopt;
  ClipAffine match;
  match.beta = shift->constant;
  match.upper = bounds->max;
  match.nodes = {clip, add};
  match.x = shift->other;
  Node* scale = producer_of(shift->other, "Mul");
  if (!scale) scale = producer_of(shift->other, "Div");
  if (scale && used_only_by(graph, shift->other, add)) {
    if (scale->op_type() == "Mul") {
      if (const std::optional<ScalarOperand> factor = split_scalar_operand(graph, *scale)) {
        match.x = factor->other;
        match.alpha = factor->constant;
        match.nodes.push_back(scale);
      }
    } else if (const std::optional<double> divisor = scalar_constant(graph, scale->input(1));
               divisor && *divisor != 0.0 && scale->input(0)) {
      match.x = scale->input(0);
      match.alpha = 1.0 / *divisor;
      match.nodes.push_back(scale);
    }
  }
  return match;
}

}  // namespace qflow::pattern
