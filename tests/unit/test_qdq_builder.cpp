// Unit tests for the QDQ model builder, scale alignment and bias correction (framework/quant).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "framework/data/npy.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/stage_util.h"
#include "framework/quant/bias_correction.h"
#include "framework/quant/output_cosine.h"
#include "framework/quant/qdq_builder.h"
#include "framework/quant/scale_alignment.h"
#include "framework/interpreter/executor.h"

#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;
using test::params;

// x[1,2,3,3] -> Conv(W[3,2,1,1], B[3]) -> c -> Relu -> r; Concat(r, c) -> cat -> Flatten -> f
// -> Gemm(Wg[54,4], Bg[4]) -> y (graph output).
Model concat_model(int64_t opset = 13) {
  Model model;
  model.opset_imports.push_back({"", opset});
  Graph& g = *model.graph;
  g.name = "concat";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(2), d(3), d(3)});
  g.inputs.push_back(x);
  Value* w = g.get_or_create_value("W");
  g.set_initializer(w, Tensor::from_vector<float>({3, 2, 1, 1}, {0.3f, -1.0f, 0.25f, 0.1f, 0.0f, 0.0f}));
  Value* b = g.get_or_create_value("B");
  g.set_initializer(b, Tensor::from_vector<float>({3}, {0.1f, -0.2f, 0.05f}));
  std::vector<float> wg(54 * 4);
  for (std::size_t i = 0; i < wg.size(); ++i) wg[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  Value* gw = g.get_or_create_value("Wg");
  g.set_initializer(gw, Tensor::from_vector<float>({54, 4}, wg));
  Value* gb = g.get_or_create_value("Bg");
  g.set_initializer(gb, Tensor::from_vector<float>({4}, {0.5f, -0.5f, 0.25f, 0.0f}));
  Value* c = g.get_or_create_value("c");
  Value* r = g.get_or_create_value("r");
  Value* cat = g.get_or_create_value("cat");
  Value* f = g.get_or_create_value("f");
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(4)});
  g.add_node("Conv", {x, w, b}, {c}, "conv");
  g.add_node("Relu", {c}, {r}, "relu");
  g.add_node("Concat", {r, c}, {cat}, "concat")->set_attribute(Attribute::make_int("axis", 1));
  g.add_node("Flatten", {cat}, {f}, "flatten");
  g.add_node("Gemm", {f, gw, gb}, {y}, "fc");
  g.outputs.push_back(y);
  return model;
}

QuantTable concat_table() {
  return {{"x", params(1.0)}, {"c", params(4.0)}, {"r", params(3.0)},
          {"cat", params(3.5)}, {"f", params(3.5)}, {"y", params(10.0)}};
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}

const Node* producer_of(const Graph& g, const std::string& value) {
  const Value* v = g.find_value(value);
  return v ? v->producer() : nullptr;
}

Tensor input_tensor() {
  std::vector<float> x(18);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::cos(0.9 * static_cast<double>(i)));
  return Tensor::from_vector<float>({1, 2, 3, 3}, x);
}

std::vector<float> run_output(const Model& model, const Tensor& x, const std::string& output = "y") {
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor.has_value(), executor.status().message());
  auto outputs = (*executor)->run({{"x", x}});
  REQUIRE_MESSAGE(outputs.has_value(), outputs.status().message());
  const Tensor& t = outputs->at(output);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// The model after an export/import round trip, as the next stage would read it.
Model round_trip(const Model& model) {
  auto bytes = export_onnx_bytes(model);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.status().message());
  auto back = import_onnx_bytes(*bytes, "round trip");
  REQUIRE_MESSAGE(back.has_value(), back.status().message());
  return std::move(*back);
}

}  // namespace

TEST_CASE("qdq: weight channel axis per op") {
  Graph g;
  Tensor w4(DType::Float32, {8, 4, 3, 3});
  Tensor w2(DType::Float32, {16, 10});
  Tensor w3(DType::Float32, {2, 16, 10});
  Node* conv = g.add_node("Conv", {}, {}, "conv");
  Node* deconv = g.add_node("ConvTranspose", {}, {}, "deconv");
  Node* gemm = g.add_node("Gemm", {}, {}, "gemm");
  Node* gemm_t = g.add_node("Gemm", {}, {}, "gemm_t");
  gemm_t->set_attribute(Attribute::make_int("transB", 1));
  Node* matmul = g.add_node("MatMul", {}, {}, "mm");
  Node* add = g.add_node("Add", {}, {}, "add");
  CHECK(*weight_channel_axis(*conv, w4) == 0);
  CHECK(*weight_channel_axis(*deconv, w4) == 1);
  CHECK(*weight_channel_axis(*gemm, w2) == 1);
  CHECK(*weight_channel_axis(*gemm_t, w2) == 0);
  CHECK(*weight_channel_axis(*matmul, w2) == 1);
  CHECK(*weight_channel_axis(*matmul, w3) == 2);
  CHECK_FALSE(weight_channel_axis(*add, w2).has_value());
  CHECK_FALSE(weight_channel_axis(*conv, w2).has_value());
}

