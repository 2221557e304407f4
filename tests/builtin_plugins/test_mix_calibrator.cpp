// Tests of the mix calibrator: per-tensor choice by the expected quantization error, built-in
// and host-made methods, the report's counts and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "plugins/calibrators/histogram_thresholds.h"
#include "plugins/calibrators/kl_calibrator.h"
#include "plugins/calibrators/mix_calibrator.h"

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

// A host-made calibrator: every tensor gets `threshold` and a recognisable scale.
class FixedCalibrator final : public Calibrator {
 public:
  explicit FixedCalibrator(double threshold) : threshold_(threshold) {}
  Expected<QuantTable> calibrate(const CalibrationRequest& request) override {
    seen_report = request.report;
    QuantTable table;
    for (const auto& [name, stats] : *request.statistics) {
      QuantParams params;
      params.scale = {0.5f};
      params.zero_point = {0};
      params.threshold = threshold_;
      params.method = "fixed";
      table.emplace(name, params);
    }
    return table;
  }
  CalibrationReport* seen_report = reinterpret_cast<CalibrationReport*>(1);

 private:
  double threshold_;
};

class FakeServices final : public CalibrationServices {
 public:
  explicit FakeServices(double threshold) : fixed(std::make_shared<FixedCalibrator>(threshold)) {}
  Expected<std::shared_ptr<Calibrator>> make_calibrator(const std::string& name, const Options&) const override {
    made.push_back(name);
    if (name == "fixed") return std::shared_ptr<Calibrator>(fixed);
    return not_found("no calibrator named '" + name + "'");
  }
  Expected<double> output_cosine(const QuantTable&, int64_t) const override { return internal_error("not used by mix"); }

  std::shared_ptr<FixedCalibrator> fixed;
  mutable std::vector<std::string> made;
};

Expected<std::unique_ptr<Calibrator>> make(const std::vector<std::string>& methods) {
  Options options;
  options.set("methods", methods);
  return MixCalibrator::create(options);
}

Expected<QuantTable> run(const std::vector<std::string>& methods, const std::map<std::string, TensorStatistics>& stats,
                         CalibrationReport* report = nullptr, const CalibrationServices* services = nullptr) {
  auto calibrator = make(methods);
  if (!calibrator) return calibrator.status();
  CalibrationRequest request;
  request.statistics = &stats;
  request.report = report;
  request.services = services;
  return calibrator.value()->calibrate(request);
}

TEST_CASE("mix: equal errors go to the earlier method") {
  // {1, 1} over [0, 2]: max gives 2; mse's edges are 1 (clips 1.5 by 0.5) and 2, so it
  // gives 2 as well. Equal thresholds, equal errors: the first method of the list wins.
  const std::map<std::string, TensorStatistics> stats = {{"t", histogram_stats({1, 1}, 2.0)}};
  CalibrationReport report;
  auto table = run({"max", "mse"}, stats, &report);
  REQUIRE(table.has_value());
  CHECK(table->at("t").method == "mix:max");
  CHECK(table->at("t").threshold == 2.0);
  CHECK(table->at("t").scale[0] == static_cast<float>(2.0 / 127.0));
  CHECK(report.counts == std::map<std::string, int64_t>{{"max", 1}, {"mse", 0}});

  auto reversed = run({"mse", "max"}, stats, &report);
  REQUIRE(reversed.has_value());
  CHECK(reversed->at("t").method == "mix:mse");
  CHECK(report.counts == std::map<std::string, int64_t>{{"max", 0}, {"mse", 1}});
}

TEST_CASE("mix: a host-made method wins where its threshold puts the bin centres on the grid") {
  // {1000, 0, 0, 1} over [0, 4], centres 0.5 and 3.5. max: t = 4, 0.5 / (4/127) = 15.875 is
  // off the grid. fixed: t = 127/32, s = 1/32, 0.5 and 3.5 are 16 and 112 steps: error 0.
  const std::map<std::string, TensorStatistics> stats = {{"t", histogram_stats({1000, 0, 0, 1}, 4.0)}};
  FakeServices services(127.0 / 32.0);
  CalibrationReport report;
  CHECK(expected_quantization_mse(stats.at("t").histogram, 4.0, 127.0 / 32.0, 127.0) == 0.0);
  CHECK(expected_quantization_mse(stats.at("t").histogram, 4.0, 4.0, 127.0) > 0.0);
  auto table = run({"max", "fixed"}, stats, &report, &services);
  REQUIRE(table.has_value());
  const QuantParams& t = table->at("t");
  CHECK(t.method == "mix:fixed");
  CHECK(t.scale[0] == 0.5f);  // kept as the host-made calibrator made it
  CHECK(t.threshold == 127.0 / 32.0);
  CHECK(report.counts == std::map<std::string, int64_t>{{"fixed", 1}, {"max", 0}});
  CHECK(services.made == std::vector<std::string>{"fixed"});
  CHECK(services.fixed->seen_report == nullptr);  // the report is mix's own

  // A host-made method that loses leaves the built-in parameters.
  FakeServices worse(1.0);
  auto lost = run({"max", "fixed"}, stats, nullptr, &worse);
  REQUIRE(lost.has_value());
  CHECK(lost->at("t").method == "mix:max");
  CHECK(lost->at("t").scale[0] == static_cast<float>(4.0 / 127.0));
}

