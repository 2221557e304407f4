// Tests of expected_quantization_mse(), mse_threshold() and the mse calibrator.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "plugins/calibrators/histogram_thresholds.h"
#include "plugins/calibrators/mse_calibrator.h"

namespace qflow {
namespace {

TensorStatistics histogram_stats(std::vector<double> counts, double range) {
  TensorStatistics s;
  for (double c : counts) s.count += static_cast<int64_t>(c);
  s.min = -range;
  s.max = range;
  s.histogram = std::move(counts);
  s.histogram_range = range;
  return s;
}

Expected<QuantTable> run(const std::map<std::string, TensorStatistics>& stats,
                         const std::map<std::string, QuantSpec>& specs = {}) {
  auto calibrator = MseCalibrator::create(Options{});
  if (!calibrator) return calibrator.status();
  CalibrationRequest request;
  request.statistics = &stats;
  request.specs = &specs;
  return calibrator.value()->calibrate(request);
}

TEST_CASE("mse: expected error with the mass of each bin at its centre") {
  // Centres 0.5 and 1.5, one value each, qmax 2.
  const std::vector<double> counts = {1, 1};
  // t = 1, s = 0.5: 0.5 is on the grid; 1.5 is clipped to 1: (0.25 + 0) / 2.
  CHECK(expected_quantization_mse(counts, 2.0, 1.0, 2.0) == 0.125);
  // t = 2, s = 1: 0.5 rounds (half to even) to 0, 1.5 to 2: (0.25 + 0.25) / 2.
  CHECK(expected_quantization_mse(counts, 2.0, 2.0, 2.0) == 0.25);
  // t = 0 clips everything to 0: (0.25 + 2.25) / 2.
  CHECK(expected_quantization_mse(counts, 2.0, 0.0, 2.0) == 1.25);
  // t = 3, s = 1.5: 0.5 / 1.5 rounds to 0, 1.5 is on the grid: 0.25 / 2.
  CHECK(expected_quantization_mse(counts, 2.0, 3.0, 2.0) == 0.125);
  // Weights: three values at 0.5, one at 1.5, t = 1: 0.25 / 4.
  CHECK(expected_quantization_mse({3, 1}, 2.0, 1.0, 2.0) == 0.0625);
  // Range 0: every value is 0 and costs nothing.
  CHECK(expected_quantization_mse({4}, 0.0, 0.0, 127.0) == 0.0);
}

TEST_CASE("mse: the threshold is the bin edge with the smallest error, ties to the smaller") {
  CHECK(mse_threshold({1, 1}, 2.0, 2.0) == 1.0);  // 0.125 at 1 against 0.25 at 2
  // Centres 0.5 (three values) and 3.5 (one), qmax 1, edges 1..4:
  //  t=1: 0.75 + 2.5^2 = 7     t=2: 0.75 + 1.5^2 = 3
  //  t=3: 0.75 + 0.5^2 = 1     t=4: 0.75 + (3.5 - 4)^2 = 1  (3.5 / 4 rounds to 1)
  const std::vector<double> counts = {3, 0, 0, 1};
  CHECK(expected_quantization_mse(counts, 4.0, 3.0, 1.0) == 0.25);
  CHECK(expected_quantization_mse(counts, 4.0, 4.0, 1.0) == 0.25);
  CHECK(expected_quantization_mse(counts, 4.0, 2.0, 1.0) == 0.75);
  CHECK(mse_threshold(counts, 4.0, 1.0) == 3.0);
  CHECK(mse_threshold({5}, 0.0, 127.0) == 0.0);
}

TEST_CASE("mse: the chosen edge minimises expected_quantization_mse over all edges") {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int bins = 256;
  std::vector<double> counts(bins, 0.0);
  std::vector<double> values;
  double range = 0.0;
  for (int k = 0; k < 20000; ++k) {
    values.push_back(std::fabs(normal(rng)));
    range = std::max(range, values.back());
  }
  for (double v : values) counts[std::min(bins - 1, static_cast<int>(v / range * bins))] += 1.0;
  for (double qmax : {7.0, 127.0}) {
    const double t = mse_threshold(counts, range, qmax);
    const double at_t = expected_quantization_mse(counts, range, t, qmax);
    double best = at_t;
    for (int edge = 1; edge <= bins; ++edge)
      best = std::min(best, expected_quantization_mse(counts, range, edge * range / bins, qmax));
    INFO("qmax " << qmax << " threshold " << t);
    CHECK(at_t <= best * (1.0 + 1e-9));
    CHECK(t < range);  // a Gaussian's sparse tail is worth clipping
  }
}

TEST_CASE("mse: error_qmax follows the spec") {
  TensorStatistics signed_range;
  signed_range.min = -1.0;
  signed_range.max = 1.0;
  TensorStatistics relu;
  relu.min = 0.0;
  relu.max = 1.0;
  QuantSpec spec;
  CHECK(error_qmax(spec, signed_range) == 127.0);
  spec.activation_dtype = DType::Int16;
  CHECK(error_qmax(spec, signed_range) == 32767.0);
  spec.symmetric = false;
  CHECK(error_qmax(spec, signed_range) == 32767.5);
  CHECK(error_qmax(spec, relu) == 65535.0);
  spec.activation_dtype = DType::UInt8;
  CHECK(error_qmax(spec, relu) == 255.0);
  CHECK(error_qmax(spec, signed_range) == 127.5);
}

TEST_CASE("mse: the calibrator uses the spec's qmax and needs histograms") {
  // {3, 0, 0, 1} over [0, 4], centres 0.5 and 3.5. int8 (qmax 127): t = 4 rounds both to
  // within 0.004 (16 and 111 steps of 4/127), t = 3 clips 3.5 by 0.5: the full range wins
  // (with qmax 1 above, 3 won).
  auto table = run({{"t", histogram_stats({3, 0, 0, 1}, 4.0)}});
  REQUIRE(table.has_value());
  CHECK(table->at("t").threshold == 4.0);
  CHECK(table->at("t").scale[0] == static_cast<float>(4.0 / 127.0));
  CHECK(table->at("t").method == "mse");
  // uint8 on a ReLU range: qmax 255, scale t / 255, zero point 0.
  TensorStatistics relu = histogram_stats({3, 0, 0, 1}, 4.0);
  relu.min = 0.0;
  QuantSpec uint8;
  uint8.activation_dtype = DType::UInt8;
  auto unsigned_table = run({{"r", relu}}, {{"r", uint8}});
  REQUIRE(unsigned_table.has_value());
  CHECK(unsigned_table->at("r").threshold == mse_threshold({3, 0, 0, 1}, 4.0, 255.0));
  CHECK(unsigned_table->at("r").scale[0] ==
        static_cast<float>(unsigned_table->at("r").threshold / 255.0));
  CHECK(unsigned_table->at("r").zero_point == std::vector<int64_t>{0});

  TensorStatistics bare;
  bare.count = 1;
  bare.min = bare.max = 1.0;
  auto missing = run({{"x", bare}});
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().message() == "mse calibrator: tensor 'x' has no histogram (observe with 'histogram')");
  CHECK(MseCalibrator::info().options.empty());
}

}  // namespace
}  // namespace qflow