TEST_CASE("qdq: symmetric weights round half to even and clip to +-qmax") {
  // Channel 0's largest magnitude is 127, so its scale is exactly 1 and ties are visible.
  const Tensor w = Tensor::from_vector<float>({2, 4}, {127.0f, 2.5f, 3.5f, -2.5f, 0.3f, -1.0f, 0.25f, 0.1f});
  auto q = quantize_weight(w, 0, DType::Int8);
  REQUIRE(q.has_value());
  REQUIRE(q->scale.size() == 2);
  CHECK(q->scale[0] == 1.0f);
  CHECK(q->scale[1] == static_cast<float>(1.0 / 127.0));
  const int8_t* v = q->values.data<int8_t>();
  CHECK(std::vector<int>(v, v + 8) == std::vector<int>{127, 2, 4, -2, 38, -127, 32, 13});

  auto per_tensor = quantize_weight(w, -1, DType::Int8);
  REQUIRE(per_tensor.has_value());
  CHECK(per_tensor->scale == std::vector<float>{1.0f});
  CHECK(per_tensor->values.data<int8_t>()[4] == 0);  // 0.3 on a scale of 1

  auto wide = quantize_weight(w, 0, DType::Int16);
  REQUIRE(wide.has_value());
  CHECK(wide->scale[0] == static_cast<float>(127.0 / 32767.0));
  CHECK(wide->values.data<int16_t>()[0] == 32767);
  CHECK(wide->values.data<int16_t>()[5] == -32767);

  const Tensor back = dequantize_weight(*q);
  CHECK(back.data<float>()[5] == doctest::Approx(-1.0));
  CHECK(back.data<float>()[4] == doctest::Approx(38.0 / 127.0));
  CHECK_FALSE(quantize_weight(w, 0, DType::UInt8).has_value());
}

TEST_CASE("qdq: a channel of vanishing weights gets the floor scale 2^-60, zeros and all") {
  const Tensor w = Tensor::from_vector<float>({2, 2}, {1e-30f, -1e-31f, 0.0f, 0.0f});
  auto q = quantize_weight(w, 0, DType::Int8);
  REQUIRE(q.has_value());
  CHECK(q->scale[0] == 0x1p-60f);  // 1e-30 / 127 would make s_in * s_w underflow float32
  CHECK(q->scale[1] == static_cast<float>(1.0 / 127.0));  // all zero: any scale, 1/qmax
  const int8_t* v = q->values.data<int8_t>();
  CHECK(std::vector<int>(v, v + 4) == std::vector<int>{0, 0, 0, 0});
}

TEST_CASE("qdq: Concat shares the largest threshold, pass-through ops propagate") {
  Model model = concat_model();
  auto aligned = align_scales(*model.graph, concat_table(), nullptr);
  REQUIRE_MESSAGE(aligned.has_value(), aligned.status().message());
  const float shared = static_cast<float>(4.0 / 127.0);
  CHECK(aligned->at("c").scale[0] == shared);    // Concat input also read by Relu
  CHECK(aligned->at("r").scale[0] == shared);    // Relu output inside the Concat group
  CHECK(aligned->at("cat").scale[0] == shared);
  CHECK(aligned->at("cat").threshold == 4.0);
  CHECK(aligned->at("f").scale[0] == shared);    // Flatten passes the Concat's params on
  CHECK(aligned->at("x").scale[0] == static_cast<float>(1.0 / 127.0));
  CHECK(aligned->at("y").scale[0] == static_cast<float>(10.0 / 127.0));

  QuantTable mixed = concat_table();
  mixed["r"] = params(3.0, DType::Int16);
  auto refused = align_scales(*model.graph, mixed, nullptr);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message().find("share one quantized type") != std::string::npos);
}

