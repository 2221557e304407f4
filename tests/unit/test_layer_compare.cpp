// Unit tests for the per-layer comparison of a QDQ model with its float model (framework/quant).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "framework/data/npy.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/quant/layer_compare.h"
#include "framework/quant/qdq_builder.h"
#include "framework/interpreter/kernel_isa.h"
#include "test_dataset_util.h"

#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;

QuantParams params(float scale) {
  QuantParams q;
  q.dtype = DType::Int8;
  q.scale = {scale};
  q.zero_point = {0};
  q.threshold = scale * 127.0;
  q.method = "test";
  return q;
}

// x[1,4] -> Mul(2) "double" -> m -> Mul(3) "triple" -> y (graph output).
Model chain_model() {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "chain";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(4)});
  g.inputs.push_back(x);
  Value* two = g.get_or_create_value("two");
  g.set_initializer(two, Tensor::scalar<float>(2.0f));
  Value* three = g.get_or_create_value("three");
  g.set_initializer(three, Tensor::scalar<float>(3.0f));
  Value* m = g.get_or_create_value("m");
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(4)});
  g.add_node("Mul", {x, two}, {m}, "double");
  g.add_node("Mul", {m, three}, {y}, "triple");
  g.outputs.push_back(y);
  return model;
}

// x's grid (3/8) is not a multiple of m's (1/4): the error of x reaches m and y.
QuantTable chain_table() { return {{"x", params(0.375f)}, {"m", params(0.25f)}, {"y", params(0.5f)}}; }

// What QuantizeLinear -> DequantizeLinear computes for int8, zero point 0.
float qdq(float v, float s) {
  const double q = std::clamp(static_cast<double>(std::nearbyint(v / s)), -128.0, 127.0);
  return static_cast<float>(q) * s;
}

// Samples, some beyond m's range (31.75).
std::vector<float> chain_samples() {
  return {0.3f, -1.07f, 2.61f, 0.049f, 5.33f, -0.77f, 16.4f, 1.01f, -3.3f, 0.62f, -20.0f, 0.2f};
}

// Writes samples [n, 1, 4] to `folder`/x.npy and opens them.
Dataset write_dataset(const test::TempDir& dir, const std::vector<float>& values) {
  const auto n = static_cast<int64_t>(values.size() / 4);
  const std::string path = dir.file("x.npy");
  REQUIRE(write_npy_file(path, Tensor::from_vector<float>({n, 1, 4}, values)).is_ok());
  auto dataset = open_dataset(DataSpec{path});
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  return std::move(*dataset);
}

Model built_qdq(const Model& float_model, const QuantTable& table) {
  auto bytes = export_onnx_bytes(float_model);
  REQUIRE(bytes.has_value());
  auto model = import_onnx_bytes(*bytes, "qdq");
  REQUIRE_MESSAGE(model.has_value(), model.status().message());
  const Status built = build_qdq_model(*model, table, nullptr, QdqOptions{});
  REQUIRE_MESSAGE(built.is_ok(), built.message());
  return std::move(*model);
}

// The metrics computed directly from the definitions, for float values `x` and quantized `q`.
ErrorMetrics expected_metrics(const std::vector<float>& x, const std::vector<float>& q) {
  double dot = 0, xx = 0, qq = 0, ee = 0, mx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    dot += double(x[i]) * q[i];
    xx += double(x[i]) * x[i];
    qq += double(q[i]) * q[i];
    const double e = double(x[i]) - q[i];
    ee += e * e;
    mx = std::max(mx, std::fabs(e));
  }
  ErrorMetrics m;
  m.cosine = dot / std::sqrt(xx * qq);
  m.mse = ee / static_cast<double>(x.size());
  m.max_abs_error = mx;
  m.sqnr_db = ee == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(xx / ee);
  return m;
}

void check_metrics(const ErrorMetrics& got, const ErrorMetrics& want) {
  CHECK(got.cosine == doctest::Approx(want.cosine).epsilon(1e-12));
  CHECK(got.mse == doctest::Approx(want.mse).epsilon(1e-12));
  CHECK(got.max_abs_error == doctest::Approx(want.max_abs_error).epsilon(1e-12));
  CHECK(got.sqnr_db == doctest::Approx(want.sqnr_db).epsilon(1e-12));
}

