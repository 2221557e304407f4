// Tests of the integer-to-float pass on graphs spelled as ONNX Runtime's dynamic quantization
// writes them: the restored model equals the float model with the dequantized weights.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plugins/passes/integer_to_float.h"
#include "tests/builtin_plugins/pass_test_graphs.h"

namespace qflow {
namespace {

using namespace pass_test;

Value* tensor_value(Graph& g, const std::string& name, Tensor t) {
  Value* v = g.get_or_create_value(name);
  g.set_initializer(v, std::move(t));
  return v;
}

// (xq, xs, xzp) = DynamicQuantizeLinear(x), named after `prefix`.
std::vector<Value*> dynamic_quantize(Graph& g, Value* x, const std::string& prefix) {
  std::vector<Value*> outs = {g.get_or_create_value(prefix + "_quantized"), g.get_or_create_value(prefix + "_scale"),
                              g.get_or_create_value(prefix + "_zero_point")};
  g.add_node("DynamicQuantizeLinear", {x}, outs, prefix + "_dql");
  return outs;
}

// y = Mul(Cast<float>(integer), Mul(xs, ws)); `swap` writes both Muls' operands the other way round.
Value* rescale(Graph& g, Value* integer, Value* xs, Value* ws, const std::string& name, bool swap) {
  Value* cast = g.get_or_create_value(name + "_cast");
  g.add_node("Cast", {integer}, {cast}, name + "_cast")
      ->set_attribute(Attribute::make_int("to", static_cast<int64_t>(DType::Float32)));
  Value* scale = swap ? op(g, "Mul", {ws, xs}, name + "_scale") : op(g, "Mul", {xs, ws}, name + "_scale");
  return swap ? op(g, "Mul", {scale, cast}, name) : op(g, "Mul", {cast, scale}, name);
}

// Conv weights as ORT's dynamic quantization stores them: uint8 with one zero point.
const std::vector<uint8_t> kConvWeights = [] {
  std::vector<uint8_t> w(3 * 2 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return w;
}();
constexpr uint8_t kConvZeroPoint = 131;
constexpr float kConvScale = 0.0123f;

// x [1, 2, 5, 5] -> dynamic ConvInteger (pads 1) -> rescale -> Add(bias) -> y.
Model conv_model() {
  Model model = empty_model(13, {1, 2, 5, 5});
  Graph& g = *model.graph;
  auto xq = dynamic_quantize(g, g.find_value("x"), "x");
  Value* wq = tensor_value(g, "conv.weight_quantized", Tensor::from_vector<uint8_t>({3, 2, 3, 3}, kConvWeights));
  Value* wzp = tensor_value(g, "conv.weight_zero_point", Tensor::scalar<uint8_t>(kConvZeroPoint));
  Value* ws = tensor_value(g, "conv.weight_scale", Tensor::scalar<float>(kConvScale));
  Value* integer = g.get_or_create_value("conv_int");
  Node* conv = g.add_node("ConvInteger", {xq[0], wq, xq[2], wzp}, {integer}, "conv_quant");
  conv->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  Value* scaled = rescale(g, integer, xq[1], ws, "conv_scaled", false);
  Value* bias = initializer(g, "bias", {3, 1, 1}, {0.5f, -0.25f, 0.125f});
  set_output(g, op(g, "Add", {scaled, bias}, "y"), {1, 3, 5, 5});
  return model;
}

// The float model the restored one must equal: Conv with (Wq - zp) * scale, then the bias.
Model conv_reference() {
  Model model = empty_model(13, {1, 2, 5, 5});
  Graph& g = *model.graph;
  std::vector<float> w;
  for (uint8_t q : kConvWeights) w.push_back(static_cast<float>(int{q} - int{kConvZeroPoint}) * kConvScale);
  Value* weight = initializer(g, "w", {3, 2, 3, 3}, w);
  Value* conv_out = g.get_or_create_value("conv");
  g.add_node("Conv", {g.find_value("x"), weight}, {conv_out}, "conv")
      ->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  Value* bias = initializer(g, "bias", {3, 1, 1}, {0.5f, -0.25f, 0.125f});
  set_output(g, op(g, "Add", {conv_out, bias}, "y"), {1, 3, 5, 5});
  return model;
}

TEST_CASE("integer-to-float: a dynamically quantized Conv becomes the float Conv with dequantized weights") {
  Model model = conv_model();
  const Tensor x = random_tensor({1, 2, 5, 5}, 7, -2.0f, 3.0f);
  const Tensor integer_result = run_model(model, x);

  IntegerToFloat pass;
  auto result = pass.run(model);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->changed);
  CHECK(result->counters.at("convs-restored") == 1);
  CHECK(result->counters.at("matmuls-restored") == 0);
  const Graph& g = *model.graph;
  CHECK(op_types(g) == std::vector<std::string>{"Conv", "Add"});
  CHECK(g.validate().is_ok());
  const Node* conv = find_op(g, "Conv");
  REQUIRE(conv != nullptr);
  CHECK(conv->name() == "conv_quant");
  CHECK(conv->attr_ints("pads") == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(conv->input(1)->name() == "conv.weight");  // ORT's "_quantized" suffix dropped
  // The integer weights, their zero point, scale and the dynamic quantizer are gone.
  CHECK(g.initializer_order().size() == 2);

  const Tensor restored = run_model(model, x);
  CHECK(max_abs_difference(restored, run_model(conv_reference(), x)) == 0.0f);
  // The integer model differed from it only by rounding x to 8 bits.
  CHECK(max_abs_difference(restored, integer_result) < 0.15f);

  auto again = pass.run(model);
  REQUIRE(again.has_value());
  CHECK_FALSE(again->changed);
}

// x [4, 6] read by two MatMulIntegers through one DynamicQuantizeLinear; the first has int8
// weights with a zero point and a scale per output column, the second one of each.
Model matmul_model(bool expose_cast) {
  Model model = empty_model(13, {4, 6});
  Graph& g = *model.graph;
  auto xq = dynamic_quantize(g, g.find_value("x"), "x");
  std::vector<int8_t> b(6 * 5);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>(static_cast<int>(i * 53 % 255) - 127);
  Value* bq = tensor_value(g, "b_quantized", Tensor::from_vector<int8_t>({6, 5}, b));
  Value* bzp = tensor_value(g, "b_zero_point", Tensor::from_vector<int8_t>({5}, {0, 1, -2, 3, 0}));
  Value* bs = tensor_value(g, "b_scale", Tensor::from_vector<float>({5}, {0.01f, 0.02f, 0.005f, 0.03f, 0.015f}));
  Value* first = g.get_or_create_value("first_int");
  g.add_node("MatMulInteger", {xq[0], bq, xq[2], bzp}, {first}, "first_quant");
  Value* y1 = rescale(g, first, xq[1], bs, "y1", true);

  Value* cq = tensor_value(g, "c_quantized", Tensor::from_vector<int8_t>({6, 5}, std::vector<int8_t>(b.rbegin(), b.rend())));
  Value* cs = tensor_value(g, "c_scale", Tensor::scalar<float>(0.02f));
  Value* second = g.get_or_create_value("second_int");
  g.add_node("MatMulInteger", {xq[0], cq, xq[2]}, {second}, "second_quant");
  Value* y2 = rescale(g, second, xq[1], cs, "y2", false);
  Value* y = op(g, "Add", {y1, y2}, "y");
  set_output(g, y, {4, 5});
  if (expose_cast) {
    Value* cast = g.find_value("y1_cast");
    cast->type = float_type({4, 5});
    g.outputs.push_back(cast);
  }
  return model;
}

TEST_CASE("integer-to-float: MatMulIntegers with per-column and per-tensor weights, one shared DynamicQuantizeLinear") {
  Model model = matmul_model(false);
  const Tensor x = random_tensor({4, 6}, 11, -1.5f, 2.0f);
  const Tensor integer_result = run_model(model, x);
  IntegerToFloat pass;
  auto result = pass.run(model);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->counters.at("matmuls-restored") == 2);
  CHECK(op_types(*model.graph) == std::vector<std::string>{"MatMul", "MatMul", "Add"});
  CHECK(model.graph->validate().is_ok());

  // Column 1 of the first weight: (q - 1) * 0.02, computed here from the stored integers.
  const Node* first = nullptr;
  for (const auto& n : model.graph->nodes())
    if (n->name() == "first_quant") first = n.get();
  REQUIRE(first != nullptr);
  const Tensor* w = model.graph->initializer(first->input(1));
  REQUIRE(w != nullptr);
  CHECK(w->shape() == Shape{6, 5});
  const int q = static_cast<int>(1 * 53 % 255) - 127;  // element (0, 1)
  CHECK(w->data<float>()[1] == static_cast<float>(q - 1) * 0.02f);
  CHECK(max_abs_difference(run_model(model, x), integer_result) < 0.2f);
}

TEST_CASE("integer-to-float: a pattern whose intermediate value is read elsewhere stays") {
  Model model = matmul_model(true);
  IntegerToFloat pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  // The first MatMulInteger's Cast is a graph output; the second pattern is restored and
  // the shared DynamicQuantizeLinear stays for the first.
  CHECK(result->counters.at("matmuls-restored") == 1);
  CHECK(find_op(*model.graph, "MatMulInteger") != nullptr);
  CHECK(find_op(*model.graph, "DynamicQuantizeLinear") != nullptr);
  CHECK(model.graph->validate().is_ok());
}

TEST_CASE("integer-to-float: a model without integer ops is left alone") {
  Model model = empty_model(13, {2, 3});
  Graph& g = *model.graph;
  set_output(g, op(g, "Relu", {g.find_value("x")}, "y"), {2, 3});
  IntegerToFloat pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
}

}  // namespace
}  // namespace qflow
