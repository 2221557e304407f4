// Activation grids narrowed by activation-bits: every calibrator computes its threshold for
// the grid and the QDQ model it calibrates keeps the values on it; the calibration table
// records the bits; the bpu target refuses widths other than 8 and 16.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "calibrate_tensor.h"
#include "framework/interpreter/executor.h"
#include "framework/quant/qdq_builder.h"
#include "plugins/backends/bpu/bpu_target.h"
#include "plugins/calibrators/histogram_thresholds.h"
#include "plugins/calibrators/load_calibrator.h"
#include "qflow/quant/quant_math.h"

namespace qflow {
namespace {

// Gaussian bulk with rare outliers 12x out, shifted so both signs occur unevenly.
std::vector<float> samples() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.3f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(4096);
  for (float& x : v) x = u(rng) < 0.002f ? 12.0f * normal(rng) : normal(rng);
  return v;
}

using test::calibrate_tensor;
using test::observe;

QuantSpec grid_spec(DType dtype, int bits, bool symmetric) {
  QuantSpec spec;
  spec.activation_dtype = dtype;
  spec.activation_bits = bits;
  spec.symmetric = symmetric;
  return spec;
}

// x[1,n] -> Neg -> y, only x quantized: y is minus what Neg read.
Model neg_model(int64_t n) {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  ValueType type;
  type.dtype = DType::Float32;
  type.shape = std::vector<Dim>{Dim{1, "", ""}, Dim{n, "", ""}};
  x->type = type;
  g.inputs.push_back(x);
  Value* y = g.get_or_create_value("y");
  y->type = type;
  g.add_node("Neg", {x}, {y}, "neg");
  g.outputs.push_back(y);
  return model;
}

// Runs the QDQ model of `params` on the calibration values; every value Neg read must be
// (q - zp) * s in float32 for an integer q on the grid. Returns the smallest and largest q.
std::pair<int64_t, int64_t> check_on_grid(const std::vector<float>& values, const QuantParams& params) {
  const auto n = static_cast<int64_t>(values.size());
  Model model = neg_model(n);
  QdqOptions options;
  options.weights = false;
  REQUIRE(build_qdq_model(model, {{"x", params}}, nullptr, options).is_ok());
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto out = (*executor)->run({{"x", Tensor::from_vector<float>({1, n}, values)}});
  REQUIRE(out.has_value());
  const QuantRange grid = grid_range(params);
  const float s = params.scale.front();
  const auto zp = static_cast<float>(params.zero_point.front());
  int off = 0;
  float lo = std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::lowest();
  for (int64_t i = 0; i < n; ++i) {
    const float v = -out->at("y").data<float>()[i];
    const float q = std::nearbyint(v / s) + zp;
    if (q < static_cast<float>(grid.min) || q > static_cast<float>(grid.max) || (q - zp) * s != v) ++off;
    lo = std::min(lo, q);
    hi = std::max(hi, q);
  }
  CHECK(off == 0);
  return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

const std::vector<std::string> kMethods = {"max", "percentile", "kl", "mse", "mix"};

}  // namespace

TEST_CASE("activation-bits: every calibrator's parameters keep the calibration data on the narrowed grid") {
  const std::vector<float> values = samples();
  const TensorStatistics stats = observe(values);
  for (const QuantSpec& spec : {grid_spec(DType::Int8, 4, true), grid_spec(DType::Int8, 3, false),
                                grid_spec(DType::UInt8, 4, false), grid_spec(DType::Int8, 6, true)}) {
    const QuantRange grid = activation_grid(spec);
    for (const std::string& method : kMethods) {
      CAPTURE(method);
      CAPTURE(dtype_name(spec.activation_dtype));
      CAPTURE(spec.activation_bits);
      const QuantParams p = calibrate_tensor(method, stats, spec);
      CHECK(p.dtype == spec.activation_dtype);
      CHECK(p.bits == spec.activation_bits);
      CHECK(p.zero_point.front() >= grid.min);
      CHECK(p.zero_point.front() <= grid.max);
      if (spec.symmetric && is_signed_quant(spec.activation_dtype) && p.threshold > 0.0)
        CHECK(p.scale.front() == static_cast<float>(p.threshold / static_cast<double>(grid.max)));
      const auto [lo, hi] = check_on_grid(values, p);
      // Every threshold is at most the observed range, so the data reaches the grid's edge
      // (+-qmax on a symmetric grid) and the Clip, not the container, bounds it.
      CHECK((hi == grid.max || lo == grid.min || (p.zero_point.front() == 0 && lo == -grid.max)));
    }
  }
}

TEST_CASE("activation-bits: KL merges into 2^(b-1) levels, MSE models 2^(b-1)-1 steps") {
  const TensorStatistics stats = observe(samples());
  const QuantSpec four = grid_spec(DType::Int8, 4, true);
  CHECK(kl_grid_bins(128, four) == 8);
  CHECK(kl_grid_bins(128, grid_spec(DType::Int8, 2, true)) == 2);
  CHECK(kl_grid_bins(128, grid_spec(DType::Int8, 8, true)) == 128);
  CHECK(kl_grid_bins(128, grid_spec(DType::Int16, 12, true)) == 128);
  CHECK(kl_grid_bins(256, grid_spec(DType::UInt8, 6, false)) == 64);
  // On a Gaussian, 8 levels clip harder than 128, and the kl calibrator takes the 8-level one.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> gaussian(16384);
  for (float& x : gaussian) x = normal(rng);
  const TensorStatistics g = observe(gaussian);
  auto kl4 = kl_tensor_threshold(g, 8, true, kKlMaxClippedPercent, "kl", "x");
  auto kl8 = kl_tensor_threshold(g, 128, true, kKlMaxClippedPercent, "kl", "x");
  REQUIRE(kl4.has_value());
  REQUIRE(kl8.has_value());
  CHECK(*kl4 < *kl8);
  CHECK(calibrate_tensor("kl", g, four).threshold == *kl4);
  CHECK(calibrate_tensor("kl", g, grid_spec(DType::Int8, 8, true)).threshold == *kl8);
  CHECK(error_qmax(four, stats) == 7.0);
  CHECK(error_qmax(grid_spec(DType::UInt8, 4, false), stats) == 7.5);  // 15 steps, both signs observed
  CHECK(calibrate_tensor("mse", stats, four).threshold == mse_threshold(stats.histogram, stats.histogram_range, 7.0));
  // Fewer levels clip harder: the 4-bit MSE threshold lies below the 8-bit one.
  CHECK(calibrate_tensor("mse", stats, four).threshold < calibrate_tensor("mse", stats, grid_spec(DType::Int8, 8, true)).threshold);
}

TEST_CASE("activation-bits: a calibration table with bits reads back; without them it is the full range") {
  auto parsed = LoadCalibrator::parse_table(
      R"({"tensors": {"a": {"axis": -1, "bits": 4, "dtype": "int8", "method": "kl", "scale": [0.25], "threshold": 1.75,
          "zero_point": [0]}, "u": {"axis": -1, "bits": 12, "dtype": "uint16", "method": "max", "scale": [0.5],
          "threshold": 2, "zero_point": [4095]}, "f": {"axis": -1, "dtype": "int8", "method": "max", "scale": [0.5],
          "threshold": 63.5, "zero_point": [0]}}})",
      "t.json");
  REQUIRE_MESSAGE(parsed.has_value(), parsed.status().message());
  CHECK(parsed->at("a").bits == 4);
  CHECK(parsed->at("u").bits == 12);
  CHECK(parsed->at("f").bits == 0);
  auto error = [](const std::string& fields) {
    auto bad = LoadCalibrator::parse_table(R"({"tensors": {"a": {"axis": -1, )" + fields +
                                               R"(, "method": "kl", "scale": [0.25], "threshold": 1}}})",
                                           "t.json");
    REQUIRE_FALSE(bad.has_value());
    return bad.status().message();
  };
  CHECK(error(R"("bits": 8, "dtype": "int8", "zero_point": [0])") ==
        "load calibrator: t.json: tensor 'a': field 'bits': expected an integer from 2 to 7 for int8");
  CHECK(error(R"("bits": "4", "dtype": "int8", "zero_point": [0])") ==
        "load calibrator: t.json: tensor 'a': field 'bits': expected an integer from 2 to 7 for int8");
  CHECK(error(R"("bits": 4, "dtype": "uint8", "zero_point": [16])") ==
        "load calibrator: t.json: tensor 'a': field 'zero_point': element 0 is 16, expected an integer in [0, 15] for "
        "uint8 (4 bits)");
}

TEST_CASE("activation-bits: the bpu target refuses widths other than 8 and 16, naming the entry") {
  Options options;
  options.set("platform", std::string("bernoulli2"));
  options.set("platform-dir", std::string(QFLOW_BPU_PLATFORM_DIR));
  options.set("run-on-cpu", std::vector<std::string>{});
  options.set("run-on-bpu", std::vector<std::string>{});
  auto target = BpuTarget::create(options);
  REQUIRE_MESSAGE(target.has_value(), target.status().message());
  QuantConfig config;
  config.model.activation_bits = 8;
  config.op_types["Softmax"].activation_bits = 16;
  CHECK((*target)->check_quantization(config).is_ok());
  config.nodes["conv1"].activation_bits = 4;
  const Status refused = (*target)->check_quantization(config);
  CHECK(refused.code() == StatusCode::Unsupported);
  CHECK(refused.message() ==
        "node 'conv1': activation-bits 4 cannot be deployed on the bpu target (supported activation widths: 8, 16)");
  config.nodes.clear();
  config.model.activation_bits = 6;
  CHECK((*target)->check_quantization(config).message() ==
        "[quantization]: activation-bits 6 cannot be deployed on the bpu target (supported activation widths: 8, 16)");
}

}  // namespace qflow
