// Activation grids of 2 to 16 bits: the [quantization] key and its resolution, the grid of
// activation_params, and the QDQ model's Clip (bit-exact fake quant with the narrowed range).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/quant/precision_search.h"
#include "framework/quant/qdq_builder.h"
#include "framework/quant/quantization_settings.h"
#include "framework/quant/scale_alignment.h"
#include "framework/interpreter/executor.h"
#include "qflow/quant/quant_math.h"

#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;

TensorStatistics range_stats(double lo, double hi) {
  TensorStatistics stats;
  stats.count = 100;
  stats.min = lo;
  stats.max = hi;
  return stats;
}

QuantSpec spec_of(DType dtype, int bits, bool symmetric = true) {
  QuantSpec spec;
  spec.activation_dtype = dtype;
  spec.activation_bits = bits;
  spec.symmetric = symmetric;
  return spec;
}

// x[1,n] -> Neg -> y (graph output): both quantized, so the input's Clip feeds a node and the
// output's Clip writes the graph output.
Model neg_model(int64_t n) {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "neg";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(n)});
  g.inputs.push_back(x);
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(n)});
  g.add_node("Neg", {x}, {y}, "neg");
  g.outputs.push_back(y);
  return model;
}

Model round_trip(const Model& model) {
  auto bytes = export_onnx_bytes(model);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.status().message());
  auto back = import_onnx_bytes(*bytes, "round trip");
  REQUIRE_MESSAGE(back.has_value(), back.status().message());
  return std::move(*back);
}

// QuantizeLinear then DequantizeLinear by hand on the narrowed range, in float32 as ONNX
// specifies: round_half_even(x / s) + zp clamped to [qmin, qmax], then (q - zp) * s.
float fake_quant(float x, float s, int64_t zp, QuantRange grid) {
  const float q = std::clamp(std::nearbyint(x / s) + static_cast<float>(zp), static_cast<float>(grid.min),
                             static_cast<float>(grid.max));
  return (q - static_cast<float>(zp)) * s;
}

}  // namespace

TEST_CASE("activation-bits: the grid of (dtype, bits), signed and unsigned, at 2, 4, 8, 12 and 16 bits") {
  auto range = [](DType dtype, int bits) {
    const QuantRange r = grid_range(dtype, bits);
    return std::vector<int64_t>{r.min, r.max};
  };
  CHECK(range(DType::Int8, 2) == std::vector<int64_t>{-2, 1});
  CHECK(range(DType::Int8, 4) == std::vector<int64_t>{-8, 7});
  CHECK(range(DType::Int8, 8) == std::vector<int64_t>{-128, 127});
  CHECK(range(DType::Int8, 0) == std::vector<int64_t>{-128, 127});
  CHECK(range(DType::UInt8, 2) == std::vector<int64_t>{0, 3});
  CHECK(range(DType::UInt8, 4) == std::vector<int64_t>{0, 15});
  CHECK(range(DType::UInt8, 8) == std::vector<int64_t>{0, 255});
  CHECK(range(DType::Int16, 12) == std::vector<int64_t>{-2048, 2047});
  CHECK(range(DType::Int16, 16) == std::vector<int64_t>{-32768, 32767});
  CHECK(range(DType::UInt16, 12) == std::vector<int64_t>{0, 4095});
  CHECK(range(DType::UInt16, 16) == std::vector<int64_t>{0, 65535});
  // Recorded bits: only a grid narrower than its container.
  CHECK(grid_bits(DType::Int8, 4) == 4);
  CHECK(grid_bits(DType::Int8, 8) == 0);
  CHECK(grid_bits(DType::Int16, 16) == 0);
  CHECK(grid_bits(DType::UInt16, 12) == 12);
  QuantParams p;
  p.dtype = DType::UInt8;
  p.bits = 3;
  CHECK(grid_range(p).max == 7);
}