TEST_CASE("qdq: asymmetric Concat members share the union of their ranges") {
  Graph g;
  Value* a = g.get_or_create_value("a");
  Value* b = g.get_or_create_value("b");
  Value* c = g.get_or_create_value("c");
  g.inputs = {a, b};
  g.add_node("Concat", {a, b}, {c}, "concat")->set_attribute(Attribute::make_int("axis", 0));
  g.outputs.push_back(c);
  auto entry = [](float scale, int64_t zp) {
    QuantParams q;
    q.dtype = DType::UInt8;
    q.scale = {scale};
    q.zero_point = {zp};
    q.threshold = 1.0;
    q.method = "test";
    return q;
  };
  // a covers [0, 2.55], b [-2.56, 2.54], c [-1, 1.55]: the union is [-2.56, 2.55].
  const QuantTable table = {{"a", entry(0.01f, 0)}, {"b", entry(0.02f, 128)}, {"c", entry(0.01f, 100)}};
  auto aligned = align_scales(g, table, nullptr);
  REQUIRE_MESSAGE(aligned.has_value(), aligned.status().message());
  const double lo = (0.0 - 128.0) * static_cast<double>(0.02f), hi = 255.0 * static_cast<double>(0.01f);
  const float scale = static_cast<float>((hi - lo) / 255.0);
  for (const char* name : {"a", "b", "c"}) {
    CAPTURE(name);
    CHECK(aligned->at(name).scale[0] == scale);
    CHECK(aligned->at(name).zero_point[0] == 128);
    CHECK(aligned->at(name).dtype == DType::UInt8);
  }
}

TEST_CASE("qdq: Relu and MaxPool chains take their input's parameters") {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "chain";
  Value* x = g.get_or_create_value("x");
  Value* r = g.get_or_create_value("r");
  Value* p = g.get_or_create_value("p");
  Value* s = g.get_or_create_value("s");
  g.inputs.push_back(x);
  g.add_node("Relu", {x}, {r}, "relu");
  Node* pool = g.add_node("MaxPool", {r}, {p}, "pool");
  pool->set_attribute(Attribute::make_ints("kernel_shape", {2, 2}));
  g.add_node("Sigmoid", {p}, {s}, "sigmoid");
  g.outputs.push_back(s);
  QuantParams asym = params(2.0, DType::UInt8);
  asym.scale = {0.01f};
  asym.zero_point = {100};
  const QuantTable table = {{"x", asym}, {"r", params(1.5)}, {"p", params(1.0)}, {"s", params(1.0)}};
  auto aligned = align_scales(g, table, nullptr);
  REQUIRE(aligned.has_value());
  CHECK(aligned->at("r").dtype == DType::UInt8);
  CHECK(aligned->at("r").scale[0] == 0.01f);
  CHECK(aligned->at("r").zero_point[0] == 100);
  CHECK(aligned->at("p").zero_point[0] == 100);   // chained through MaxPool
  CHECK(aligned->at("s").scale[0] == static_cast<float>(1.0 / 127.0));  // Sigmoid requantizes
}

