// float16 models: computing ops run in float32 on widened inputs and round their outputs
// back (as ONNX Runtime's CPU provider does); ops that move elements keep them bit for bit.
#include <doctest/doctest.h>

#include <vector>

#include "framework/interpreter/executor.h"

using namespace qflow;

namespace {

Tensor half_tensor(const Shape& shape, const std::vector<float>& values) {
  Tensor t(DType::Float16, shape);
  for (std::size_t i = 0; i < values.size(); ++i) t.data<uint16_t>()[i] = float_to_half(values[i]);
  return t;
}

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(half_to_float(t.data<uint16_t>()[i]));
  return out;
}

}  // namespace

TEST_CASE("a float16 Conv with float16 weights computes in float32 and rounds its output to float16") {
  // x [1, 1, 1, 3] * w [2, 1, 1, 1] + b, then Relu, then Concat with x (a move: exact).
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs.push_back(x);
  Value* w = g.get_or_create_value("w");
  g.set_initializer(w, half_tensor({2, 1, 1, 1}, {0.1f, -3.0f}));
  Value* b = g.get_or_create_value("b");
  g.set_initializer(b, half_tensor({2}, {0.5f, 0.25f}));
  Value* conv = g.get_or_create_value("conv");
  Value* relu = g.get_or_create_value("relu");
  Value* joined = g.get_or_create_value("joined");
  g.add_node("Conv", {x, w, b}, {conv}, "conv");
  g.add_node("Relu", {conv}, {relu}, "relu");
  g.add_node("Concat", {relu, x}, {joined}, "concat")->set_attribute(Attribute::make_int("axis", 1));
  g.outputs.push_back(relu);
  g.outputs.push_back(joined);

  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor, executor.status().message());
  const std::vector<float> xs = {1.0f, 2.0f / 3.0f, -0.001f};
  const Tensor input = half_tensor({1, 1, 1, 3}, xs);
  auto result = (*executor)->run({{"x", input}});
  REQUIRE_MESSAGE(result, result.status().message());
  const Tensor& y = result->at("relu");
  REQUIRE(y.dtype() == DType::Float16);
  REQUIRE(y.shape() == Shape{1, 2, 1, 3});
  // Expected: float32 arithmetic on the float16 values, rounded once to float16.
  const std::vector<float> xh = as_floats(input);
  const float w0 = half_to_float(float_to_half(0.1f)), w1 = -3.0f;
  const float b0 = 0.5f, b1 = 0.25f;
  std::vector<float> expected;
  for (float v : xh) expected.push_back(half_to_float(float_to_half(std::max(0.0f, v * w0 + b0))));
  for (float v : xh) expected.push_back(half_to_float(float_to_half(std::max(0.0f, v * w1 + b1))));
  CHECK(as_floats(y) == expected);
  // Concat moved the float16 bits of x as they were.
  const Tensor& j = result->at("joined");
  REQUIRE(j.dtype() == DType::Float16);
  for (int64_t i = 0; i < 3; ++i) CHECK(j.data<uint16_t>()[6 + i] == input.data<uint16_t>()[i]);
}
