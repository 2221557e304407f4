// Graph-building and comparison helpers shared by the pass tests.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "qflow/ir/graph.h"

namespace qflow::pass_test {

inline ValueType float_type(const Shape& shape) {
  ValueType t;
  t.dtype = DType::Float32;
  std::vector<Dim> dims;
  for (int64_t d : shape) dims.push_back(Dim{d, "", ""});
  t.shape = dims;
  return t;
}

inline Model empty_model(int64_t opset, const Shape& x_shape) {
  Model model;
  model.opset_imports = {{"", opset}};
  Value* x = model.graph->get_or_create_value("x");
  x->type = float_type(x_shape);
  model.graph->inputs = {x};
  return model;
}

inline Value* initializer(Graph& g, const std::string& name, const Shape& shape, const std::vector<float>& values) {
  Value* v = g.get_or_create_value(name);
  g.set_initializer(v, Tensor::from_vector<float>(shape, values));
  return v;
}

// A Constant node holding a scalar, the way exporters often spell constants.
inline Value* constant(Graph& g, const std::string& name, float value) {
  Value* v = g.get_or_create_value(name);
  Node* n = g.add_node("Constant", {}, {v}, name + "_node");
  n->set_attribute(Attribute::make_tensor("value", Tensor::scalar<float>(value)));
  return v;
}

inline Value* op(Graph& g, const std::string& op_type, const std::vector<Value*>& inputs, const std::string& out) {
  Value* v = g.get_or_create_value(out);
  g.add_node(op_type, inputs, {v}, out);
  return v;
}

inline void set_output(Graph& g, Value* y, const Shape& shape) {
  y->type = float_type(shape);
  g.outputs = {y};
}

inline std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type());
  return ops;
}

inline const Node* find_op(const Graph& g, const std::string& op_type) {
  for (const auto& n : g.nodes())
    if (n->op_type() == op_type) return n.get();
  return nullptr;
}

// Uniform values in [low, high) from a seeded generator: reproducible test inputs.
inline Tensor random_tensor(const Shape& shape, uint32_t seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_vector<float>(shape, values);
}

inline Tensor run_model(const Model& model, const Tensor& x) {
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = executor.value()->run({{"x", x}});
  REQUIRE(outputs.has_value());
  REQUIRE(outputs->size() == 1);
  return outputs->begin()->second;
}

inline float max_abs_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  float worst = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(a.data<float>()[i] - b.data<float>()[i]));
  return worst;
}

}  // namespace qflow::pass_test
