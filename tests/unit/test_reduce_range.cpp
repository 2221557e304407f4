// Unit tests for reduced-range weights (quantization key reduce-range): int8 weights in
// [-64, 64], so that ONNX Runtime's x86 kernels without VNNI, which add pairs of u8 x s8
// products in 16 bits, compute what the QDQ model says (docs/quantization.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/data/npy.h"
#include "framework/data/dataset.h"
#include "framework/pipeline/pipeline.h"
#include "framework/quant/bias_correction.h"
#include "framework/quant/qdq_builder.h"
#include "framework/interpreter/executor.h"

#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;
using test::params;
using test::wave;

constexpr int64_t kIn = 16, kOut = 8, kKernel = 3;
constexpr int64_t kDepth = kIn * kKernel * kKernel;  // the K of the convolution's GEMM

// x[1,16,5,5] -> Conv(W[8,16,3,3], B[8], pad 1) "conv" -> y. Channel 7 has weights near zero
// next to a real bias, so its weight scale is raised to keep the int32 bias in range.
Model conv_model() {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "conv";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(kIn), d(5), d(5)});
  g.inputs.push_back(x);
  std::vector<float> w = wave(static_cast<std::size_t>(kOut * kDepth), 0.61, 0.8);
  for (int64_t k = 0; k < kDepth; ++k) w[static_cast<std::size_t>(7 * kDepth + k)] *= 1e-12f;
  Value* wv = g.get_or_create_value("W");
  g.set_initializer(wv, Tensor::from_vector<float>({kOut, kIn, kKernel, kKernel}, w));
  std::vector<float> b = wave(static_cast<std::size_t>(kOut), 1.1, 0.3);
  b[7] = 0.5f;
  Value* bv = g.get_or_create_value("B");
  g.set_initializer(bv, Tensor::from_vector<float>({kOut}, b));
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(kOut), d(5), d(5)});
  Node* conv = g.add_node("Conv", {x, wv, bv}, {y}, "conv");
  conv->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  g.outputs.push_back(y);
  return model;
}

QuantTable conv_table() { return {{"x", params(1.0)}, {"y", params(6.0)}}; }

QuantConfig reduced(bool on) {
  QuantConfig config;
  config.model.reduce_range = on;
  return config;
}

Model built(bool reduce_range) {
  Model model = conv_model();
  const QuantConfig config = reduced(reduce_range);
  const Status status = build_qdq_model(model, conv_table(), &config, {});
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  return model;
}

std::vector<int8_t> weight_values(const Model& model) {
  const Tensor* w = model.graph->initializer(model.graph->find_value("W_quantized"));
  REQUIRE(w != nullptr);
  REQUIRE(w->dtype() == DType::Int8);
  return std::vector<int8_t>(w->data<int8_t>(), w->data<int8_t>() + w->numel());
}

std::vector<float> float_values(const Model& model, const std::string& name) {
  const Tensor* t = model.graph->initializer(model.graph->find_value(name));
  REQUIRE(t != nullptr);
  return std::vector<float>(t->data<float>(), t->data<float>() + t->numel());
}

// One output of ONNX Runtime's u8 x s8 GEMM on x86 without VNNI (MLAS: vpmaddubsw, then
// vpmaddwd with ones): products of adjacent k are added in pairs and saturated to int16, the
// pair sums added in int32.
int64_t avx2_u8s8_dot(const std::vector<uint8_t>& a, const int8_t* w) {
  int64_t acc = 0;
  for (std::size_t k = 0; k < a.size(); k += 2) {
    int64_t pair = int64_t{a[k]} * w[k];
    if (k + 1 < a.size()) pair += int64_t{a[k + 1]} * w[k + 1];
    acc += std::clamp<int64_t>(pair, -32768, 32767);
  }
  return acc;
}

int64_t exact_dot(const std::vector<uint8_t>& a, const int8_t* w) {
  int64_t acc = 0;
  for (std::size_t k = 0; k < a.size(); ++k) acc += int64_t{a[k]} * w[k];
  return acc;
}