TEST_CASE("mix: with the default methods each tensor takes the method with the smallest error") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::exponential_distribution<double> exponential(1.0);
  auto stats_of = [](const std::vector<double>& values) {
    double range = 0.0;
    for (double v : values) range = std::max(range, std::fabs(v));
    std::vector<double> counts(2048, 0.0);
    for (double v : values) counts[std::min<std::size_t>(2047, static_cast<std::size_t>(std::fabs(v) / range * 2048))] += 1;
    return histogram_stats(counts, range);
  };
  std::map<std::string, TensorStatistics> stats;
  std::vector<double> v;
  for (int k = 0; k < 50000; ++k) v.push_back(normal(rng));
  stats["gaussian"] = stats_of(v);
  v.clear();
  for (int k = 0; k < 50000; ++k) v.push_back(exponential(rng));
  v.push_back(400.0);
  stats["outlier"] = stats_of(v);
  v.clear();
  for (int k = 0; k < 50000; ++k) v.push_back(k % 7 == 0 ? 1.0 : 0.25 * (k % 4));
  stats["few-values"] = stats_of(v);
  v.clear();
  // All mass in the top bin: the percentile's threshold just below the range beats every edge.
  for (int k = 0; k < 50000; ++k) v.push_back(k % 2 ? 1.0 : -1.0);
  stats["two-values"] = stats_of(v);

  Options defaults;
  defaults.set("methods", std::get<std::vector<std::string>>(MixCalibrator::info().options.at(0).default_value));
  auto calibrator = MixCalibrator::create(defaults);
  REQUIRE(calibrator.has_value());
  CalibrationReport report;
  CalibrationRequest request;
  request.statistics = &stats;
  request.report = &report;
  auto table = calibrator.value()->calibrate(request);
  REQUIRE(table.has_value());

  std::set<std::string> chosen;
  for (const auto& [name, s] : stats) {
    const std::map<std::string, double> thresholds = {
        {"max", std::max(std::fabs(s.min), std::fabs(s.max))},
        {"percentile", percentile_threshold(s.histogram, s.histogram_range, 99.99)},
        {"kl", kl_tensor_threshold(s, 128, true, kKlMaxClippedPercent, "mix", name).value()},
        {"mse", mse_threshold(s.histogram, s.histogram_range, 127.0)}};
    std::string best;
    double best_error = 0.0;
    for (const std::string method : {"max", "percentile", "kl", "mse"}) {
      const double error = expected_quantization_mse(s.histogram, s.histogram_range, thresholds.at(method), 127.0);
      if (best.empty() || error < best_error) best = method, best_error = error;
    }
    INFO(name);
    CHECK(table->at(name).method == "mix:" + best);
    CHECK(table->at(name).threshold == thresholds.at(best));
    chosen.insert(best);
  }
  // mse minimises the same error over every bin edge, and max and kl give bin edges, so
  // they can only tie with it; the percentile lies between edges and wins "two-values".
  CHECK(table->at("two-values").method == "mix:percentile");
  CHECK(table->at("gaussian").method == "mix:mse");
  CHECK(chosen.size() >= 2);
  int64_t total = 0;
  for (const auto& [method, count] : report.counts) total += count;
  CHECK(total == 4);
  CHECK(report.counts.size() == 4);
}

TEST_CASE("mix: errors") {
  const std::map<std::string, TensorStatistics> stats = {{"t", histogram_stats({1, 1}, 2.0)}};
  auto no_services = run({"max", "fixed"}, stats);
  REQUIRE_FALSE(no_services.has_value());
  CHECK(no_services.status().message() ==
        "mix calibrator: method 'fixed' is not built in (max, percentile, kl, mse) and needs calibration services: "
        "give its stage the input 'dataset'");

  FakeServices services(1.0);
  auto unknown = run({"max", "nope"}, stats, nullptr, &services);
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.status().message() == "mix calibrator: method 'nope': no calibrator named 'nope'");

  TensorStatistics bare;
  bare.count = 1;
  bare.min = bare.max = 1.0;
  auto missing = run({"max"}, {{"x", bare}});
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().message() == "mix calibrator: tensor 'x' has no histogram (observe with 'histogram')");

  auto kl_small = run({"kl"}, stats);
  REQUIRE_FALSE(kl_small.has_value());
  CHECK(kl_small.status().message() == "mix calibrator: tensor 't': target-bins 128 exceeds the histogram's 2 bins");

  CHECK(make({}).status().message() == "mix calibrator: option methods names no calibrator");
  CHECK(make({"max", "mix"}).status().message() == "mix calibrator: option methods cannot name 'mix' itself");
  CHECK(make({"kl", "kl"}).status().message() == "mix calibrator: option methods names 'kl' twice");
}

}  // namespace
}  // namespace qflow