TEST_CASE("qdq: PTQ model structure, names, weights and int32 biases") {
  Model model = concat_model();
  const Model float_model = round_trip(model);
  const QuantTable table = concat_table();
  REQUIRE(build_qdq_model(model, table, nullptr, {}).is_ok());
  const Graph& g = *model.graph;
  CHECK(g.validate().is_ok());
  CHECK(count_ops(g, "QuantizeLinear") == 6);     // x, c, r, cat, f, y
  CHECK(count_ops(g, "DequantizeLinear") == 10);  // 6 activations, 2 weights, 2 biases

  // The graph output keeps its name: DQ writes 'y', the Gemm a renamed value.
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0]->name() == "y");
  CHECK(producer_of(g, "y")->op_type() == "DequantizeLinear");
  CHECK(producer_of(g, "y_float")->op_type() == "Gemm");
  // Consumers read the DQ output; the Q reads the original tensor.
  CHECK(producer_of(g, "c")->op_type() == "Conv");
  CHECK(producer_of(g, "c_dequantized")->op_type() == "DequantizeLinear");
  CHECK(producer_of(g, "r")->input(0)->name() == "c_dequantized");
  CHECK(producer_of(g, "c_quantized")->input(0)->name() == "c");
  CHECK(g.initializer(g.find_value("c_scale"))->data<float>()[0] == static_cast<float>(4.0 / 127.0));
  CHECK(g.initializer(g.find_value("c_zero_point"))->dtype() == DType::Int8);
  CHECK(g.initializer(g.find_value("c_scale"))->rank() == 0);

  // Conv weight: int8 per output channel (axis 0), float weight gone.
  CHECK(g.find_value("W") == nullptr);
  const Tensor* wq = g.initializer(g.find_value("W_quantized"));
  REQUIRE(wq != nullptr);
  CHECK(wq->dtype() == DType::Int8);
  const int8_t* wv = wq->data<int8_t>();
  CHECK(std::vector<int>(wv, wv + 6) == std::vector<int>{38, -127, 127, 51, 0, 0});
  const Tensor* ws = g.initializer(g.find_value("W_scale"));
  REQUIRE(ws->numel() == 3);
  CHECK(ws->data<float>()[0] == static_cast<float>(1.0 / 127.0));
  CHECK(ws->data<float>()[1] == static_cast<float>(0.25 / 127.0));
  CHECK(ws->data<float>()[2] == static_cast<float>(1.0 / 127.0));  // all-zero channel
  CHECK(producer_of(g, "W_dequantized")->attr_int("axis", -1) == 0);
  // Gemm B [K, N] without transB: channels on axis 1.
  CHECK(producer_of(g, "Wg_dequantized")->attr_int("axis", -1) == 1);
  CHECK(g.initializer(g.find_value("Wg_scale"))->numel() == 4);

  // Bias: int32 = round(b / (s_x * s_w[c])), scale s_x * s_w[c], zero point 0.
  const Tensor* bq = g.initializer(g.find_value("B_quantized"));
  REQUIRE(bq != nullptr);
  CHECK(bq->dtype() == DType::Int32);
  CHECK(std::vector<int32_t>(bq->data<int32_t>(), bq->data<int32_t>() + 3) == std::vector<int32_t>{1613, -12903, 806});
  const Tensor* bs = g.initializer(g.find_value("B_scale"));
  const float sx = static_cast<float>(1.0 / 127.0);
  CHECK(bs->data<float>()[1] == static_cast<float>(static_cast<double>(sx) * static_cast<double>(static_cast<float>(0.25 / 127.0))));
  CHECK(g.initializer(g.find_value("B_zero_point"))->dtype() == DType::Int32);
  // The Gemm bias uses the Flatten output's (aligned) scale.
  const Tensor* gbq = g.initializer(g.find_value("Bg_quantized"));
  const Tensor* gws = g.initializer(g.find_value("Wg_scale"));
  const double sf = static_cast<float>(4.0 / 127.0);
  for (int c = 0; c < 4; ++c) {
    const float s = static_cast<float>(sf * gws->data<float>()[c]);
    const std::vector<float> bg = {0.5f, -0.5f, 0.25f, 0.0f};
    CHECK(gbq->data<int32_t>()[c] == static_cast<int32_t>(std::nearbyint(bg[static_cast<std::size_t>(c)] / s)));
  }

  CHECK_MESSAGE(check_model(model).is_ok(), check_model(model).message());
  const Model reread = round_trip(model);
  CHECK(check_model(reread).is_ok());
  const Tensor x = input_tensor();
  const std::vector<float> expected = run_output(float_model, x);
  const std::vector<float> actual = run_output(reread, x);
  REQUIRE(actual.size() == expected.size());
  CHECK(cosine_similarity(expected, actual) > 0.999);
  CHECK(cosine_similarity(expected, actual) < 1.0);  // it did quantize
}

TEST_CASE("qdq: a bias int32 cannot hold at s_in * s_w raises that channel's weight scale") {
  Model model = concat_model();
  // Channel 1 of W: weights near 1e-15 next to a real bias of -0.2 (PP-OCR rec has such
  // depthwise channels). At s_w = 1e-15 / 127 the bias would need about 1e16 in int32.
  Graph& g = *model.graph;
  g.set_initializer(g.find_value("W"), Tensor::from_vector<float>({3, 2, 1, 1}, {0.3f, -1.0f, 1e-15f, -5e-16f, 0.0f, 0.0f}));
  const Model float_model = round_trip(model);
  REQUIRE(build_qdq_model(model, concat_table(), nullptr, {}).is_ok());
  const float sx = static_cast<float>(1.0 / 127.0);
  const Tensor* ws = g.initializer(g.find_value("W_scale"));
  const Tensor* bq = g.initializer(g.find_value("B_quantized"));
  const Tensor* bs = g.initializer(g.find_value("B_scale"));
  // The raised scale: |b| / (s_x * 2^30); the bias lands at 2^30 in magnitude, the weights at 0.
  CHECK(ws->data<float>()[1] == static_cast<float>(0.2f / (static_cast<double>(sx) * 0x1p30)));
  CHECK(std::abs(bq->data<int32_t>()[1] + (1 << 30)) <= 2);
  CHECK(g.initializer(g.find_value("W_quantized"))->data<int8_t>()[2] == 0);
  // Dequantized, the bias is still -0.2; the untouched channels keep max|w| / 127.
  CHECK(static_cast<double>(bq->data<int32_t>()[1]) * bs->data<float>()[1] == doctest::Approx(-0.2).epsilon(1e-6));
  CHECK(ws->data<float>()[0] == static_cast<float>(1.0 / 127.0));
  const Model reread = round_trip(model);
  const Tensor x = input_tensor();
  CHECK(cosine_similarity(run_output(float_model, x), run_output(reread, x)) > 0.999);
}