const LayerRow& row(const LayerComparison& result, const std::string& tensor) {
  for (const LayerRow& r : result.rows)
    if (r.tensor == tensor) return r;
  FAIL("no row for " << tensor);
  return result.rows.front();
}

}  // namespace

TEST_CASE("layer compare: metrics per tensor match values computed by hand") {
  test::TempDir dir("layer_compare");
  const Dataset dataset = write_dataset(dir, chain_samples());
  const Model float_model = chain_model();
  const Model qdq_model = built_qdq(float_model, chain_table());
  auto result = compare_layers(float_model, qdq_model, dataset, 1, 0);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->samples == 3);
  REQUIRE(result->rows.size() == 3);
  CHECK(result->unmatched.empty());

  // Float and quantized values of every tensor, by the definitions of docs/quantization.md.
  std::vector<float> x = chain_samples(), xq, m, mq, m_iso, y, yq, y_iso;
  for (float v : x) {
    const float fm = 2.0f * v, fy = 3.0f * fm;
    xq.push_back(qdq(v, 0.375f));
    m.push_back(fm);
    mq.push_back(qdq(2.0f * xq.back(), 0.25f));
    m_iso.push_back(qdq(2.0f * qdq(v, 0.375f), 0.25f));  // its input pair is x's
    y.push_back(fy);
    yq.push_back(qdq(3.0f * mq.back(), 0.5f));
    y_iso.push_back(qdq(3.0f * qdq(fm, 0.25f), 0.5f));  // float m through m's pair
  }
  const LayerRow& rx = row(*result, "x");
  CHECK(rx.node.empty());
  CHECK(rx.elements == 4);
  check_metrics(rx.accumulated, expected_metrics(x, xq));
  REQUIRE(rx.has_isolated);
  check_metrics(rx.isolated, expected_metrics(x, xq));

  const LayerRow& rm = row(*result, "m");
  CHECK(rm.node == "double");
  CHECK(rm.op_type == "Mul");
  check_metrics(rm.accumulated, expected_metrics(m, mq));
  REQUIRE(rm.has_isolated);
  check_metrics(rm.isolated, expected_metrics(m, m_iso));

  // y is a graph output: the QDQ model's producer writes y_float, the DequantizeLinear y.
  const LayerRow& ry = row(*result, "y");
  CHECK(ry.node == "triple");
  check_metrics(ry.accumulated, expected_metrics(y, yq));
  REQUIRE(ry.has_isolated);
  check_metrics(ry.isolated, expected_metrics(y, y_iso));
  // The error of x and m reaches y only in the accumulated comparison.
  CHECK(y_iso != yq);
  CHECK(ry.isolated.mse < ry.accumulated.mse);

  // Worst first.
  for (std::size_t i = 1; i < result->rows.size(); ++i)
    CHECK(result->rows[i - 1].accumulated.cosine <= result->rows[i].accumulated.cosine);
}

