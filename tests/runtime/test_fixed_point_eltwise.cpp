// Add / Sub, Mul, rescale and Concat: hand cases, randomized float comparisons (bound: 1 LSB),
// saturation.
#include <doctest/doctest.h>

#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using namespace qflow::fx::test;

namespace {

QParams random_params(std::mt19937& rng, QType type) {
  QParams q;
  q.type = type;
  q.scale = random_log_uniform(rng, 1e-3, 1.0);
  const Range r = range_of(type);
  q.zero_point = std::uniform_int_distribution<int32_t>(r.min + (r.max - r.min) / 4, r.max - (r.max - r.min) / 4)(rng);
  return q;
}

}  // namespace

TEST_CASE("add: hand cases and saturation") {
  AddParams p;
  const QParams q{0.1, 0, QType::Int8};
  REQUIRE(make_add_params(q, q, q, false, p).is_ok());
  CHECK(p.left_shift == 20);
  std::vector<int32_t> y(3);
  REQUIRE(add(p, std::vector<int32_t>{10, 100, -100}, std::vector<int32_t>{20, 100, -100}, y).is_ok());
  CHECK(y == std::vector<int32_t>{30, 127, -128});
  // Different scales and zero points: 0.5 * (40 - 10) + 0.25 * (8 - 0) = 17 -> / 1.0 + 3
  AddParams p2;
  REQUIRE(make_add_params({0.5, 10, QType::Int8}, {0.25, 0, QType::Int8}, {1.0, 3, QType::Int8}, false, p2).is_ok());
  REQUIRE(add(p2, std::vector<int32_t>{40}, std::vector<int32_t>{8}, std::span<int32_t>(y).first(1)).is_ok());
  CHECK(y[0] == 20);
  AddParams sub;
  REQUIRE(make_add_params({0.5, 10, QType::Int8}, {0.25, 0, QType::Int8}, {1.0, 3, QType::Int8}, true, sub).is_ok());
  REQUIRE(add(sub, std::vector<int32_t>{40}, std::vector<int32_t>{8}, std::span<int32_t>(y).first(1)).is_ok());
  CHECK(y[0] == 16);  // 15 - 2 = 13, + 3
  // A tie: 0.5 * 1 + 0.5 * 0 = 0.5 output units rounds away from zero.
  AddParams tie;
  REQUIRE(make_add_params({0.5, 0, QType::Int8}, {0.5, 0, QType::Int8}, {1.0, 0, QType::Int8}, false, tie).is_ok());
  REQUIRE(add(tie, std::vector<int32_t>{1, -1}, std::vector<int32_t>{0, 0}, std::span<int32_t>(y).first(2)).is_ok());
  CHECK(y[0] == 1);
  CHECK(y[1] == -1);
  AddParams wide;
  REQUIRE(make_add_params({0.5, 0, QType::Int16}, q, {1.0, 0, QType::Int16}, false, wide).is_ok());
  CHECK(wide.left_shift == 15);
  CHECK_FALSE(make_add_params({0.0, 0, QType::Int8}, q, q, false, p).is_ok());
  CHECK_FALSE(add(p, std::vector<int32_t>{1}, std::vector<int32_t>{1, 2}, y).is_ok());
}

TEST_CASE("add / sub: randomized against the float reference") {
  std::mt19937 rng(20);
  for (const QType type : {QType::Int8, QType::UInt8, QType::Int16, QType::UInt16}) {
    int64_t worst = 0;
    for (int t = 0; t < 200; ++t) {
      const QParams a = random_params(rng, type), b = random_params(rng, type);
      QParams o = random_params(rng, type);
      o.scale = (a.scale + b.scale) * std::uniform_real_distribution<double>(0.3, 1.5)(rng);
      const bool subtract = t % 2 == 1;
      AddParams p;
      REQUIRE(make_add_params(a, b, o, subtract, p).is_ok());
      const auto av = random_values(rng, 64, type), bv = random_values(rng, 64, type);
      std::vector<int32_t> y(64), ref(64);
      REQUIRE(add(p, av, bv, y).is_ok());
      for (size_t i = 0; i < y.size(); ++i) {
        const double ra = dequantize(av[i], a), rb = dequantize(bv[i], b);
        ref[i] = quantize(subtract ? ra - rb : ra + rb, o);
      }
      worst = std::max(worst, max_abs_diff(y, ref));
    }
    CHECK(worst <= 1);
    MESSAGE("add/sub max |int - float reference| = " << worst << " LSB");
  }
}

TEST_CASE("mul: hand case and randomized against the float reference") {
  MulParams p;
  REQUIRE(make_mul_params({0.5, 2, QType::Int8}, {0.25, 0, QType::Int8}, {0.1, -1, QType::Int8}, p).is_ok());
  std::vector<int32_t> y(2);
  // 0.5 * (6 - 2) * 0.25 * 4 = 2.0 -> 20 - 1; saturates on the second element
  REQUIRE(mul(p, std::vector<int32_t>{6, 127}, std::vector<int32_t>{4, 127}, y).is_ok());
  CHECK(y == std::vector<int32_t>{19, 127});
  std::mt19937 rng(21);
  for (const QType type : {QType::Int8, QType::UInt8, QType::Int16}) {
    int64_t worst = 0;
    for (int t = 0; t < 200; ++t) {
      const QParams a = random_params(rng, type), b = random_params(rng, type);
      QParams o = random_params(rng, type);
      o.scale = a.scale * b.scale * (is_16bit(type) ? 32768.0 : 128.0) * std::uniform_real_distribution<double>(0.2, 2.0)(rng);
      MulParams m;
      REQUIRE(make_mul_params(a, b, o, m).is_ok());
      const auto av = random_values(rng, 64, type), bv = random_values(rng, 64, type);
      std::vector<int32_t> out(64), ref(64);
      REQUIRE(mul(m, av, bv, out).is_ok());
      for (size_t i = 0; i < out.size(); ++i) ref[i] = quantize(dequantize(av[i], a) * dequantize(bv[i], b), o);
      worst = std::max(worst, max_abs_diff(out, ref));
    }
    CHECK(worst <= 1);
    MESSAGE("mul max |int - float reference| = " << worst << " LSB");
  }
}

TEST_CASE("concat: identity when parameters are equal, requantized otherwise") {
  const QParams out{0.1, 0, QType::Int8};
  // Both inputs are [2, 1, 2] (outer 2, axis 1, inner 2); the output is [2, 2, 2].
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {10, 20, 30, 40};
  std::vector<ConcatInput> inputs = {{a, 1, out}, {b, 1, {0.2, 5, QType::Int8}}};
  std::vector<int32_t> y(8);
  REQUIRE(concat(inputs, 2, 2, out, y).is_ok());
  // b requantized: 0.2 * (v - 5) / 0.1 = 2 * (v - 5)
  CHECK(y == std::vector<int32_t>{1, 2, 10, 30, 3, 4, 50, 70});
  inputs[1].axis_dim = 2;
  CHECK_FALSE(concat(inputs, 2, 2, out, y).is_ok());
  std::mt19937 rng(22);
  int64_t worst = 0;
  for (int t = 0; t < 200; ++t) {
    const QParams in = random_params(rng, QType::Int8), o = random_params(rng, QType::Int8);
    const auto x = random_values(rng, 64, QType::Int8);
    std::vector<int32_t> r(64), ref(64);
    REQUIRE(rescale(in, o, x, r).is_ok());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = quantize(dequantize(x[i], in), o);
    worst = std::max(worst, max_abs_diff(r, ref));
  }
  CHECK(worst <= 1);
  MESSAGE("rescale max |int - float reference| = " << worst << " LSB");
}