TEST_CASE("qdq: builds sharing a weight cache give the models of builds without one") {
  // With x quantized, conv's channel 1 has its scale raised for the int32 bias, which
  // rewrites that channel's weights; without x quantized the bias stays float and the weights
  // keep their own scale, also when the cache saw the raise first.
  Model model = concat_model();
  model.graph->set_initializer(model.graph->find_value("W"),
                               Tensor::from_vector<float>({3, 2, 1, 1}, {0.3f, -1.0f, 1e-15f, -5e-16f, 0.0f, 0.0f}));
  QuantTable float_x = concat_table();
  float_x.erase("x");
  WeightQuantCache cache;
  QdqOptions cached;
  cached.weight_cache = &cache;
  for (const QuantTable& table : {concat_table(), float_x, concat_table()}) {
    Model with = model.copy(), without = model.copy();
    REQUIRE(build_qdq_model(with, table, nullptr, cached).is_ok());
    REQUIRE(build_qdq_model(without, table, nullptr, {}).is_ok());
    const auto a = export_onnx_bytes(with), b = export_onnx_bytes(without);
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(*a == *b);
    const Graph& g = *with.graph;
    const int8_t w2 = g.initializer(g.find_value("W_quantized"))->data<int8_t>()[2];
    CHECK((table.count("x") ? w2 == 0 : w2 == 127));
  }
  CHECK(cache.weights.size() == 2);  // W and Wg, each quantized once
}

TEST_CASE("qdq: the calibrated model quantizes activations only") {
  Model model = concat_model();
  QdqOptions options;
  options.weights = false;
  REQUIRE(build_qdq_model(model, concat_table(), nullptr, options).is_ok());
  const Graph& g = *model.graph;
  CHECK(count_ops(g, "QuantizeLinear") == 6);
  CHECK(count_ops(g, "DequantizeLinear") == 6);
  CHECK(g.initializer(g.find_value("W"))->dtype() == DType::Float32);
  CHECK(g.initializer(g.find_value("B"))->dtype() == DType::Float32);
  CHECK(check_model(model).is_ok());
  const Model reread = round_trip(model);
  CHECK(run_output(reread, input_tensor()).size() == 4);
}

TEST_CASE("qdq: quantize = false keeps a node's weights float, its outputs where no quantized node reads them") {
  QuantConfig config;
  config.nodes["relu"].quantize = false;
  config.op_types["Gemm"].quantize = false;
  Model model = concat_model();
  REQUIRE(build_qdq_model(model, concat_table(), &config, {}).is_ok());
  const Graph& g = *model.graph;
  // x, c, cat, f, and r: the float Relu hands its output to a quantized Concat.
  CHECK(count_ops(g, "QuantizeLinear") == 5);
  CHECK(g.find_value("r_quantized") != nullptr);
  CHECK(g.find_value("y_quantized") == nullptr);
  CHECK(producer_of(g, "y")->op_type() == "Gemm");
  CHECK(g.initializer(g.find_value("Wg"))->dtype() == DType::Float32);
  CHECK(g.initializer(g.find_value("W_quantized")) != nullptr);

  QuantConfig all_off;
  all_off.model.quantize = false;
  Model untouched = concat_model();
  REQUIRE(build_qdq_model(untouched, concat_table(), &all_off, {}).is_ok());
  CHECK(count_ops(*untouched.graph, "QuantizeLinear") == 0);
  CHECK(count_ops(*untouched.graph, "DequantizeLinear") == 0);
}