TEST_CASE("layer compare: equal values give SQNR +inf, shown as inf in text and JSON") {
  ErrorSums sums;
  const std::vector<float> v = {1.0f, -2.0f, 0.5f};
  sums.add(v.data(), v.data(), 3);
  const ErrorMetrics m = error_metrics(sums);
  CHECK(m.cosine == 1.0);
  CHECK(m.mse == 0.0);
  CHECK(std::isinf(m.sqnr_db));
  CHECK(m.sqnr_db > 0);
  CHECK(format_db(m.sqnr_db) == "inf");
  CHECK(format_db(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(format_db(12.3456) == "12.35");

  // A table whose scales represent every sample exactly: all tensors compare equal.
  test::TempDir dir("layer_compare_inf");
  const Dataset dataset = write_dataset(dir, {0.75f, -1.5f, 0.75f, 3.0f});
  const Model float_model = chain_model();
  const Model qdq_model = built_qdq(float_model, chain_table());
  auto result = compare_layers(float_model, qdq_model, dataset, 1, 0);
  REQUIRE(result.has_value());
  for (const LayerRow& r : result->rows) CHECK(std::isinf(r.accumulated.sqnr_db));
  const std::string text = layer_comparison_text(*result);
  CHECK(text.find(" inf") != std::string::npos);
  auto json = layer_comparison_json(*result);
  REQUIRE(json.has_value());
  CHECK(json->find("\"sqnr_db\": \"inf\"") != std::string::npos);
}

TEST_CASE("layer compare: error sums are the same bits under every instruction-set cap") {
  // Odd lengths exercise the tail; a NaN error leaves the maximum as std::max does.
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{1000}, int64_t{1001}}) {
    std::vector<float> x(static_cast<std::size_t>(n)), q(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0);
      q[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(i)] + static_cast<float>(std::cos(1.3 * static_cast<double>(i)) * 0.01);
    }
    if (n == 1001) q[5] = std::numeric_limits<float>::quiet_NaN();
    struct Reset {
      ~Reset() { reset_kernel_isa_cap(); }
    } reset;
    std::vector<ErrorSums> under;
    for (const char* cap : {"portable", "avx2", "avx512", "native"}) {
      if (!set_kernel_isa_cap(cap, "test").is_ok()) continue;  // a level this CPU lacks
      ErrorSums sums;
      sums.add(x.data(), q.data(), n);
      under.push_back(sums);
    }
    const auto same_bits = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
    for (const ErrorSums& s : under) {
      CHECK(same_bits(s.dot, under[0].dot));
      CHECK(same_bits(s.float_sq, under[0].float_sq));
      CHECK(same_bits(s.quant_sq, under[0].quant_sq));
      CHECK(same_bits(s.error_sq, under[0].error_sq));
      CHECK(same_bits(s.max_abs, under[0].max_abs));
      CHECK(s.count == n);
    }
    if (n == 1001) {
      CHECK(std::isnan(under[0].dot));
      CHECK(std::isfinite(under[0].max_abs));  // the NaN error is skipped by the maximum
      continue;
    }
    // Against one sequential sum of doubles: the lanes only reorder the additions.
    double dot = 0.0, fsq = 0.0, err = 0.0, mx = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double a = x[static_cast<std::size_t>(i)], b = q[static_cast<std::size_t>(i)];
      dot += a * b;
      fsq += a * a;
      err += (a - b) * (a - b);
      mx = std::max(mx, std::fabs(a - b));
    }
    CHECK(under[0].dot == doctest::Approx(dot).epsilon(1e-14));
    CHECK(under[0].float_sq == doctest::Approx(fsq).epsilon(1e-14));
    CHECK(under[0].error_sq == doctest::Approx(err).epsilon(1e-14));
    CHECK(under[0].max_abs == mx);
  }
}

TEST_CASE("layer compare: rows sort by accumulated cosine, then by name") {
  // Two independent branches: a badly clipped one (b) and an exact one (a, c).
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "test";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(4)});
  g.inputs.push_back(x);
  Value* one = g.get_or_create_value("one");
  g.set_initializer(one, Tensor::scalar<float>(1.0f));
  Value* a = g.get_or_create_value("a");
  Value* b = g.get_or_create_value("b");
  Value* c = g.get_or_create_value("c");
  g.add_node("Mul", {x, one}, {c}, "n_c");
  g.add_node("Mul", {x, one}, {b}, "n_b");
  g.add_node("Mul", {x, one}, {a}, "n_a");
  for (Value* v : {a, b, c}) v->type = float_type({d(1), d(4)});
  g.outputs = {c, b, a};
  test::TempDir dir("layer_compare_sort");
  const Dataset dataset = write_dataset(dir, {0.5f, -1.0f, 0.25f, 2.0f});
  QuantTable table = {{"a", params(0.25f)}, {"b", params(0.0078125f)}, {"c", params(0.25f)}};
  const Model qdq_model = built_qdq(model, table);
  auto result = compare_layers(model, qdq_model, dataset, 1, 0);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  REQUIRE(result->rows.size() == 3);
  CHECK(result->rows[0].tensor == "b");  // clipped to +-1
  CHECK(result->rows[0].accumulated.cosine < 1.0);
  CHECK(result->rows[1].tensor == "a");  // exact, equal cosines: by name
  CHECK(result->rows[2].tensor == "c");
}

