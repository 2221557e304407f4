// Tests of the strip-qdq pass: activation pairs removed, constants dequantized exactly, output
// names kept, and the stripped model computing the float model the QDQ model simulates.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "plugins/passes/strip_qdq.h"
#include "tests/builtin_plugins/pass_test_graphs.h"

namespace qflow {
namespace {

using namespace pass_test;

Value* ints(Graph& g, const std::string& name, DType dtype, const Shape& shape, const std::vector<int64_t>& v) {
  Value* value = g.get_or_create_value(name);
  g.set_initializer(value, Tensor::from_vector<int64_t>(shape, v).cast(dtype));
  return value;
}

// Q -> DQ on `in` with the given scale/zero point initializers; returns the DQ output.
Value* qdq(Graph& g, Value* in, Value* scale, Value* zp, const std::string& out) {
  Value* q = g.get_or_create_value(out + "_q");
  g.add_node("QuantizeLinear", {in, scale, zp}, {q}, out + "_quant");
  Value* dq = g.get_or_create_value(out);
  g.add_node("DequantizeLinear", {q, scale, zp}, {dq}, out + "_dequant");
  return dq;
}

// x [1,1,2,2] -> QDQ(uint8) -> Conv1x1(W int8 per-axis DQ, B int32 DQ) -> Relu -> QDQ(int8)
//   -> Conv1x1(W fake-quantized float) -> QDQ(int8) -> y
Model qdq_model() {
  Model model = empty_model(13, {1, 1, 2, 2});
  Graph& g = *model.graph;
  Value* x = qdq(g, g.inputs[0], initializer(g, "x_scale", {}, {0.05f}), ints(g, "x_zp", DType::UInt8, {}, {128}), "xdq");
  Value* w1 = g.get_or_create_value("w1");
  g.add_node("DequantizeLinear",
             {ints(g, "w1_q", DType::Int8, {2, 1, 1, 1}, {3, -2}), initializer(g, "w1_scale", {2}, {0.05f, 0.1f}),
              ints(g, "w1_zp", DType::Int8, {2}, {1, -1})},
             {w1}, "w1_dequant")
      ->set_attribute(Attribute::make_int("axis", 0));
  Value* b1 = g.get_or_create_value("b1");
  g.add_node("DequantizeLinear",
             {ints(g, "b1_q", DType::Int32, {2}, {2, -4}), initializer(g, "b1_scale", {2}, {0.025f, 0.0125f})}, {b1},
             "b1_dequant")
      ->set_attribute(Attribute::make_int("axis", 0));
  Value* conv1 = op(g, "Conv", {x, w1, b1}, "conv1");
  Value* relu = op(g, "Relu", {conv1}, "relu");
  Value* r = qdq(g, relu, initializer(g, "r_scale", {}, {0.01f}), ints(g, "r_zp", DType::Int8, {}, {0}), "rdq");
  Value* w2_scale = initializer(g, "w2_scale", {}, {0.1f});
  Value* w2_zp = ints(g, "w2_zp", DType::Int8, {}, {0});
  Value* w2 = qdq(g, initializer(g, "w2_float", {1, 2, 1, 1}, {0.3f, 20.0f}), w2_scale, w2_zp, "w2");
  Value* conv2 = op(g, "Conv", {r, w2}, "conv2");
  Value* y = g.get_or_create_value("y");
  Value* yq = g.get_or_create_value("yq");
  Value* y_scale = initializer(g, "y_scale", {}, {0.01f});
  Value* y_zp = ints(g, "y_zp", DType::Int8, {}, {0});
  g.add_node("QuantizeLinear", {conv2, y_scale, y_zp}, {yq}, "y_quant");
  g.add_node("DequantizeLinear", {yq, y_scale, y_zp}, {y}, "y_dequant");
  set_output(g, y, {1, 1, 2, 2});
  return model;
}

const Tensor& initializer_named(const Graph& g, const std::string& name) {
  const Value* v = g.find_value(name);
  REQUIRE(v);
  const Tensor* t = g.initializer(v);
  REQUIRE(t);
  return *t;
}

TEST_CASE("strip-qdq: removes activation pairs, dequantizes weights and biases, keeps the output name") {
  Model model = qdq_model();
  StripQdq pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("pairs-removed") == 3);
  CHECK(result->counters.at("weights-dequantized") == 3);
  const Graph& g = *model.graph;
  REQUIRE(g.validate().is_ok());
  CHECK(op_types(g) == std::vector<std::string>{"Conv", "Relu", "Conv"});
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0]->name() == "y");
  CHECK(g.outputs[0]->producer()->name() == "conv2");
  CHECK(find_op(g, "Conv")->input(0) == g.inputs[0]);
  CHECK(find_op(g, "Relu")->output(0)->uses().at(0).first->op_type() == "Conv");

  // (q - zp) * scale in float32, per output channel.
  const Tensor& w1 = initializer_named(g, "w1");
  CHECK(w1.dtype() == DType::Float32);
  CHECK(w1.shape() == Shape{2, 1, 1, 1});
  CHECK(w1.data<float>()[0] == 2.0f * 0.05f);
  CHECK(w1.data<float>()[1] == -1.0f * 0.1f);
  const Tensor& b1 = initializer_named(g, "b1");
  CHECK(b1.data<float>()[0] == 2.0f * 0.025f);
  CHECK(b1.data<float>()[1] == -4.0f * 0.0125f);
  // Fake-quantized float weight: round_half_even(w / 0.1) saturated to int8, times 0.1.
  const Tensor& w2 = initializer_named(g, "w2");
  CHECK(w2.data<float>()[0] == std::nearbyint(0.3f / 0.1f) * 0.1f);
  CHECK(w2.data<float>()[1] == 127.0f * 0.1f);  // 20 / 0.1 = 200 saturates

  // Only the three float initializers are left.
  CHECK(g.initializer_order().size() == 3);
  CHECK(g.find_value("w1_q") == nullptr);
  CHECK(g.find_value("x_scale") == nullptr);

  // The stripped model computes the float model by hand.
  const Tensor x = Tensor::from_vector<float>({1, 1, 2, 2}, {-0.5f, 0.25f, 0.7f, -1.0f});
  const Tensor y = run_model(model, x);
  for (int64_t i = 0; i < 4; ++i) {
    const float xi = x.data<float>()[i];
    const float r0 = std::max(0.0f, w1.data<float>()[0] * xi + b1.data<float>()[0]);
    const float r1 = std::max(0.0f, w1.data<float>()[1] * xi + b1.data<float>()[1]);
    CHECK(y.data<float>()[i] == doctest::Approx(w2.data<float>()[0] * r0 + w2.data<float>()[1] * r1).epsilon(1e-6));
  }
}