TEST_CASE("qdq: a bias stays float when its input is not quantized") {
  Model model = concat_model();
  QuantTable table = concat_table();
  table.erase("x");
  REQUIRE(build_qdq_model(model, table, nullptr, {}).is_ok());
  const Graph& g = *model.graph;
  CHECK(g.initializer(g.find_value("B"))->dtype() == DType::Float32);
  CHECK(g.find_value("B_quantized") == nullptr);
  CHECK(g.initializer(g.find_value("W_quantized")) != nullptr);
}

TEST_CASE("qdq: table errors and opset rules") {
  Model unknown = concat_model();
  QuantTable table = concat_table();
  table["nope"] = params(1.0);
  Status status = build_qdq_model(unknown, table, nullptr, {});
  CHECK(status.code() == StatusCode::NotFound);
  CHECK(status.message() == "calibration table: tensor 'nope' is not in the model");

  Model old = concat_model(11);
  status = build_qdq_model(old, concat_table(), nullptr, {});
  CHECK(status.code() == StatusCode::Unsupported);
  CHECK(status.message().find("opset 11") != std::string::npos);
  CHECK(status.message().find("opset 13 or later") != std::string::npos);

  // 16-bit activations raise opset 13 to 21 when nothing changes meaning in between.
  Model wide = concat_model(13);
  QuantTable wide_table;
  for (const auto& [name, q] : concat_table()) wide_table[name] = params(q.threshold, DType::Int16);
  REQUIRE(build_qdq_model(wide, wide_table, nullptr, {}).is_ok());
  CHECK(wide.opset("") == 21);
  CHECK(wide.graph->initializer(wide.graph->find_value("x_zero_point"))->dtype() == DType::Int16);
  const Model wide_float = concat_model();
  const std::vector<float> expected = run_output(wide_float, input_tensor());
  CHECK(cosine_similarity(expected, run_output(round_trip(wide), input_tensor())) > 0.9999);

  // An op whose form changed in between is adapted on the way (ReduceMean's axes became an
  // input at 18) ...
  Model reduce = concat_model(13);
  Graph& g = *reduce.graph;
  Value* m = g.get_or_create_value("m");
  m->type = float_type({d(1), d(1)});
  g.add_node("ReduceMean", {g.find_value("y")}, {m}, "mean")->set_attribute(Attribute::make_ints("axes", {1}));
  g.outputs.push_back(m);
  QuantTable reduce_table = wide_table;
  reduce_table["m"] = params(1.0, DType::Int16);
  status = build_qdq_model(reduce, reduce_table, nullptr, {});
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  CHECK(reduce.opset("") == 21);
  const Node* mean = nullptr;
  for (const auto& n : reduce.graph->nodes())
    if (n->op_type() == "ReduceMean") mean = n.get();
  REQUIRE(mean != nullptr);
  CHECK(mean->find_attribute("axes") == nullptr);
  REQUIRE(mean->inputs().size() == 2);
  CHECK(reduce.graph->initializer(mean->input(1))->to_int64s() == std::vector<int64_t>{1});
  CHECK(cosine_similarity(run_output(wide_float, input_tensor()), run_output(round_trip(reduce), input_tensor())) > 0.9999);

  // ... and a node no adapter can carry across is refused, named (training-mode
  // BatchNormalization outputs changed at 14).
  Model training = concat_model(13);
  Graph& t = *training.graph;
  std::vector<Value*> bn_inputs = {t.find_value("c")};
  for (const char* p : {"bn_scale", "bn_bias", "bn_mean", "bn_var"}) {
    Value* v = t.get_or_create_value(p);
    t.set_initializer(v, Tensor::from_vector<float>({3}, {1.0f, 0.5f, 0.25f}));
    bn_inputs.push_back(v);
  }
  std::vector<Value*> bn_outputs;
  for (const char* o : {"bn_y", "bn_running_mean", "bn_running_var", "bn_saved_mean", "bn_saved_var"})
    bn_outputs.push_back(t.get_or_create_value(o));
  t.add_node("BatchNormalization", bn_inputs, bn_outputs, "bn");
  t.outputs.push_back(bn_outputs[0]);
  status = build_qdq_model(training, wide_table, nullptr, {});
  CHECK(status.code() == StatusCode::Unsupported);
  CHECK(status.message().find("16-bit QuantizeLinear/DequantizeLinear need opset 21, the model imports opset 13 and "
                              "cannot be raised: BatchNormalization 'bn' (changed at opset 14") == 0);
  CHECK(training.opset("") == 13);
}

