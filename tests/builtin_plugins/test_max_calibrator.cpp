// Tests of the max calibrator against hand-computed scales.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "plugins/calibrators/max_calibrator.h"

namespace qflow {
namespace {

TensorStatistics range(double lo, double hi, int64_t count = 10) {
  TensorStatistics s;
  s.count = count;
  s.min = lo;
  s.max = hi;
  return s;
}

Expected<QuantTable> run(const std::map<std::string, TensorStatistics>& stats, const std::string& dtype, bool pow2) {
  Options options;
  options.set("dtype", dtype);
  options.set("power-of-two", pow2);
  auto calibrator = MaxCalibrator::create(options);
  if (!calibrator) return calibrator.status();
  CalibrationRequest request;
  request.statistics = &stats;
  return calibrator.value()->calibrate(request);
}

TEST_CASE("max: int8 scale is max(|min|, |max|) / 127 with zero point 0") {
  const std::map<std::string, TensorStatistics> stats = {
      {"a", range(-2.54, 1.0)}, {"b", range(-0.5, 6.35)}, {"c", range(0.25, 0.5)}};
  auto table = run(stats, "int8", false);
  REQUIRE(table.has_value());
  REQUIRE(table->size() == 3);
  const QuantParams& a = table->at("a");
  CHECK(a.dtype == DType::Int8);
  CHECK(a.threshold == doctest::Approx(2.54));
  REQUIRE(a.scale.size() == 1);
  CHECK(a.scale[0] == static_cast<float>(2.54 / 127.0));  // 0.02
  CHECK(a.zero_point == std::vector<int64_t>{0});
  CHECK(a.axis == -1);
  CHECK(a.method == "max");
  CHECK(table->at("b").scale[0] == static_cast<float>(6.35 / 127.0));  // 0.05
  CHECK(table->at("c").scale[0] == static_cast<float>(0.5 / 127.0));
}

TEST_CASE("max: int16 uses qmax 32767") {
  auto table = run({{"x", range(-3.2767, 1.0)}}, "int16", false);
  REQUIRE(table.has_value());
  const QuantParams& x = table->at("x");
  CHECK(x.dtype == DType::Int16);
  CHECK(x.scale[0] == static_cast<float>(3.2767 / 32767.0));
  CHECK(x.scale[0] == doctest::Approx(1e-4));
}

TEST_CASE("max: power-of-two rounds the scale up") {
  // 2.54 / 127 = 0.02 -> 2^-5 = 0.03125; 1.0 / 127 = 0.00787 -> 2^-6 = 0.015625;
  // 15.875 / 127 = 0.125 is already a power of two and must stay.
  auto table = run({{"a", range(-2.54, 0.0)}, {"b", range(0.0, 1.0)}, {"c", range(-15.875, 15.875)}}, "int8", true);
  REQUIRE(table.has_value());
  CHECK(table->at("a").scale[0] == 0.03125f);
  CHECK(table->at("b").scale[0] == 0.015625f);
  CHECK(table->at("c").scale[0] == 0.125f);
  CHECK(table->at("a").threshold == doctest::Approx(2.54));  // the observed value, not the widened one

  auto wide = run({{"d", range(-100.0, 3.0)}}, "int16", true);
  REQUIRE(wide.has_value());
  // 100 / 32767 = 0.0030519 -> 2^-8 = 0.00390625
  CHECK(wide->at("d").scale[0] == 0.00390625f);
}

TEST_CASE("max: an all-zero tensor gets the unit range scale 1/qmax") {
  auto table = run({{"z", range(0.0, 0.0)}}, "int8", false);
  REQUIRE(table.has_value());
  CHECK(table->at("z").scale[0] == static_cast<float>(1.0 / 127.0));
  CHECK(table->at("z").threshold == 0.0);
  auto pow2 = run({{"z", range(0.0, 0.0)}}, "int8", true);
  REQUIRE(pow2.has_value());
  CHECK(pow2->at("z").scale[0] == 0.015625f);  // 1/127 = 0.00787 > 2^-7, so 2^-6
}

TEST_CASE("max: tensors without finite values are errors naming the tensor") {
  TensorStatistics nan_only;
  nan_only.nan_count = 4;
  auto table = run({{"ok", range(-1.0, 1.0)}, {"broken", nan_only}}, "int8", false);
  REQUIRE_FALSE(table.has_value());
  CHECK(table.status().code() == StatusCode::InvalidInput);
  CHECK(table.status().message().find("'broken'") != std::string::npos);
  CHECK(table.status().message().find("4 NaN") != std::string::npos);

  auto never = run({{"unseen", TensorStatistics{}}}, "int8", false);
  REQUIRE_FALSE(never.has_value());
  CHECK(never.status().message().find("'unseen' has no observed values") != std::string::npos);
}

TEST_CASE("max: NaN/Inf next to finite values do not affect the scale") {
  TensorStatistics s = range(-1.27, 0.5);
  s.nan_count = 3;
  s.inf_count = 2;
  auto table = run({{"t", s}}, "int8", false);
  REQUIRE(table.has_value());
  CHECK(table->at("t").scale[0] == static_cast<float>(1.27 / 127.0));
}

TEST_CASE("max: options are checked") {
  Options bad;
  bad.set("dtype", std::string("uint8"));
  bad.set("power-of-two", false);
  auto calibrator = MaxCalibrator::create(bad);
  REQUIRE_FALSE(calibrator.has_value());
  CHECK(calibrator.status().message().find("'uint8'") != std::string::npos);

  const ComponentInfo info = MaxCalibrator::info();
  CHECK(info.name == "max");
  REQUIRE(info.options.size() == 2);
  CHECK(info.options[0].name == "dtype");
  CHECK(std::get<std::string>(info.options[0].default_value) == "int8");
  CHECK(info.options[1].name == "power-of-two");
  CHECK(std::get<bool>(info.options[1].default_value) == false);
}

TEST_CASE("max: a request without statistics is refused") {
  auto calibrator = MaxCalibrator::create([] {
    Options o;
    o.set("dtype", std::string("int8"));
    return o;
  }());
  REQUIRE(calibrator.has_value());
  CHECK_FALSE(calibrator.value()->calibrate(CalibrationRequest{}).has_value());
}

}  // namespace
}  // namespace qflow