TEST_CASE("activation-bits: activation_params spreads the threshold over the narrowed grid") {
  const TensorStatistics stats = range_stats(-3.0, 6.0);
  struct Case {
    DType dtype;
    int bits;
    double qmax;
  };
  // Symmetric signed: scale = threshold / (2^(b-1) - 1), zero point 0.
  for (const Case c : {Case{DType::Int8, 2, 1.0}, Case{DType::Int8, 4, 7.0}, Case{DType::Int8, 8, 127.0},
                       Case{DType::Int16, 12, 2047.0}, Case{DType::Int16, 16, 32767.0}}) {
    CAPTURE(c.bits);
    auto p = activation_params(spec_of(c.dtype, c.bits), stats, 6.0, "test", "t");
    REQUIRE_MESSAGE(p.has_value(), p.status().message());
    CHECK(p->dtype == c.dtype);
    CHECK(p->bits == grid_bits(c.dtype, c.bits));
    CHECK(p->scale.front() == static_cast<float>(6.0 / c.qmax));
    CHECK(p->zero_point.front() == 0);
  }
  // Unsigned (asymmetric): [min, max] clipped to the threshold over 2^b - 1 steps, the zero
  // point on the grid.
  for (const Case c : {Case{DType::UInt8, 2, 3.0}, Case{DType::UInt8, 4, 15.0}, Case{DType::UInt8, 8, 255.0},
                       Case{DType::UInt16, 12, 4095.0}, Case{DType::UInt16, 16, 65535.0}}) {
    CAPTURE(c.bits);
    auto p = activation_params(spec_of(c.dtype, c.bits, false), stats, 6.0, "test", "t");
    REQUIRE_MESSAGE(p.has_value(), p.status().message());
    CHECK(p->bits == grid_bits(c.dtype, c.bits));
    const double scale = 9.0 / c.qmax;
    CHECK(p->scale.front() == static_cast<float>(scale));
    CHECK(p->zero_point.front() == static_cast<int64_t>(std::nearbyint(3.0 / scale)));
    CHECK(p->zero_point.front() >= 0);
    CHECK(p->zero_point.front() <= static_cast<int64_t>(c.qmax));
  }
  // Signed asymmetric at 4 bits: [-8, 7], 15 steps over [-3, 6], zero point -8 + 3/s = -3.
  auto asym = activation_params(spec_of(DType::Int8, 4, false), stats, 6.0, "test", "t");
  REQUIRE(asym.has_value());
  CHECK(asym->scale.front() == static_cast<float>(9.0 / 15.0));
  CHECK(asym->zero_point.front() == -3);
  // A grid wider than the container is an error naming the tensor.
  auto wide = activation_params(spec_of(DType::Int8, 12), stats, 6.0, "max", "t");
  REQUIRE_FALSE(wide.has_value());
  CHECK(wide.status().message() == "max calibrator: tensor 't': 12-bit activations do not fit int8");
}

TEST_CASE("activation-bits: resolution picks the container and keeps the dtype's signedness") {
  QuantConfig config;
  REQUIRE(set_quantization_key(config.model, "activation-bits", int64_t{4}).is_ok());
  REQUIRE(set_quantization_key(config.op_types["Softmax"], "activation-bits", int64_t{12}).is_ok());
  REQUIRE(set_quantization_key(config.op_types["Sigmoid"], "activation-dtype", std::string("uint8")).is_ok());
  REQUIRE(set_quantization_key(config.nodes["sig2"], "activation-bits", int64_t{6}).is_ok());
  REQUIRE(set_quantization_key(config.nodes["fc"], "activation-dtype", std::string("int16")).is_ok());
  const QuantSpec conv = config.resolve("c1", "Conv");
  CHECK(conv.activation_dtype == DType::Int8);
  CHECK(conv.activation_bits == 4);
  const QuantSpec softmax = config.resolve("s", "Softmax");
  CHECK(softmax.activation_dtype == DType::Int16);
  CHECK(softmax.activation_bits == 12);
  // A dtype alone at a more specific level: its full range.
  const QuantSpec sigmoid = config.resolve("sig1", "Sigmoid");
  CHECK(sigmoid.activation_dtype == DType::UInt8);
  CHECK(sigmoid.activation_bits == 0);
  // Bits under an unsigned dtype: an unsigned grid.
  const QuantSpec sig2 = config.resolve("sig2", "Sigmoid");
  CHECK(sig2.activation_dtype == DType::UInt8);
  CHECK(sig2.activation_bits == 6);
  CHECK(activation_grid(sig2).max == 63);
  const QuantSpec fc = config.resolve("fc", "Gemm");
  CHECK(fc.activation_dtype == DType::Int16);
  CHECK(fc.activation_bits == 0);
  const std::string text = format_quantization(config);
  CHECK(text.find("[quantization]\nactivation-bits = 4\n") != std::string::npos);
  CHECK(text.find("[quantization.op-type.Softmax]\nactivation-bits = 12\n") != std::string::npos);

  // Precision search raises a node by setting the dtype at the node level: the merged entry
  // drops the node's own narrowed grid (and a narrowed weight grid likewise).
  QuantConfig raised;
  raised.nodes["sig2"].activation_dtype = DType::Int16;
  raised.nodes["c1"].weight_dtype = DType::Int16;
  REQUIRE(set_quantization_key(config.nodes["c1"], "weight-bits", int64_t{4}).is_ok());
  const QuantConfig merged = merge_quant_config(config, raised);
  CHECK(merged.resolve("sig2", "Sigmoid").activation_dtype == DType::Int16);
  CHECK(merged.resolve("sig2", "Sigmoid").activation_bits == 0);
  CHECK(merged.resolve("c1", "Conv").weight_dtype == DType::Int16);
  CHECK(merged.resolve("c1", "Conv").weight_bits == 0);
  // Bits set over an inherited dtype are kept.
  QuantConfig narrowed;
  narrowed.nodes["fc"].activation_bits = 10;
  CHECK(merge_quant_config(config, narrowed).resolve("fc", "Gemm").activation_dtype == DType::Int16);
  CHECK(merge_quant_config(config, narrowed).resolve("fc", "Gemm").activation_bits == 10);
}