TEST_CASE("qdq: empirical bias correction measures the mean output shift per channel") {
  const std::string dir = std::filesystem::temp_directory_path() / "qflow_test_bias_correction";
  std::filesystem::create_directories(dir);
  // Three samples of x[2, 3, 3]; the model feeds them with a batch axis.
  std::vector<float> samples(3 * 18);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<float>(std::sin(1.3 * static_cast<double>(i)) + 0.2);
  REQUIRE(write_npy_file(dir + "/x.npy", Tensor::from_vector<float>({3, 2, 3, 3}, samples)).is_ok());
  auto dataset = open_dataset(DataSpec{dir + "/x.npy"});
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());

  const Model model = concat_model();
  auto shift = measure_bias_shift(model, nullptr, *dataset);
  REQUIRE_MESSAGE(shift.has_value(), shift.status().message());
  REQUIRE(shift->count("conv") == 1);
  REQUIRE(shift->count("fc") == 1);
  // A 1x1 Conv: the mean of (Wq - W) x over positions is sum_c (Wq - W)[m, c] * mean(x_c).
  const std::vector<float> w = {0.3f, -1.0f, 0.25f, 0.1f, 0.0f, 0.0f};
  auto q = quantize_weight(Tensor::from_vector<float>({3, 2, 1, 1}, w), 0, DType::Int8);
  const Tensor wq = dequantize_weight(*q);
  std::vector<double> mean_x(2, 0.0);
  for (std::size_t s = 0; s < 3; ++s)
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t k = 0; k < 9; ++k) mean_x[c] += samples[s * 18 + c * 9 + k] / 27.0;
  const std::vector<double>& conv = shift->at("conv");
  REQUIRE(conv.size() == 3);
  for (std::size_t m = 0; m < 3; ++m) {
    double expected = 0.0;
    for (std::size_t c = 0; c < 2; ++c)
      expected += (static_cast<double>(wq.data<float>()[m * 2 + c]) - static_cast<double>(w[m * 2 + c])) * mean_x[c];
    // The float32 outputs carry ~1e-7 of rounding per element: 0.1% of a ~1e-4 shift.
    CHECK(conv[m] == doctest::Approx(expected).epsilon(1e-3));
  }
  CHECK(conv[0] != 0.0);
  CHECK(conv[2] == 0.0);  // an all-zero channel quantizes exactly

  // The builder subtracts it from the float bias before quantizing; with x left float the
  // corrected bias stays float and shows the shift directly.
  Model corrected = concat_model();
  QuantTable table = concat_table();
  table.erase("x");
  QdqOptions options;
  options.bias_shift = *shift;
  REQUIRE(build_qdq_model(corrected, table, nullptr, options).is_ok());
  const Value* bias = producer_of(*corrected.graph, "c")->input(2);
  REQUIRE(bias != nullptr);
  const Tensor* b = corrected.graph->initializer(bias);
  REQUIRE(b != nullptr);
  CHECK(b->data<float>()[0] == static_cast<float>(static_cast<double>(0.1f) - conv[0]));
  CHECK(b->data<float>()[1] == static_cast<float>(static_cast<double>(-0.2f) - conv[1]));
  CHECK(b->data<float>()[0] != 0.1f);
  std::filesystem::remove_all(dir);
}

