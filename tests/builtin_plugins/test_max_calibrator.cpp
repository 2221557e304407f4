// Tests of the max calibrator against hand-computed scales under several QuantSpecs.
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

QuantSpec spec(DType dtype, bool symmetric = true, bool power_of_two = false) {
  QuantSpec s;
  s.activation_dtype = dtype;
  s.symmetric = symmetric;
  s.power_of_two = power_of_two;
  return s;
}

Expected<QuantTable> run(const std::map<std::string, TensorStatistics>& stats,
                         const std::map<std::string, QuantSpec>& specs = {}) {
  auto calibrator = MaxCalibrator::create(Options{});
  if (!calibrator) return calibrator.status();
  CalibrationRequest request;
  request.statistics = &stats;
  request.specs = &specs;
  return calibrator.value()->calibrate(request);
}

TEST_CASE("max: default spec: int8 scale is max(|min|, |max|) / 127 with zero point 0") {
  const std::map<std::string, TensorStatistics> stats = {
      {"a", range(-2.54, 1.0)}, {"b", range(-0.5, 6.35)}, {"c", range(0.25, 0.5)}};
  auto table = run(stats);
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

TEST_CASE("max: each tensor takes its own spec; unlisted tensors take the default") {
  auto table = run({{"x", range(-3.2767, 1.0)}, {"y", range(-1.27, 1.0)}}, {{"x", spec(DType::Int16)}});
  REQUIRE(table.has_value());
  const QuantParams& x = table->at("x");
  CHECK(x.dtype == DType::Int16);
  CHECK(x.scale[0] == static_cast<float>(3.2767 / 32767.0));
  CHECK(x.scale[0] == doctest::Approx(1e-4));
  CHECK(table->at("y").dtype == DType::Int8);
  CHECK(table->at("y").scale[0] == static_cast<float>(1.27 / 127.0));
}

TEST_CASE("max: uint8 covers [min(0, min), max(0, max)] with 255 steps") {
  // [-0.5, 2.0]: scale 2.5 / 255, zero point round(0 + 0.5 / scale) = 51.
  // [0, 2.55] (ReLU): scale 0.01, zero point 0.
  auto table = run({{"u", range(-0.5, 2.0)}, {"r", range(0.0, 2.55)}},
                   {{"u", spec(DType::UInt8)}, {"r", spec(DType::UInt8)}});
  REQUIRE(table.has_value());
  const QuantParams& u = table->at("u");
  CHECK(u.dtype == DType::UInt8);
  CHECK(u.scale[0] == static_cast<float>(2.5 / 255.0));
  CHECK(u.zero_point == std::vector<int64_t>{51});
  CHECK(u.threshold == doctest::Approx(2.0));
  CHECK(table->at("r").scale[0] == static_cast<float>(2.55 / 255.0));
  CHECK(table->at("r").zero_point == std::vector<int64_t>{0});
}

TEST_CASE("max: asymmetric int8 puts the zero point inside [-128, 127]") {
  // [-1, 3]: scale 4 / 255, zero point round(-128 + 1 / scale) = round(-64.25) = -64.
  auto table = run({{"t", range(-1.0, 3.0)}}, {{"t", spec(DType::Int8, false)}});
  REQUIRE(table.has_value());
  CHECK(table->at("t").scale[0] == static_cast<float>(4.0 / 255.0));
  CHECK(table->at("t").zero_point == std::vector<int64_t>{-64});
  // With power-of-two: 4 / 255 = 0.0157 > 2^-6 -> 2^-5, zero point round(-128 + 32) = -96.
  auto pow2 = run({{"t", range(-1.0, 3.0)}}, {{"t", spec(DType::Int8, false, true)}});
  REQUIRE(pow2.has_value());
  CHECK(pow2->at("t").scale[0] == 0.03125f);
  CHECK(pow2->at("t").zero_point == std::vector<int64_t>{-96});
}

TEST_CASE("max: power-of-two rounds the scale up") {
  // 2.54 / 127 = 0.02 -> 2^-5 = 0.03125; 1.0 / 127 = 0.00787 -> 2^-6 = 0.015625;
  // 15.875 / 127 = 0.125 is already a power of two and must stay.
  const QuantSpec p2 = spec(DType::Int8, true, true);
  auto table = run({{"a", range(-2.54, 0.0)}, {"b", range(0.0, 1.0)}, {"c", range(-15.875, 15.875)}},
                   {{"a", p2}, {"b", p2}, {"c", p2}});
  REQUIRE(table.has_value());
  CHECK(table->at("a").scale[0] == 0.03125f);
  CHECK(table->at("b").scale[0] == 0.015625f);
  CHECK(table->at("c").scale[0] == 0.125f);
  CHECK(table->at("a").threshold == doctest::Approx(2.54));  // the observed value, not the widened one

  auto wide = run({{"d", range(-100.0, 3.0)}}, {{"d", spec(DType::Int16, true, true)}});
  REQUIRE(wide.has_value());
  // 100 / 32767 = 0.0030519 -> 2^-8 = 0.00390625
  CHECK(wide->at("d").scale[0] == 0.00390625f);
}

TEST_CASE("max: an all-zero tensor gets the unit range scale 1/qmax") {
  auto table = run({{"z", range(0.0, 0.0)}});
  REQUIRE(table.has_value());
  CHECK(table->at("z").scale[0] == static_cast<float>(1.0 / 127.0));
  CHECK(table->at("z").threshold == 0.0);
  auto pow2 = run({{"z", range(0.0, 0.0)}}, {{"z", spec(DType::Int8, true, true)}});
  REQUIRE(pow2.has_value());
  CHECK(pow2->at("z").scale[0] == 0.015625f);  // 1/127 = 0.00787 > 2^-7, so 2^-6
}

TEST_CASE("max: tensors without finite values are errors naming the tensor") {
  TensorStatistics nan_only;
  nan_only.nan_count = 4;
  auto table = run({{"ok", range(-1.0, 1.0)}, {"broken", nan_only}});
  REQUIRE_FALSE(table.has_value());
  CHECK(table.status().code() == StatusCode::InvalidInput);
  CHECK(table.status().message() ==
        "max calibrator: tensor 'broken' has no finite values (4 NaN, 0 Inf): no range to calibrate");

  auto never = run({{"unseen", TensorStatistics{}}});
  REQUIRE_FALSE(never.has_value());
  CHECK(never.status().message() == "max calibrator: tensor 'unseen' has no observed values");
}

TEST_CASE("max: NaN/Inf next to finite values do not affect the scale") {
  TensorStatistics s = range(-1.27, 0.5);
  s.nan_count = 3;
  s.inf_count = 2;
  auto table = run({{"t", s}});
  REQUIRE(table.has_value());
  CHECK(table->at("t").scale[0] == static_cast<float>(1.27 / 127.0));
}

TEST_CASE("max: a spec with a type that is not quantized is refused") {
  auto table = run({{"t", range(-1.0, 1.0)}}, {{"t", spec(DType::Float32)}});
  REQUIRE_FALSE(table.has_value());
  CHECK(table.status().message().find("max calibrator: tensor 't'") == 0);
}

TEST_CASE("max: no options; the quantization settings come from the spec") {
  const ComponentInfo info = MaxCalibrator::info();
  CHECK(info.name == "max");
  CHECK(info.kind == ComponentKind::Calibrator);
  CHECK(info.options.empty());
}

TEST_CASE("max: a request without statistics is refused") {
  auto calibrator = MaxCalibrator::create(Options{});
  REQUIRE(calibrator.has_value());
  CHECK_FALSE(calibrator.value()->calibrate(CalibrationRequest{}).has_value());
}

}  // namespace
}  // namespace qflow
