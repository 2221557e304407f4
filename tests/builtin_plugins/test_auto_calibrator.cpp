// Tests of the auto calibrator with fake calibration services: the table with the best
// output cosine wins, ties go to the earlier method, the report and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "plugins/calibrators/auto_calibrator.h"
#include "plugins/calibrators/histogram_thresholds.h"
#include "plugins/calibrators/kl_calibrator.h"
#include "plugins/calibrators/max_calibrator.h"
#include "plugins/calibrators/percentile_calibrator.h"

namespace qflow {
namespace {

// Gives every tensor a scale that names the method, and records what it was asked.
class LabelCalibrator final : public Calibrator {
 public:
  LabelCalibrator(std::string label, float scale) : label_(std::move(label)), scale_(scale) {}
  Expected<QuantTable> calibrate(const CalibrationRequest& request) override {
    seen = request;
    QuantTable table;
    for (const auto& [name, stats] : *request.statistics) {
      QuantParams params;
      params.scale = {scale_};
      params.zero_point = {0};
      params.method = label_;
      table.emplace(name, params);
    }
    return table;
  }
  CalibrationRequest seen;

 private:
  std::string label_;
  float scale_;
};

// Cosine per method label (read back from the table), calibrators by name.
class FakeServices final : public CalibrationServices {
 public:
  Expected<std::shared_ptr<Calibrator>> make_calibrator(const std::string& name, const Options& options) const override {
    made.push_back(name);
    CHECK(options.values().empty());  // default options: the host fills them in
    auto it = calibrators.find(name);
    if (it == calibrators.end()) return not_found("no calibrator named '" + name + "'");
    return it->second;
  }
  Expected<double> output_cosine(const QuantTable& table, int64_t samples) const override {
    if (table.empty()) return internal_error("empty table");
    const std::string& label = table.begin()->second.method;
    scored.push_back(label);
    samples_asked.push_back(samples);
    if (auto it = cosine.find(label); it != cosine.end()) return it->second;
    return invalid_input("cannot run the model for '" + label + "'");
  }

  std::map<std::string, std::shared_ptr<Calibrator>> calibrators;
  std::map<std::string, double> cosine;
  mutable std::vector<std::string> made;
  mutable std::vector<std::string> scored;
  mutable std::vector<int64_t> samples_asked;
};

const std::map<std::string, TensorStatistics>& some_stats() {
  static const std::map<std::string, TensorStatistics> stats = [] {
    TensorStatistics s;
    s.count = 8;
    s.min = -1.0;
    s.max = 2.0;
    s.histogram = {4, 2, 1, 1};
    s.histogram_range = 2.0;
    return std::map<std::string, TensorStatistics>{{"a", s}, {"b", s}};
  }();
  return stats;
}

Expected<std::unique_ptr<Calibrator>> make(const std::vector<std::string>& methods, int64_t samples = 16) {
  Options options;
  options.set("methods", methods);
  options.set("samples", samples);
  return AutoCalibrator::create(options);
}

TEST_CASE("auto: keeps the table with the highest cosine, ties to the earlier method") {
  FakeServices services;
  auto a = std::make_shared<LabelCalibrator>("a", 0.1f);
  auto b = std::make_shared<LabelCalibrator>("b", 0.2f);
  auto c = std::make_shared<LabelCalibrator>("c", 0.3f);
  services.calibrators = {{"one", a}, {"two", b}, {"three", c}};
  services.cosine = {{"a", 0.9}, {"b", 0.95}, {"c", 0.95}};
  const std::map<std::string, QuantSpec> specs = {{"a", QuantSpec{}}};

  auto calibrator = make({"one", "two", "three"});
  REQUIRE(calibrator.has_value());
  CalibrationReport report;
  CalibrationRequest request;
  request.statistics = &some_stats();
  request.specs = &specs;
  request.services = &services;
  request.report = &report;
  auto table = calibrator.value()->calibrate(request);
  REQUIRE(table.has_value());
  REQUIRE(table->size() == 2);
  CHECK(table->at("a").scale[0] == 0.2f);
  CHECK(table->at("a").method == "auto:b");
  CHECK(table->at("b").method == "auto:b");
  CHECK(report.chosen == "two");
  CHECK(report.scores == std::map<std::string, double>{{"one", 0.9}, {"two", 0.95}, {"three", 0.95}});
  CHECK(services.made == std::vector<std::string>{"one", "two", "three"});
  CHECK(services.scored == std::vector<std::string>{"a", "b", "c"});
  CHECK(services.samples_asked == std::vector<int64_t>{16, 16, 16});
  // Each calibrator saw the same statistics, specs and services, but not auto's report.
  CHECK(b->seen.statistics == &some_stats());
  CHECK(b->seen.specs == &specs);
  CHECK(b->seen.services == &services);
  CHECK(b->seen.report == nullptr);
}

TEST_CASE("auto: with the built-in calibrators behind the services") {
  // The fake cosine prefers smaller thresholds: 1 - threshold / 100. On {4, 2, 1, 1} over
  // [0, 2]: max 2, percentile 99.99 just below 2, kl (target-bins 2 and no bulk floor, made
  // here with those options) 1.5: kl wins.
  FakeServices services;
  services.calibrators["max"] = std::shared_ptr<Calibrator>(MaxCalibrator::create(Options{}).value());
  Options percentile;
  percentile.set("percentile", 99.99);
  services.calibrators["percentile"] = std::shared_ptr<Calibrator>(PercentileCalibrator::create(percentile).value());
  Options kl;
  kl.set("target-bins", int64_t{2});
  kl.set("max-clipped", 100.0);
  kl.set("flatten-zero-bin", false);
  services.calibrators["kl"] = std::shared_ptr<Calibrator>(KlCalibrator::create(kl).value());

  class ThresholdCosine final : public CalibrationServices {
   public:
    explicit ThresholdCosine(const FakeServices& inner) : inner_(inner) {}
    Expected<std::shared_ptr<Calibrator>> make_calibrator(const std::string& name, const Options& o) const override {
      return inner_.make_calibrator(name, o);
    }
    Expected<double> output_cosine(const QuantTable& table, int64_t) const override {
      return 1.0 - table.at("a").threshold / 100.0;
    }

   private:
    const FakeServices& inner_;
  } cosine(services);

  auto calibrator = make({"max", "percentile", "kl"});
  REQUIRE(calibrator.has_value());
  CalibrationReport report;
  CalibrationRequest request;
  request.statistics = &some_stats();
  request.services = &cosine;
  request.report = &report;
  auto table = calibrator.value()->calibrate(request);
  REQUIRE(table.has_value());
  CHECK(report.chosen == "kl");
  CHECK(table->at("a").threshold == 1.5);
  CHECK(table->at("a").method == "auto:kl");
  CHECK(table->at("a").scale[0] == static_cast<float>(1.5 / 127.0));
  CHECK(report.scores.at("max") == doctest::Approx(0.98));
  CHECK(report.scores.at("kl") == doctest::Approx(0.985));
  CHECK(report.scores.at("percentile") < report.scores.at("kl"));
}

TEST_CASE("auto: errors") {
  auto calibrator = make({"one"});
  REQUIRE(calibrator.has_value());
  CalibrationRequest request;
  request.statistics = &some_stats();
  auto no_services = calibrator.value()->calibrate(request);
  REQUIRE_FALSE(no_services.has_value());
  CHECK(no_services.status().message() ==
        "auto calibrator needs calibration samples: give its stage the input 'dataset'");

  FakeServices services;
  services.calibrators["one"] = std::make_shared<LabelCalibrator>("a", 0.1f);
  services.calibrators["bad-cosine"] = std::make_shared<LabelCalibrator>("nan", 0.1f);
  services.calibrators["unscored"] = std::make_shared<LabelCalibrator>("x", 0.1f);
  services.cosine = {{"a", 0.5}, {"nan", std::numeric_limits<double>::quiet_NaN()}};
  request.services = &services;

  auto unknown = make({"one", "nope"}).value()->calibrate(request);
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.status().message() == "auto calibrator: method 'nope': no calibrator named 'nope'");

