// Pattern-matching helpers shared by the fusion passes: constants, use checks, product trees, cleanup.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow::pattern {

// Relative tolerance for comparing a pattern's constants with their expected values.
inline constexpr double kRelativeTolerance = 1e-6;

// |actual - expected| <= 1e-6 * |expected| (absolute 1e-6 when expected is 0).
bool near(double actual, double expected);

// The tensor behind a value bound to an initializer or produced by a default-domain
// Constant node (value / value_float / value_floats); nullopt otherwise.
std::optional<Tensor> constant_tensor(const Graph& graph, const Value* value);
// As constant_tensor, for a one-element float tensor (scalar or shape [1], [1, 1], ...).
std::optional<double> scalar_constant(const Graph& graph, const Value* value);

// The value's producer when it is a default-domain node of `op_type`, else nullptr.
Node* producer_of(const Value* value, const std::string& op_type);

// True when the value is read only by `node` (possibly several times), is not a graph
// output, and so may disappear when the pattern containing `node` is fused.
bool used_only_by(const Graph& graph, const Value* value, const Node* node);
bool is_graph_output(const Graph& graph, const Value* value);

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

// Clip's [min, max] from attributes (opset < 11) or constant inputs (opset >= 11); missing
// bounds are infinite. nullopt when a bound input is not a constant scalar.
std::optional<std::pair<double, double>> clip_bounds(const Graph& graph, const Node& clip, int64_t opset);

// Removes `nodes`, then the Constant nodes and initializers that only they used (graph
// inputs and outputs stay). Order-independent: the nodes may feed each other. Every node
// destroyed is added to `removed`, so a scan over a node_snapshot can skip it.
void erase_nodes(Graph& graph, const std::vector<Node*>& nodes, std::set<const Node*>& removed);
// Removes the Constant nodes and initializers among `values` that nothing uses any more.
void release_constants(Graph& graph, const std::vector<Value*>& values, std::set<const Node*>& removed);

// Turns `node` into `op_type`/`domain` with the given inputs and no attributes, keeping its
// name, outputs and place in the node order (so the graph stays topologically sorted).
// Returns the former inputs, for release_constants.
std::vector<Value*> rewrite_node(Node& node, const std::string& op_type, const std::string& domain, const std::vector<Value*>& inputs);

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

// Node pointers in insertion order, for passes that edit the graph while scanning it.
std::vector<Node*> node_snapshot(const Graph& graph);

}  // namespace qflow::pattern
