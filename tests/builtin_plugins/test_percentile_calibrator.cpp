// Tests of percentile_threshold() and the percentile calibrator on hand-computed histograms.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "plugins/calibrators/histogram_thresholds.h"
#include "plugins/calibrators/percentile_calibrator.h"

namespace qflow {
namespace {

// Statistics as the histogram observer records them: |x| counts over [0, range].
TensorStatistics histogram_stats(std::vector<double> counts, double range) {
  TensorStatistics s;
  for (double c : counts) s.count += static_cast<int64_t>(c);
  s.min = -range;
  s.max = range;
  s.histogram = std::move(counts);
  s.histogram_range = range;
  return s;
}

Expected<QuantTable> run(double percentile, const std::map<std::string, TensorStatistics>& stats,
                         const std::map<std::string, QuantSpec>& specs = {}) {
  Options options;
  options.set("percentile", percentile);
  auto calibrator = PercentileCalibrator::create(options);
  if (!calibrator) return calibrator.status();
  CalibrationRequest request;
  request.statistics = &stats;
  request.specs = &specs;
  return calibrator.value()->calibrate(request);
}

TEST_CASE("percentile: linear interpolation inside the bin that reaches the target") {
  // Bin width 1; cumulative counts 2, 6, 8, 10.
  const std::vector<double> counts = {2, 4, 2, 2};
  CHECK(percentile_threshold(counts, 4.0, 50.0) == 1.75);  // target 5: bin 1, (5 - 2) / 4
  CHECK(percentile_threshold(counts, 4.0, 90.0) == 3.5);   // target 9: bin 3, (9 - 8) / 2
  CHECK(percentile_threshold(counts, 4.0, 20.0) == 1.0);   // target 2: the whole of bin 0
  CHECK(percentile_threshold(counts, 4.0, 100.0) == 4.0);  // the upper edge of the last bin
  // Width 0.5: the same fractions, half the values.
  CHECK(percentile_threshold(counts, 2.0, 50.0) == 0.875);
}

TEST_CASE("percentile: empty bins are stepped over") {
  const std::vector<double> counts = {0, 3, 0, 1, 0};  // width 2
  CHECK(percentile_threshold(counts, 10.0, 75.0) == 4.0);   // target 3: all of bin 1
  CHECK(percentile_threshold(counts, 10.0, 80.0) == doctest::Approx(6.4));  // target 3.2: bin 3, 0.2 in
  CHECK(percentile_threshold(counts, 10.0, 100.0) == 8.0);  // the last non-empty bin's edge, not the range
  CHECK(percentile_threshold(counts, 10.0, 1.0) == doctest::Approx(2.0 + 2.0 * 0.04 / 3.0));
}

TEST_CASE("percentile: the calibrator turns the threshold into parameters under the spec") {
  QuantSpec int16;
  int16.activation_dtype = DType::Int16;
  auto table = run(50.0, {{"a", histogram_stats({2, 4, 2, 2}, 4.0)}, {"b", histogram_stats({2, 4, 2, 2}, 4.0)}},
                   {{"b", int16}});
  REQUIRE(table.has_value());
  const QuantParams& a = table->at("a");
  CHECK(a.threshold == 1.75);
  CHECK(a.scale[0] == static_cast<float>(1.75 / 127.0));
  CHECK(a.zero_point == std::vector<int64_t>{0});
  CHECK(a.method == "percentile");
  CHECK(table->at("b").dtype == DType::Int16);
  // At 16 bits the observed range, not the percentile (histogram_thresholds.h).
  CHECK(table->at("b").threshold == 4.0);
  CHECK(table->at("b").scale[0] == static_cast<float>(4.0 / 32767.0));
}

TEST_CASE("percentile: an all-zero tensor (range 0) gets threshold 0") {
  auto table = run(99.99, {{"z", histogram_stats({5, 0, 0}, 0.0)}});
  REQUIRE(table.has_value());
  CHECK(table->at("z").threshold == 0.0);
  CHECK(table->at("z").scale[0] == static_cast<float>(1.0 / 127.0));
}

TEST_CASE("percentile: tensors without a histogram or without finite values are errors") {
  TensorStatistics no_histogram;
  no_histogram.count = 3;
  no_histogram.min = -1.0;
  no_histogram.max = 1.0;
  auto missing = run(99.99, {{"ok", histogram_stats({1, 1}, 1.0)}, {"x", no_histogram}});
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().message() == "percentile calibrator: tensor 'x' has no histogram (observe with 'histogram')");

  TensorStatistics nan_only;
  nan_only.nan_count = 2;
  auto nan = run(99.99, {{"n", nan_only}});
  REQUIRE_FALSE(nan.has_value());
  CHECK(nan.status().message() ==
        "percentile calibrator: tensor 'n' has no finite values (2 NaN, 0 Inf): no range to calibrate");

  TensorStatistics empty_bins = histogram_stats({0, 0}, 1.0);
  empty_bins.count = 4;
  auto hollow = run(99.99, {{"h", empty_bins}});
  REQUIRE_FALSE(hollow.has_value());
  CHECK(hollow.status().message() == "percentile calibrator: tensor 'h': histogram holds no counts");

  TensorStatistics negative_bin = histogram_stats({1, -1}, 1.0);
  negative_bin.count = 2;
  auto negative = run(99.99, {{"g", negative_bin}});
  REQUIRE_FALSE(negative.has_value());
  CHECK(negative.status().message().find("histogram bin 1 holds") != std::string::npos);
}

TEST_CASE("percentile: the option must lie in (0, 100]") {
  for (double bad : {0.0, -5.0, 100.5}) {
    Options options;
    options.set("percentile", bad);
    auto made = PercentileCalibrator::create(options);
    REQUIRE_FALSE(made.has_value());
    CHECK(made.status().message().find("option percentile must be in (0, 100]") != std::string::npos);
  }
  Options full;
  full.set("percentile", 100.0);
  CHECK(PercentileCalibrator::create(full).has_value());
  const ComponentInfo info = PercentileCalibrator::info();
  CHECK(info.name == "percentile");
  REQUIRE(info.options.size() == 1);
  CHECK(info.options[0].name == "percentile");
  CHECK(std::get<double>(info.options[0].default_value) == 99.99);
}

}  // namespace
}  // namespace qflow