  auto nan = make({"bad-cosine"}).value()->calibrate(request);
  REQUIRE_FALSE(nan.has_value());
  CHECK(nan.status().message().find("auto calibrator: method 'bad-cosine': the output cosine is") == 0);

  auto failed = make({"unscored"}).value()->calibrate(request);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.status().message() == "auto calibrator: method 'unscored': cannot run the model for 'x'");

  // A failing calibrator's error is passed on with the method named.
  TensorStatistics nan_only;
  nan_only.nan_count = 1;
  const std::map<std::string, TensorStatistics> broken = {{"t", nan_only}};
  services.calibrators["max"] = std::shared_ptr<Calibrator>(MaxCalibrator::create(Options{}).value());
  request.statistics = &broken;
  auto bad_stats = make({"max"}).value()->calibrate(request);
  REQUIRE_FALSE(bad_stats.has_value());
  CHECK(bad_stats.status().message() ==
        "auto calibrator: method 'max': max calibrator: tensor 't' has no finite values (1 NaN, 0 Inf): no range to "
        "calibrate");

  CHECK(make({}).status().message() == "auto calibrator: option methods names no calibrator");
  CHECK(make({"auto"}).status().message() == "auto calibrator: option methods cannot name 'auto' itself");
  CHECK(make({"max", "max"}).status().message() == "auto calibrator: option methods names 'max' twice");
  CHECK(make({"max"}, -1).status().message() == "auto calibrator: option samples must be >= 0, got -1");

  // samples = 0 asks the services for every sample.
  request.statistics = &some_stats();
  services.samples_asked.clear();
  REQUIRE(make({"one"}, 0).value()->calibrate(request).has_value());
  CHECK(services.samples_asked == std::vector<int64_t>{0});

  const ComponentInfo info = AutoCalibrator::info();
  REQUIRE(info.options.size() == 2);
  CHECK(std::get<std::vector<std::string>>(info.options[0].default_value) ==
        std::vector<std::string>{"kl", "mse", "percentile", "max"});
  CHECK(std::get<int64_t>(info.options[1].default_value) == 16);
}

}  // namespace
}  // namespace qflow