TEST_CASE("activation-bits: out-of-range and contradictory values are refused with the allowed range") {
  QuantOverride entry;
  CHECK(set_quantization_key(entry, "activation-bits", int64_t{1}).message() ==
        "'activation-bits' must be an integer from 2 to 16");
  CHECK_FALSE(set_quantization_key(entry, "activation-bits", int64_t{17}).is_ok());
  CHECK_FALSE(set_quantization_key(entry, "activation-bits", std::string("4")).is_ok());
  REQUIRE(set_quantization_key(entry, "activation-dtype", std::string("uint8")).is_ok());
  CHECK(set_quantization_key(entry, "activation-bits", int64_t{12}).message() ==
        "'activation-bits' = 12 does not fit activation-dtype uint8 (2 to 8 bits)");
  QuantOverride wide;
  REQUIRE(set_quantization_key(wide, "activation-bits", int64_t{10}).is_ok());
  CHECK(set_quantization_key(wide, "activation-dtype", std::string("int8")).message() ==
        "'activation-bits' = 10 does not fit activation-dtype int8 (2 to 8 bits)");
  CHECK(set_quantization_key(wide, "activation-dtype", std::string("uint16")).is_ok());
  CHECK(quantization_key_type("activation-bits") == OptionType::Int);
}

TEST_CASE("activation-bits: the QDQ model's Clip makes it the fake quant with the narrowed range, bit for bit") {
  constexpr int64_t n = 257;
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(-2.6 + 5.2 * static_cast<double>(i) / (n - 1));
  // Input: int8 4-bit symmetric, threshold 1.4 (values up to 2.6 must clip at 7 steps).
  // Output: uint8 3-bit on [-1.0, 2.0] (asymmetric: zero point inside [0, 7]).
  QuantTable table;
  auto px = activation_params(spec_of(DType::Int8, 4), range_stats(-2.6, 2.6), 1.4, "test", "x");
  auto py = activation_params(spec_of(DType::UInt8, 3, false), range_stats(-1.0, 2.0), 2.0, "test", "y");
  REQUIRE(px.has_value());
  REQUIRE(py.has_value());
  CHECK(px->bits == 4);
  CHECK(py->bits == 3);
  CHECK(py->zero_point.front() > 0);
  table["x"] = *px;
  table["y"] = *py;
  Model model = neg_model(n);
  QdqOptions options;
  options.weights = false;
  REQUIRE(build_qdq_model(model, table, nullptr, options).is_ok());
  CHECK_MESSAGE(check_model(model).is_ok(), check_model(model).message());
  const Model reread = round_trip(model);
  const Graph& g = *reread.graph;
  int clips = 0;
  for (const auto& node : g.nodes()) clips += node->op_type() == "Clip";
  CHECK(clips == 2);
  // The bounds are the grid's ends as DequantizeLinear computes them.
  const Tensor* x_lo = g.initializer(g.find_value("x_clip_min"));
  const Tensor* x_hi = g.initializer(g.find_value("x_clip_max"));
  const Tensor* y_lo = g.initializer(g.find_value("y_clip_min"));
  REQUIRE(x_lo);
  REQUIRE(x_hi);
  REQUIRE(y_lo);
  CHECK(x_lo->data<float>()[0] == -8.0f * px->scale.front());
  CHECK(x_hi->data<float>()[0] == 7.0f * px->scale.front());
  CHECK(y_lo->data<float>()[0] == (0.0f - static_cast<float>(py->zero_point.front())) * py->scale.front());
  // The graph output keeps its name and is the Clip's.
  REQUIRE(g.find_value("y"));
  REQUIRE(g.find_value("y")->producer());
  CHECK(g.find_value("y")->producer()->op_type() == "Clip");

  auto executor = Executor::create(reread);
  REQUIRE_MESSAGE(executor.has_value(), executor.status().message());
  auto out = (*executor)->run({{"x", Tensor::from_vector<float>({1, n}, xs)}});
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  const Tensor& y = out->at("y");
  const QuantRange gx = grid_range(*px), gy = grid_range(*py);
  int clipped_x = 0, clipped_y = 0, mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = xs[static_cast<std::size_t>(i)];
    const float xq = fake_quant(x, px->scale.front(), 0, gx);
    const float expected = fake_quant(-xq, py->scale.front(), py->zero_point.front(), gy);
    if (std::nearbyint(x / px->scale.front()) > static_cast<float>(gx.max) ||
        std::nearbyint(x / px->scale.front()) < static_cast<float>(gx.min))
      ++clipped_x;
    if (std::nearbyint(-xq / py->scale.front()) + static_cast<float>(py->zero_point.front()) < static_cast<float>(gy.min))
      ++clipped_y;
    if (y.data<float>()[i] != expected) ++mismatches;
  }
  CHECK(mismatches == 0);
  // Both grids clip values the container's range would have held.
  CHECK(clipped_x > 50);
  CHECK(clipped_y > 10);

  // Without the narrowed grid the same scales saturate later: the outputs differ.
  QuantTable full = table;
  full["x"].bits = 0;
  full["y"].bits = 0;
  Model wide = neg_model(n);
  REQUIRE(build_qdq_model(wide, full, nullptr, options).is_ok());
  auto wide_exec = Executor::create(wide);
  REQUIRE(wide_exec.has_value());
  auto wide_out = (*wide_exec)->run({{"x", Tensor::from_vector<float>({1, n}, xs)}});
  REQUIRE(wide_out.has_value());
  int differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += wide_out->at("y").data<float>()[i] != y.data<float>()[i];
  CHECK(differ > 0);
}

