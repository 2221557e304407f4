// Every histogram calibrator on distributions of every shape real models produce: gates in
// [0.06, 0.8] (mass away from zero), post-ReLU spikes at zero, heavy tails, Gaussians and
// constant tensors. Statistics come from the histogram observer over generated samples; the
// error of each method's parameters is measured on those samples, not on the histogram.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "calibrate_tensor.h"
#include "plugins/calibrators/histogram_thresholds.h"
#include "qflow/quant/quant_math.h"

namespace qflow {
namespace {

struct Distribution {
  std::string name;
  std::vector<float> values;
};

std::vector<float> generate(std::size_t n, const std::function<float(std::mt19937&)>& draw) {
  std::mt19937 rng(12345);
  std::vector<float> v(n);
  for (float& x : v) x = draw(rng);
  return v;
}

std::vector<Distribution> distributions() {
  constexpr std::size_t n = 20000;
  std::vector<Distribution> d;
  // Squeeze-excitation gates: HardSigmoid outputs, all mass in [0.06, 0.81].
  d.push_back({"gate", generate(n, [](std::mt19937& r) {
                 return std::uniform_real_distribution<float>(0.06f, 0.81f)(r);
               })});
  // A narrow offset bump: mass around 3 with nothing near zero.
  d.push_back({"offset", generate(n, [](std::mt19937& r) { return std::normal_distribution<float>(3.0f, 0.2f)(r); })});
  // Post-ReLU: 60 % exact zeros, an exponential tail.
  d.push_back({"relu", generate(n, [](std::mt19937& r) {
                 if (std::uniform_real_distribution<float>(0.0f, 1.0f)(r) < 0.6f) return 0.0f;
                 return std::exponential_distribution<float>(1.0f)(r);
               })});
  // Heavy tail: Laplace bulk with rare outliers 40x out.
  d.push_back({"heavy", generate(n, [](std::mt19937& r) {
                 const float u = std::uniform_real_distribution<float>(-0.5f, 0.5f)(r);
                 const float laplace = (u < 0 ? 1.0f : -1.0f) * std::log(1.0f - 2.0f * std::fabs(u));
                 return std::uniform_real_distribution<float>(0.0f, 1.0f)(r) < 0.0005f ? 40.0f * laplace : laplace;
               })});
  d.push_back({"gaussian", generate(n, [](std::mt19937& r) { return std::normal_distribution<float>(0.0f, 1.0f)(r); })});
  d.push_back({"constant", std::vector<float>(n, 0.5f)});
  d.push_back({"negative-constant", std::vector<float>(n, -2.0f)});
  return d;
}

// Mean squared error of quantize-dequantize with `p` over the samples.
double measured_mse(const std::vector<float>& values, const QuantParams& p) {
  const QuantRange range = quant_range(p.dtype);
  const double scale = p.scale.at(0);
  const auto zp = static_cast<double>(p.zero_point.at(0));
  double sum = 0.0;
  for (float x : values) {
    const double q = std::clamp(round_half_even(x / scale) + zp, static_cast<double>(range.min),
                                static_cast<double>(range.max));
    const double e = (q - zp) * scale - x;
    sum += e * e;
  }
  return sum / static_cast<double>(values.size());
}

// |x| below which `percent` of the samples lie.
double quantile_abs(std::vector<float> values, double percent) {
  for (float& x : values) x = std::fabs(x);
  std::sort(values.begin(), values.end());
  const auto k = static_cast<std::size_t>(percent / 100.0 * static_cast<double>(values.size() - 1));
  return values[k];
}

using test::calibrate_tensor;
using test::observe;
using test::defaults;

const std::vector<std::string> kMethods = {"max", "percentile", "kl", "mse", "mix"};

void check_all_shapes(const QuantSpec& spec) {
  for (const Distribution& d : distributions()) {
    const TensorStatistics stats = observe(d.values);
    std::map<std::string, double> error;
    std::map<std::string, double> threshold;
    for (const std::string& method : kMethods) {
      const QuantParams p = calibrate_tensor(method, stats, spec);
      error[method] = measured_mse(d.values, p);
      threshold[method] = p.threshold;
    }
    double best = error.begin()->second;
    for (const auto& [method, e] : error) best = std::min(best, e);
    // The bulk: 99 % of |x| lies below it; no method with default options clips below it.
    const double bulk = quantile_abs(d.values, 99.0);
    for (const std::string& method : kMethods) {
      INFO(d.name << " " << method << ": threshold " << threshold[method] << " bulk " << bulk << " error "
                  << error[method] << " best " << best);
      CHECK(threshold[method] >= bulk * (1.0 - 1e-3));
      // Outside heavy tails (where clipping the outliers is each method's own trade, and
      // the squared error favours keeping them) every method stays within a small factor
      // of the best; a threshold below the bulk costs orders of magnitude more. Step: the
      // error of one rounding step at the bulk, for the constant tensors' exact zeros.
      const double step = bulk / 127.0;
      if (d.name != "heavy") CHECK(error[method] <= 10.0 * best + 0.01 * step * step);
    }
    // mix keeps the method with the smallest expected error: never worse than mse by more
    // than the histogram model's resolution.
    CHECK(error["mix"] <= 1.5 * error["mse"] + 1e-12);
  }
}

TEST_CASE("calibrator distributions: symmetric int8 never clips below the bulk and stays near the best error") {
  QuantSpec spec;
  check_all_shapes(spec);
}

TEST_CASE("calibrator distributions: asymmetric uint8 never clips below the bulk and stays near the best error") {
  QuantSpec spec;
  spec.activation_dtype = DType::UInt8;
  spec.symmetric = false;
  check_all_shapes(spec);
}

TEST_CASE("calibrator distributions: at 16 bits kl, mse and percentile keep the observed range") {
  QuantSpec spec16;
  spec16.activation_dtype = DType::Int16;
  const QuantSpec spec8;
  for (const Distribution& d : distributions()) {
    const TensorStatistics stats = observe(d.values);
    const double magnitude = std::max(std::fabs(stats.min), std::fabs(stats.max));
    for (const char* method : {"kl", "mse", "percentile"}) {
      INFO(d.name << " " << method);
      const QuantParams wide = calibrate_tensor(method, stats, spec16);
      CHECK(wide.dtype == DType::Int16);
      CHECK(wide.threshold == magnitude);
      CHECK(wide.method == method);
      // The 8-bit threshold at 16 bits never has the smaller error (heavy tails left out:
      // there clipping the rare outliers is each method's own trade).
      const QuantParams clipped = calibrate_tensor(method, stats, spec8);
      auto at16 = activation_params(spec16, stats, clipped.threshold, method, "t");
      REQUIRE(at16);
      if (d.name != "heavy") CHECK(measured_mse(d.values, wide) <= measured_mse(d.values, *at16) * (1.0 + 1e-9));
    }
  }
}

TEST_CASE("calibrator distributions: kl's bulk floor is an option; 100 restores the plain search") {
  // The gate distribution: the plain search picks the first non-empty bin.
  const std::vector<float> gate = distributions().front().values;
  const TensorStatistics stats = observe(gate);
  Options plain = defaults<KlCalibrator>();
  plain.set("max-clipped", 100.0);
  auto calibrator = KlCalibrator::create(plain);
  REQUIRE(calibrator);
  const std::map<std::string, TensorStatistics> statistics = {{"t", stats}};
  CalibrationRequest request;
  request.statistics = &statistics;
  auto table = (*calibrator)->calibrate(request);
  REQUIRE(table);
  CHECK(table->at("t").threshold < 0.07);  // the degenerate threshold the floor prevents
  Options bad = defaults<KlCalibrator>();
  bad.set("max-clipped", 101.0);
  auto refused = KlCalibrator::create(bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().message() == "kl calibrator: option max-clipped must be in [0, 100], got 101.000000");
}

TEST_CASE("bulk_edge: the smallest edge that clips at most the given share") {
  CHECK(bulk_edge({1, 1, 1, 1}, 0.0) == 4);
  CHECK(bulk_edge({1, 1, 1, 1}, 25.0) == 3);
  CHECK(bulk_edge({1, 1, 1, 1}, 24.0) == 4);
  CHECK(bulk_edge({1, 1, 0, 0}, 0.0) == 2);  // empty bins on top clip nothing
  CHECK(bulk_edge({4, 0, 0, 0}, 100.0) == 0);
}

}  // namespace
}  // namespace qflow