TEST_CASE("qdq: sample_cnn PTQ and calibrated models pass the checker and run") {
  auto imported = import_onnx_file(std::string(QFLOW_SOURCE_DIR) + "/models/sample/sample_cnn.onnx");
  REQUIRE(imported.has_value());
  const Model float_model = round_trip(*imported);
  // Ranges from one run on the sample input.
  auto samples = read_npy_file(std::string(QFLOW_SOURCE_DIR) + "/models/sample/input.npy");
  REQUIRE(samples.has_value());
  REQUIRE(samples->shape() == Shape{4, 1, 28, 28});
  const Value* input = float_model.graph->runtime_inputs().at(0);
  const Tensor first = Tensor::from_vector<float>({1, 1, 28, 28}, std::vector<float>(samples->data<float>(), samples->data<float>() + 784));
  QuantTable table;
  auto probe = Executor::create(float_model);
  REQUIRE(probe.has_value());
  auto record = [&](const std::string& name, const Tensor& t) {
    double m = 0.0;
    for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(static_cast<double>(t.data<float>()[i])));
    table[name] = params(m);
  };
  record(input->name(), first);
  auto out = (*probe)->run({{input->name(), first}}, [&](const Value& v, const Tensor& t) {
    if (t.dtype() == DType::Float32) record(v.name(), t);
    return Status::ok();
  });
  REQUIRE(out.has_value());
  int weighted = 0, biased = 0;
  for (const auto& node : float_model.graph->nodes()) {
    weighted += node->op_type() == "Conv" || node->op_type() == "Gemm";
    biased += (node->op_type() == "Conv" || node->op_type() == "Gemm") && node->input(2) != nullptr;
  }
  CHECK(weighted == 4);
  for (bool weights : {false, true}) {
    CAPTURE(weights);
    Model model = round_trip(float_model);
    QdqOptions options;
    options.weights = weights;
    REQUIRE(build_qdq_model(model, table, nullptr, options).is_ok());
    CHECK_MESSAGE(check_model(model).is_ok(), check_model(model).message());
    CHECK(count_ops(*model.graph, "QuantizeLinear") == static_cast<int>(table.size()));
    CHECK(count_ops(*model.graph, "DequantizeLinear") == static_cast<int>(table.size()) + (weights ? weighted + biased : 0));
    const Model reread = round_trip(model);
    auto executor = Executor::create(reread);
    REQUIRE(executor.has_value());
    auto q = (*executor)->run({{input->name(), first}});
    REQUIRE(q.has_value());
    const Tensor& expected = out->at("prob");
    const Tensor& actual = q->at("prob");
    CHECK(cosine_similarity(std::vector<float>(expected.data<float>(), expected.data<float>() + 10),
                            std::vector<float>(actual.data<float>(), actual.data<float>() + 10)) > 0.999);
  }
}

TEST_CASE("qdq: the quantize stage reads its options and inputs") {
  auto bytes = export_onnx_bytes(concat_model());
  REQUIRE(bytes.has_value());
  Artifact model;
  model.bytes = *bytes;
  Artifact qparams;
  qparams.type = ArtifactType::QParams;
  qparams.qparams = std::make_shared<const QuantTable>(concat_table());
  const std::string id = "q", component = "quantize";
  auto stage_with = [&](bool weights, bool bias_correction) {
    PipelineStage stage;
    stage.id = id;
    stage.kind = StageKind::Quantize;
    stage.component = component;
    stage.options["weights"] = StageOption{weights, {}, {}};
    stage.options["bias-correction"] = StageOption{bias_correction, {}, {}};
    return stage;
  };
  const std::map<std::string, const Artifact*> inputs = {{"model", &model}, {"qparams", &qparams}};

  auto calibrated = run_quantize(stage_with(false, false), inputs, {});
  REQUIRE_MESSAGE(calibrated.has_value(), calibrated.status().message());
  auto calibrated_model = import_onnx_bytes(calibrated->artifact.bytes, "calibrated");
  REQUIRE(calibrated_model.has_value());
  CHECK(count_ops(*calibrated_model->graph, "QuantizeLinear") == 6);
  CHECK(count_ops(*calibrated_model->graph, "DequantizeLinear") == 6);

  QuantConfig config;
  config.op_types["Gemm"].weight_dtype = DType::Int16;
  StageContext context;
  context.quantization = &config;
  auto ptq = run_quantize(stage_with(true, false), inputs, context);
  REQUIRE_MESSAGE(ptq.has_value(), ptq.status().message());
  auto ptq_model = import_onnx_bytes(ptq->artifact.bytes, "ptq");
  REQUIRE(ptq_model.has_value());
  CHECK(count_ops(*ptq_model->graph, "DequantizeLinear") == 10);
  CHECK(ptq_model->graph->initializer(ptq_model->graph->find_value("Wg_quantized"))->dtype() == DType::Int16);
  CHECK(ptq_model->opset("") == 21);  // int16 weights raised the opset

  auto no_data = run_quantize(stage_with(true, true), inputs, {});
  REQUIRE_FALSE(no_data.has_value());
  CHECK(no_data.status().message() ==
        "stage 'q': option 'bias-correction' needs input 'dataset' (the calibration samples)");
  auto no_weights = run_quantize(stage_with(false, true), inputs, {});
  REQUIRE_FALSE(no_weights.has_value());
  CHECK(no_weights.status().message().find("needs 'weights = true'") != std::string::npos);

  QuantTable stray = concat_table();
  stray["elsewhere"] = params(1.0);
  Artifact stray_qparams = qparams;
  stray_qparams.qparams = std::make_shared<const QuantTable>(stray);
  auto refused = run_quantize(stage_with(true, false), {{"model", &model}, {"qparams", &stray_qparams}}, {});
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message() == "stage 'q': calibration table: tensor 'elsewhere' is not in the model");
}

}  // namespace qflow