TEST_CASE("layer compare: a PTQ model with weights and biases; 1 and 2 threads agree exactly") {
  // x[1,2,3,3] -> Conv(W, B) -> c -> Relu -> r -> Conv(W2) -> y
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "test";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(2), d(3), d(3)});
  g.inputs.push_back(x);
  Value* w = g.get_or_create_value("W");
  g.set_initializer(w, Tensor::from_vector<float>({3, 2, 1, 1}, {0.3f, -1.0f, 0.25f, 0.1f, 0.7f, -0.2f}));
  Value* bias = g.get_or_create_value("B");
  g.set_initializer(bias, Tensor::from_vector<float>({3}, {0.1f, -0.2f, 0.05f}));
  Value* w2 = g.get_or_create_value("W2");
  g.set_initializer(w2, Tensor::from_vector<float>({1, 3, 3, 3}, std::vector<float>(27, 0.11f)));
  Value* c = g.get_or_create_value("c");
  Value* r = g.get_or_create_value("r");
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(1), d(1), d(1)});
  g.add_node("Conv", {x, w, bias}, {c}, "conv");
  g.add_node("Relu", {c}, {r}, "relu");
  g.add_node("Conv", {r, w2}, {y}, "conv2");
  g.outputs.push_back(y);
  std::vector<float> samples;
  for (int i = 0; i < 7 * 18; ++i) samples.push_back(static_cast<float>(std::sin(0.71 * i) * 1.7));
  test::TempDir dir("layer_compare_threads");
  const std::string path = dir.file("x.npy");
  REQUIRE(write_npy_file(path, Tensor::from_vector<float>({7, 2, 3, 3}, samples)).is_ok());
  auto dataset = open_dataset(DataSpec{path});
  REQUIRE(dataset.has_value());
  QuantTable table = {{"x", params(1.7f / 127)}, {"c", params(2.0f / 127)}, {"r", params(2.0f / 127)},
                      {"y", params(4.0f / 127)}};
  const Model qdq_model = built_qdq(model, table);

  auto one = compare_layers(model, qdq_model, *dataset, 1, 0);
  REQUIRE_MESSAGE(one.has_value(), one.status().message());
  auto two = compare_layers(model, qdq_model, *dataset, 2, 0);
  REQUIRE(two.has_value());
  auto three = compare_layers(model, qdq_model, *dataset, 3, 5);
  REQUIRE(three.has_value());
  CHECK(three->samples == 5);
  REQUIRE(one->rows.size() == 4);
  REQUIRE(two->rows.size() == 4);
  for (std::size_t i = 0; i < one->rows.size(); ++i) {
    const LayerRow& a = one->rows[i];
    const LayerRow& b = two->rows[i];
    CHECK(a.tensor == b.tensor);
    CHECK(a.has_isolated);
    CHECK(a.accumulated.cosine == b.accumulated.cosine);
    CHECK(a.accumulated.mse == b.accumulated.mse);
    CHECK(a.accumulated.max_abs_error == b.accumulated.max_abs_error);
    CHECK(a.accumulated.sqnr_db == b.accumulated.sqnr_db);
    CHECK(a.isolated.cosine == b.isolated.cosine);
    CHECK(a.isolated.mse == b.isolated.mse);
    CHECK(a.accumulated.cosine > 0.9);
    CHECK(a.isolated.cosine > 0.9);
  }
  CHECK(layer_comparison_text(*one) == layer_comparison_text(*two));
  // conv's isolated run uses the quantized weight and the int32 bias of the PTQ model, fed
  // the float x through x's pair: the same as the accumulated run, x being the graph input.
  const LayerRow& rc = row(*one, "c");
  CHECK(rc.isolated.cosine == rc.accumulated.cosine);
  // y's accumulated error includes every layer before it; isolated only conv2's.
  const LayerRow& ry = row(*one, "y");
  CHECK(ry.isolated.mse < ry.accumulated.mse);
}

