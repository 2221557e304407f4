// Builders the unit tests share for hand-made models and quantization tables.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"

namespace qflow::test {

inline Dim d(int64_t v) { return Dim{v, "", ""}; }
inline Dim sym(const std::string& name) { return Dim{std::nullopt, name, ""}; }

inline ValueType float_type(std::vector<Dim> dims) {
  ValueType t;
  t.dtype = DType::Float32;
  t.shape = std::move(dims);
  return t;
}

// Symmetric parameters for a threshold: scale = threshold / qmax (127 or 32767), zero point 0.
inline QuantParams params(double threshold, DType dtype = DType::Int8) {
  QuantParams q;
  q.dtype = dtype;
  q.scale = {static_cast<float>(threshold / (dtype == DType::Int16 ? 32767.0 : 127.0))};
  q.zero_point = {0};
  q.threshold = threshold;
  q.method = "test";
  return q;
}

// amplitude * sin(step * i + 0.3) for i in [0, n): deterministic, varied test values.
inline std::vector<float> wave(std::size_t n, double step, double amplitude) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(amplitude * std::sin(step * static_cast<double>(i) + 0.3));
  return v;
}

// Deterministic pseudo-random values in [-1, 1) (a linear congruential sequence from `seed`).
inline std::vector<float> noise(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// A float32 tensor of `shape` holding `values`.
inline Tensor floats(Shape shape, const std::vector<float>& values) {
  return Tensor::from_vector<float>(std::move(shape), values);
}

// x[1,8] -> MatMul(W1[8,8]) "mm1" -> a -> Add(bias) "add" -> b -> MatMul(W2[8,4]) "mm2" -> y,
// bias and W2 from wave().
inline Model mlp_model(const Tensor& w1) {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "mlp";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(8)});
  g.inputs.push_back(x);
  Value* w1v = g.get_or_create_value("W1");
  g.set_initializer(w1v, w1);
  Value* bias = g.get_or_create_value("bias");
  g.set_initializer(bias, Tensor::from_vector<float>({8}, wave(8, 1.3, 0.2)));
  Value* w2 = g.get_or_create_value("W2");
  g.set_initializer(w2, Tensor::from_vector<float>({8, 4}, wave(32, 0.77, 0.9)));
  Value* a = g.get_or_create_value("a");
  Value* b = g.get_or_create_value("b");
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(4)});
  g.add_node("MatMul", {x, w1v}, {a}, "mm1");
  g.add_node("Add", {a, bias}, {b}, "add");
  g.add_node("MatMul", {b, w2}, {y}, "mm2");
  g.outputs.push_back(y);
  return model;
}

}  // namespace qflow::test
