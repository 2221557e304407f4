// Reading constants: scalar constants and Clip bounds, from a graph or from any other source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Where constant values come from: the tensor `value` holds at every run, or nullopt. The
// passes read a graph (graph_constants); the interpreter also knows the values it folded.
using ConstantSource = std::function<std::optional<Tensor>(const Value* value)>;

// The tensor behind a value that no caller can change: an initializer that is not also a
// graph input (an old-IR model lists initializers as inputs a caller may feed), or the
// output of a default-domain Constant node (value, value_float, value_floats, value_int,
// value_ints). nullopt for anything else.
std::optional<Tensor> graph_constant(const Graph& graph, const Value* value);
ConstantSource graph_constants(const Graph& graph);

// A one-element floating-point constant (shape [], [1], [1, 1], ...).
struct ScalarConstant {
  double value = 0.0;
  DType dtype = DType::Undefined;
  std::size_t rank = 0;  // a broadcast operand of this rank can raise its partner's rank
};
std::optional<ScalarConstant> scalar_constant(const Value* value, const ConstantSource& constants);
// The graph's scalar constant `value` holds, as a double.
std::optional<double> scalar_constant(const Graph& graph, const Value* value);

// Clip's bounds: attributes `min`/`max` before opset 11, constant inputs 1 and 2 from then
// on. An absent bound is the float range's end (lowest / max), as the Clip kernel takes it.
// nullopt when a bound input is present but not a one-element float constant.
struct ClipBounds {
  double min = 0.0;
  double max = 0.0;
};
std::optional<ClipBounds> clip_bounds(const Node& clip, int64_t opset, const ConstantSource& constants);
std::optional<ClipBounds> clip_bounds(const Graph& graph, const Node& clip, int64_t opset);

}  // namespace qflow