// Output channels whose 16-bit pair sums saturate for some uint8 activations: ONNX Runtime on
// x86 turns int8 activations into uint8 (x + 128), so they span [0, 255]. The extremes are
// 255 where the weight has the sign of the sum and 0 elsewhere; a row exact for both is exact
// for every input.
int saturating_channels(const std::vector<int8_t>& w) {
  int count = 0;
  for (int64_t c = 0; c < kOut; ++c) {
    const int8_t* row = w.data() + c * kDepth;
    bool exact = true;
    for (int sign : {1, -1}) {
      std::vector<uint8_t> a(static_cast<std::size_t>(kDepth));
      for (int64_t k = 0; k < kDepth; ++k) a[static_cast<std::size_t>(k)] = row[k] * sign > 0 ? 255 : 0;
      exact = exact && avx2_u8s8_dot(a, row) == exact_dot(a, row);
    }
    count += exact ? 0 : 1;
  }
  return count;
}

std::vector<float> run(const Model& model, const Tensor& x) {
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor.has_value(), executor.status().message());
  auto outputs = (*executor)->run({{"x", x}});
  REQUIRE_MESSAGE(outputs.has_value(), outputs.status().message());
  const Tensor& y = outputs->at("y");
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

}  // namespace

TEST_CASE("reduce-range: weight_qmax is 64 for int8 weights only") {
  CHECK(weight_qmax(DType::Int8, false) == 127.0);
  CHECK(weight_qmax(DType::Int8, true) == 64.0);
  CHECK(weight_qmax(DType::Int16, false) == 32767.0);
  CHECK(weight_qmax(DType::Int16, true) == 32767.0);  // no 16-bit integer kernel overflows
  // The bound that makes 64 the limit: a pair of u8 x s8 products must fit in int16.
  CHECK(2 * 255 * 64 <= 32767);
  CHECK(2 * 255 * 65 > 32767);
}

TEST_CASE("reduce-range: quantize_weight maps each channel's largest |w| to 64") {
  const Tensor w = Tensor::from_vector<float>({2, 3}, {0.5f, -1.0f, 0.25f, 2.0f, 0.0f, -0.75f});
  auto q = quantize_weight(w, 0, DType::Int8, true);
  REQUIRE_MESSAGE(q.has_value(), q.status().message());
  CHECK(q->qmax == 64.0);
  CHECK(q->scale == std::vector<float>{1.0f / 64.0f, 2.0f / 64.0f});
  const std::vector<int8_t> values(q->values.data<int8_t>(), q->values.data<int8_t>() + 6);
  CHECK(values == std::vector<int8_t>{32, -64, 16, 64, 0, -24});

  auto per_tensor = quantize_weight(w, -1, DType::Int8, true);
  REQUIRE(per_tensor.has_value());
  CHECK(per_tensor->scale == std::vector<float>{2.0f / 64.0f});

  auto full = quantize_weight(w, 0, DType::Int8);
  REQUIRE(full.has_value());
  CHECK(full->qmax == 127.0);
  CHECK(full->values.data<int8_t>()[1] == -127);

  auto wide = quantize_weight(w, 0, DType::Int16, true);
  REQUIRE(wide.has_value());
  CHECK(wide->qmax == 32767.0);
  CHECK(wide->values.data<int16_t>()[1] == -32767);
}