TEST_CASE("layer compare: errors") {
  test::TempDir dir("layer_compare_errors");
  const Dataset dataset = write_dataset(dir, chain_samples());
  const Model float_model = chain_model();
  // A model without Q/DQ pairs has nothing to compare.
  auto none = compare_layers(float_model, float_model, dataset, 1, 0);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.status().message().find("no quantized activation") != std::string::npos);

  // A QDQ model whose m has twice the float model's elements (x concatenated with itself):
  // the failure is reported whichever run's thread compares the pair.
  Model other;
  other.opset_imports.push_back({"", 13});
  Graph& g = *other.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(4)});
  g.inputs.push_back(x);
  Value* m = g.get_or_create_value("m");
  Node* concat = g.add_node("Concat", {x, x}, {m}, "double");
  concat->set_attribute(Attribute::make_int("axis", 1));
  Value* y = g.get_or_create_value("y");
  y->type = float_type({d(1), d(8)});
  g.add_node("Relu", {m}, {y}, "triple");
  g.outputs.push_back(y);
  const Model wider = built_qdq(other, QuantTable{{"m", params(0.25f)}});
  for (int threads : {1, 2}) {
    auto mismatch = compare_layers(float_model, wider, dataset, threads, 0);
    REQUIRE_FALSE(mismatch.has_value());
    CHECK(mismatch.status().message().find("tensor 'm' has 4 elements in the float model and 8 in the QDQ model") !=
          std::string::npos);
  }
}

}  // namespace qflow

namespace qflow {

TEST_CASE("layer compare: a narrowed grid's Clip is part of its pair; a model's own Clip after a DequantizeLinear is not") {
  // x -> Mul(1) -> a (graph output, 2-bit grid); x -> Mul(1) -> b (int8) -> Clip(0, 6) -> r.
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "test";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(4)});
  g.inputs.push_back(x);
  Value* one = g.get_or_create_value("one");
  g.set_initializer(one, Tensor::scalar<float>(1.0f));
  Value* zero = g.get_or_create_value("zero");
  g.set_initializer(zero, Tensor::scalar<float>(0.0f));
  Value* six = g.get_or_create_value("six");
  g.set_initializer(six, Tensor::scalar<float>(6.0f));
  Value* a = g.get_or_create_value("a");
  Value* b = g.get_or_create_value("b");
  Value* r = g.get_or_create_value("r");
  g.add_node("Mul", {x, one}, {a}, "n_a");
  g.add_node("Mul", {x, one}, {b}, "n_b");
  g.add_node("Clip", {b, zero, six}, {r}, "relu6");
  for (Value* v : {a, b, r}) v->type = float_type({d(1), d(4)});
  g.outputs = {a, r};
  test::TempDir dir("layer_compare_grid_clip");
  const Dataset dataset = write_dataset(dir, {0.5f, -1.0f, 0.25f, 2.0f});
  QuantTable table = {{"a", params(0.25f)}, {"b", params(0.25f)}};
  table["a"].bits = 2;  // [-2, 1] steps of 0.25: [-0.5, 0.25]
  const Model qdq_model = built_qdq(model, table);
  auto result = compare_layers(model, qdq_model, dataset, 1, 0);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  REQUIRE(result->rows.size() == 2);
  CHECK(result->unmatched.empty());
  // a on the 2-bit grid: 0.5 -> 0.25, -1 -> -0.5, 0.25, 2 -> 0.25.
  CHECK(result->rows[0].tensor == "a");
  CHECK(result->rows[0].accumulated.mse == doctest::Approx((0.0625 + 0.25 + 0.0 + 3.0625) / 4.0));
  REQUIRE(result->rows[0].has_isolated);
  CHECK(result->rows[0].isolated.mse == doctest::Approx(result->rows[0].accumulated.mse));
  // b is compared before the model's Clip: every sample on the int8 grid, exact.
  CHECK(result->rows[1].tensor == "b");
  CHECK(result->rows[1].accumulated.mse == 0.0);
}

}  // namespace qflow
