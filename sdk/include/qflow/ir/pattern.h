// Pattern helpers for rewrite rules: producers by op type, private uses, scalar operands,
// product trees and the Clip(a * x + b, 0, U) chain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qflow/ir/graph.h"

namespace qflow::pattern {

// Relative tolerance for comparing a pattern's constants with their expected values.
inline constexpr double kRelativeTolerance = 1e-6;

// |actual - expected| <= 1e-6 * |expected| (absolute 1e-6 when expected is 0).
bool near(double actual, double expected);

// "" and "ai.onnx" are the same default domain.
bool is_default_domain(const Node& node);
bool is_graph_input(const Graph& graph, const Value* value);
bool is_graph_output(const Graph& graph, const Value* value);

// The value's producer when it is a default-domain node of `op_type`, else nullptr.
Node* producer_of(const Value* value, const std::string& op_type);

// True when the value is read only by `node` (possibly several times), is not a graph
// output, and so may disappear when the pattern containing `node` is rewritten.
bool used_only_by(const Graph& graph, const Value* value, const Node* node);
// The one node reading the value, when exactly one input slot reads it and it is not a
// graph output; nullptr otherwise.
Node* single_consumer(const Graph& graph, const Value* value);

// For a commutative binary node with one constant scalar operand: the other operand and
// the constant. Both operand orders are accepted.
struct ScalarOperand {
  Value* other = nullptr;
  double constant = 0.0;
};
std::optional<ScalarOperand> split_scalar_operand(const Graph& graph, const Node& node);

// A value expressed as scale * f1 * f2 * ... through Mul nodes and Div-by-constant nodes.
// The root's producer always belongs to `nodes`; deeper Mul/Div nodes join only when their
// output is used by nothing else, so every node listed is private to the product.
struct Product {
  std::vector<Value*> factors;  // non-constant leaves, in visiting order
  double scale = 1.0;
  std::vector<Node*> nodes;
};
// Fails when the root is not a Mul/Div or the tree holds more than `max_nodes` nodes.
std::optional<Product> flatten_product(const Graph& graph, Value* root, std::size_t max_nodes);

// clip_out = Clip(a * x + b, 0, upper), spelled Clip(Add(Mul(x, a) | Div(x, 1/a) | x, b)):
// x, a, b, upper and the private nodes (Clip, Add and the optional Mul/Div). The caller
// checks what surrounds it (the scale that maps upper to 1, the use of x).
struct ClipAffine {
  Value* x = nullptr;
  double alpha = 1.0;
  double beta = 0.0;
  double upper = 0.0;
  std::vector<Node*> nodes;
};
std::optional<ClipAffine> match_clip_affine(const Graph& graph, Value* clip_out, int64_t opset);

}  // namespace qflow::pattern