TEST_CASE("reduce-range: the QDQ model is exact in 16-bit pair sums, full range is not") {
  const Model full = built(false);
  const Model reduced_model = built(true);
  const std::vector<int8_t> wf = weight_values(full);
  const std::vector<int8_t> wr = weight_values(reduced_model);

  int64_t largest = 0;
  for (int8_t v : wr) largest = std::max<int64_t>(largest, std::abs(int64_t{v}));
  CHECK(largest == 64);
  // The cause of the loss in ONNX Runtime: with [-127, 127] the normal channels saturate.
  CHECK(saturating_channels(wf) == 7);
  CHECK(saturating_channels(wr) == 0);

  // Scales are max|w| / 64 per channel, and the int32 bias follows them (s_x * s_w).
  const std::vector<float> sf = float_values(full, "W_scale");
  const std::vector<float> sr = float_values(reduced_model, "W_scale");
  const std::vector<float> bias_scale = float_values(reduced_model, "B_scale");
  const float s_x = static_cast<float>(1.0 / 127.0);
  for (std::size_t c = 0; c + 1 < sr.size(); ++c) {
    CHECK(sr[c] == doctest::Approx(sf[c] * 127.0f / 64.0f).epsilon(1e-6));
    CHECK(bias_scale[c] == static_cast<float>(static_cast<double>(s_x) * sr[c]));
  }
  // Channel 7's scale was raised to keep its int32 bias in range, to the same value in both
  // ranges (|b| / (s_x * 2^30)), far above max|w| / 64; its weights round to about 0.
  CHECK(sr[7] == sf[7]);
  CHECK(sr[7] > 1e-10f);

  // Both models compute what the float model does, within int8 rounding.
  std::vector<float> x = wave(static_cast<std::size_t>(kIn * 25), 0.37, 0.9);
  const Tensor input = Tensor::from_vector<float>({1, kIn, 5, 5}, x);
  const std::vector<float> expected = run(conv_model(), input);
  const std::vector<float> got = run(reduced_model, input);
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double{got[i]} - expected[i]));
  CHECK(worst < 0.15);  // a few output steps (6 / 127) of weight and activation rounding
}

TEST_CASE("reduce-range: bias correction measures the reduced-range weights") {
  const std::string dir = std::filesystem::temp_directory_path() / "qflow_test_reduce_range";
  std::filesystem::create_directories(dir);
  const std::vector<float> x = wave(static_cast<std::size_t>(2 * kIn * 25), 0.37, 0.9);
  REQUIRE(write_npy_file(dir + "/x.npy", Tensor::from_vector<float>({2, kIn, 5, 5}, x)).is_ok());
  auto dataset = open_dataset(DataSpec{dir + "/x.npy"});
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  const Model model = conv_model();
  auto measure = [&](bool on) {
    const QuantConfig config = reduced(on);
    auto shift = measure_bias_shift(model, &config, *dataset);
    REQUIRE_MESSAGE(shift.has_value(), shift.status().message());
    REQUIRE(shift->count("conv") == 1);
    return shift->at("conv");
  };
  const std::vector<double> full = measure(false), reduced_shift = measure(true);
  REQUIRE(full.size() == reduced_shift.size());
  CHECK(full != reduced_shift);
}

TEST_CASE("reduce-range: pipeline key, override priorities, --set and canonical text") {
  constexpr const char* kStages = "\n[[stage]]\nid = \"import\"\nuse = \"import-onnx\"\noptions = { path = \"m.onnx\" }\n";
  Expected<Pipeline> pipeline = parse_pipeline(std::string("[quantization]\nreduce-range = true\n"
                                                           "[quantization.op-type.Gemm]\nreduce-range = false\n") +
                                                   kStages,
                                               "p.toml", {});
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  CHECK(pipeline->quantization.resolve("c", "Conv").reduce_range);
  CHECK_FALSE(pipeline->quantization.resolve("g", "Gemm").reduce_range);
  CHECK_FALSE(QuantConfig{}.resolve("c", "Conv").reduce_range);  // off unless asked

  Expected<Pipeline> set = parse_pipeline(kStages, "p.toml", {"quantization.reduce-range=true"});
  REQUIRE_MESSAGE(set.has_value(), set.status().message());
  CHECK(set->quantization.resolve("c", "Conv").reduce_range);

  ComponentCatalog catalog({});
  REQUIRE(resolve_pipeline(*pipeline, catalog).is_ok());
  const std::string text = format_pipeline(*pipeline);
  CHECK(text.find("[quantization]\nreduce-range = true\n[quantization.op-type.Gemm]\nreduce-range = false\n") !=
        std::string::npos);

  Expected<Pipeline> bad = parse_pipeline(std::string("[quantization]\nreduce-range = 7\n") + kStages, "p.toml", {});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().message() == "p.toml:2:16: in [quantization]: 'reduce-range' must be true or false");
}

}  // namespace qflow