TEST_CASE("strip-qdq: the stripped model stays within quantization error of the QDQ model") {
  Model qdq = qdq_model();
  Model stripped = qdq_model();
  StripQdq pass;
  REQUIRE(pass.run(stripped).has_value());
  // x on the input grid (multiples of 0.05), so the input pair is exact; the rest rounds
  // to half a step: 0.005 at relu (times the largest weight 12.7) and 0.005 at the output.
  const Tensor x = Tensor::from_vector<float>({1, 1, 2, 2}, {-0.5f, 0.25f, 0.7f, -1.0f});
  const float diff = max_abs_difference(run_model(qdq, x), run_model(stripped, x));
  CHECK(diff > 0.0f);
  CHECK(diff <= 0.005f * (1.0f + 12.7f + 0.3f) + 1e-6f);
}

TEST_CASE("strip-qdq: a graph input quantized straight to the output becomes an Identity") {
  Model model = empty_model(13, {4});
  Graph& g = *model.graph;
  Value* scale = initializer(g, "s", {}, {0.5f});
  Value* q = g.get_or_create_value("q");
  g.add_node("QuantizeLinear", {g.inputs[0], scale}, {q}, "quant");
  Value* y = g.get_or_create_value("y");
  g.add_node("DequantizeLinear", {q, scale}, {y}, "dequant");
  set_output(g, y, {4});
  StripQdq pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("pairs-removed") == 1);
  CHECK(op_types(g) == std::vector<std::string>{"Identity"});
  CHECK(g.outputs[0]->name() == "y");
  CHECK(g.outputs[0]->producer()->input(0) == g.inputs[0]);
  CHECK(g.initializer_order().empty());
  REQUIRE(g.validate().is_ok());
  const Tensor x = Tensor::from_vector<float>({4}, {0.3f, -7.0f, 1e6f, 0.0f});
  CHECK(run_model(model, x).bitwise_equal(x));
}

TEST_CASE("strip-qdq: one QuantizeLinear feeding two DequantizeLinear, and a model without QDQ") {
  Model model = empty_model(13, {4});
  Graph& g = *model.graph;
  Value* scale = initializer(g, "s", {}, {0.5f});
  Value* zp = ints(g, "zp", DType::Int8, {}, {0});
  Value* q = g.get_or_create_value("q");
  g.add_node("QuantizeLinear", {op(g, "Relu", {g.inputs[0]}, "r"), scale, zp}, {q}, "quant");
  Value* a = g.get_or_create_value("a");
  g.add_node("DequantizeLinear", {q, scale, zp}, {a}, "dq_a");
  Value* b = g.get_or_create_value("b");
  g.add_node("DequantizeLinear", {q, scale, zp}, {b}, "dq_b");
  set_output(g, op(g, "Add", {op(g, "Neg", {a}, "n"), b}, "y"), {4});
  StripQdq pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("pairs-removed") == 2);
  CHECK(op_types(g) == std::vector<std::string>{"Relu", "Neg", "Add"});
  CHECK(find_op(g, "Add")->input(1)->name() == "r");
  REQUIRE(g.validate().is_ok());

  Model plain = empty_model(13, {4});
  set_output(*plain.graph, op(*plain.graph, "Relu", {plain.graph->inputs[0]}, "y"), {4});
  auto untouched = pass.run(plain);
  REQUIRE(untouched.has_value());
  CHECK_FALSE(untouched->changed);
  CHECK(StripQdq::info().name == "strip-qdq");
}

}  // namespace
}  // namespace qflow