TEST_CASE("activation-bits: table checks and Concat members on other grids") {
  Model model = neg_model(4);
  QuantTable table;
  auto p = activation_params(spec_of(DType::Int8, 4), range_stats(-1.0, 1.0), 1.0, "test", "x");
  REQUIRE(p.has_value());
  table["x"] = *p;
  table["x"].bits = 8;  // not narrower than int8
  QdqOptions options;
  options.weights = false;
  Status status = build_qdq_model(model, table, nullptr, options);
  CHECK(status.message() == "calibration table: tensor 'x': a grid of 8 bits does not narrow int8 (2 to 7)");

  // Members of a Concat share one scale, so they must share one grid.
  Model cat;
  cat.opset_imports.push_back({"", 13});
  Graph& g = *cat.graph;
  Value* a = g.get_or_create_value("a");
  a->type = float_type({d(1), d(2)});
  Value* b = g.get_or_create_value("b");
  b->type = float_type({d(1), d(2)});
  g.inputs = {a, b};
  Value* c = g.get_or_create_value("c");
  g.add_node("Concat", {a, b}, {c}, "concat")->set_attribute(Attribute::make_int("axis", 1));
  g.outputs.push_back(c);
  QuantTable members;
  members["a"] = *p;
  members["b"] = *p;
  members["b"].bits = 0;
  members["c"] = *p;
  auto aligned = align_scales(g, members, nullptr);
  REQUIRE_FALSE(aligned.has_value());
  CHECK(aligned.status().message() ==
        "Concat 'concat': tensors 'a' (4-bit) and 'b' (full-range) must share one grid (activation-bits) to share a scale");
}

}  // namespace qflow
