// Softmax and LayerNorm in integers: hand cases, randomized float comparisons with the
// measured bounds of docs/fixed-point.md, determinism.
#include <doctest/doctest.h>

#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using namespace qflow::fx::test;

TEST_CASE("integer_sqrt is the exact floor") {
  CHECK(integer_sqrt(0) == 0);
  CHECK(integer_sqrt(1) == 1);
  CHECK(integer_sqrt(3) == 1);
  CHECK(integer_sqrt(4) == 2);
  CHECK(integer_sqrt(99) == 9);
  CHECK(integer_sqrt(UINT64_MAX) == 4294967295u);
  CHECK(integer_sqrt(uint64_t{1} << 62) == uint64_t{1} << 31);
  std::mt19937_64 rng(40);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);
    const uint64_t r = integer_sqrt(v);
    REQUIRE(r * r <= v);
    REQUIRE((r + 1) * (r + 1) > v);
  }
}

TEST_CASE("softmax: hand case, invariance, randomized against float") {
  SoftmaxParams p;
  const QParams in{1.0 / 1024.0, 0, QType::Int16}, out{1.0 / 32768.0, 0, QType::Int16};
  REQUIRE(make_softmax_params(in, out, p).is_ok());
  std::vector<int32_t> y(4);
  // Equal inputs: 1/4 each = 8192 / 32768.
  REQUIRE(softmax(p, 4, std::vector<int32_t>{5, 5, 5, 5}, y).is_ok());
  CHECK(y == std::vector<int32_t>{8192, 8192, 8192, 8192});
  // [0, ln 2] scaled: inputs 0 and 710 (ln 2 * 1024 = 709.8) give about 1/3 and 2/3.
  std::vector<int32_t> y2(2);
  REQUIRE(softmax(p, 2, std::vector<int32_t>{0, 710}, y2).is_ok());
  CHECK(std::abs(y2[0] - 10923) <= 2);
  CHECK(std::abs(y2[1] - 21845) <= 2);
  // Shift invariance: subtracting the row maximum makes it exact.
  std::vector<int32_t> a(3), b(3);
  REQUIRE(softmax(p, 3, std::vector<int32_t>{-100, 300, 1000}, a).is_ok());
  REQUIRE(softmax(p, 3, std::vector<int32_t>{-1100, -700, 0}, b).is_ok());
  CHECK(a == b);
  // An extreme spread: the smallest value's probability is 0, the largest's saturates.
  REQUIRE(softmax(p, 2, std::vector<int32_t>{-32768, 32767}, y2).is_ok());
  CHECK(y2 == std::vector<int32_t>{0, 32767});
  CHECK_FALSE(softmax(p, 3, std::vector<int32_t>{1, 2, 3, 4}, y).is_ok());

  std::mt19937 rng(41);
  for (const QType ot : {QType::Int16, QType::UInt8}) {
    int64_t worst = 0;
    for (int t = 0; t < 300; ++t) {
      const QParams qi{random_log_uniform(rng, 1e-4, 1e-1), 0, QType::Int16};
      const QParams qo = ot == QType::Int16 ? QParams{1.0 / 32767.0, 0, ot} : QParams{1.0 / 255.0, 0, ot};
      SoftmaxParams sp;
      REQUIRE(make_softmax_params(qi, qo, sp).is_ok());
      const int64_t row = std::uniform_int_distribution<int>(1, 300)(rng);
      const auto x = random_values(rng, static_cast<size_t>(row * 2), QType::Int16);
      std::vector<int32_t> got(x.size()), ref(x.size());
      REQUIRE(softmax(sp, row, x, got).is_ok());
      for (size_t base = 0; base < x.size(); base += static_cast<size_t>(row)) {
        double mx = -1e300, sum = 0.0;
        for (int64_t j = 0; j < row; ++j) mx = std::max(mx, dequantize(x[base + static_cast<size_t>(j)], qi));
        for (int64_t j = 0; j < row; ++j) sum += std::exp(dequantize(x[base + static_cast<size_t>(j)], qi) - mx);
        for (int64_t j = 0; j < row; ++j)
          ref[base + static_cast<size_t>(j)] = quantize(std::exp(dequantize(x[base + static_cast<size_t>(j)], qi) - mx) / sum, qo);
      }
      worst = std::max(worst, max_abs_diff(got, ref));
      std::vector<int32_t> again(x.size());
      REQUIRE(softmax(sp, row, x, again).is_ok());
      CHECK(again == got);
    }
    CHECK(worst <= 1);
    MESSAGE("softmax max |int - float| = " << worst << " LSB");
  }
}

TEST_CASE("layernorm: hand case and randomized against float") {
  LayerNormParams p;
  const QParams in{0.01, 0, QType::Int16}, out{4.0 / 32767.0, 0, QType::Int16};
  REQUIRE(make_layernorm_params(in, out, {1.0, 1.0, 1.0, 1.0}, {0.0, 0.0, 0.0, 0.5}, 0.0, p).is_ok());
  std::vector<int32_t> y(4);
  // [-3, -1, 1, 3] has mean 0, std sqrt(5): normalized -1.342, -0.447, 0.447, 1.342 (+0.5 last)
  REQUIRE(layernorm(p, std::vector<int32_t>{-300, -100, 100, 300}, y).is_ok());
  const double unit = 4.0 / 32767.0;
  CHECK(std::abs(y[0] - std::lround(-3.0 / std::sqrt(5.0) / unit)) <= 2);
  CHECK(std::abs(y[1] - std::lround(-1.0 / std::sqrt(5.0) / unit)) <= 2);
  CHECK(std::abs(y[3] - std::lround((3.0 / std::sqrt(5.0) + 0.5) / unit)) <= 2);
  // A constant row normalizes to beta.
  REQUIRE(layernorm(p, std::vector<int32_t>{7, 7, 7, 7}, y).is_ok());
  CHECK(y == std::vector<int32_t>{0, 0, 0, static_cast<int32_t>(std::lround(0.5 / unit))});
  CHECK_FALSE(layernorm(p, std::vector<int32_t>{1, 2, 3}, y).is_ok());
  CHECK_FALSE(make_layernorm_params(in, out, {1.0}, {0.0, 0.0}, 0.0, p).is_ok());

  std::mt19937 rng(42);
  int64_t worst = 0;
  for (int t = 0; t < 200; ++t) {
    const int64_t row = std::uniform_int_distribution<int>(2, 512)(rng);
    const QParams qi{random_log_uniform(rng, 1e-4, 1e-2), std::uniform_int_distribution<int32_t>(-1000, 1000)(rng), QType::Int16};
    const QParams qo{8.0 / 32767.0, 0, QType::Int16};
    std::vector<double> gamma(static_cast<size_t>(row)), beta(gamma.size());
    std::uniform_real_distribution<double> gd(0.2, 1.5), bd(-1.0, 1.0);
    for (size_t j = 0; j < gamma.size(); ++j) gamma[j] = gd(rng), beta[j] = bd(rng);
    const double eps = 1e-5;
    LayerNormParams lp;
    REQUIRE(make_layernorm_params(qi, qo, gamma, beta, eps, lp).is_ok());
    // Rows of varying spread: some use the full range, some only a few LSB.
    const int32_t spread = t % 4 == 0 ? 20 : 30000;
    std::uniform_int_distribution<int32_t> xd(-spread, spread);
    std::vector<int32_t> x(static_cast<size_t>(row * 2));
    for (auto& v : x) v = std::clamp(xd(rng) + qi.zero_point, -32768, 32767);
    std::vector<int32_t> got(x.size()), ref(x.size());
    REQUIRE(layernorm(lp, x, got).is_ok());
    for (size_t base = 0; base < x.size(); base += static_cast<size_t>(row)) {
      double mean = 0.0, var = 0.0;
      for (int64_t j = 0; j < row; ++j) mean += dequantize(x[base + static_cast<size_t>(j)], qi);
      mean /= static_cast<double>(row);
      for (int64_t j = 0; j < row; ++j) var += std::pow(dequantize(x[base + static_cast<size_t>(j)], qi) - mean, 2);
      var /= static_cast<double>(row);
      for (int64_t j = 0; j < row; ++j) {
        const auto jj = static_cast<size_t>(j);
        const double n = (dequantize(x[base + jj], qi) - mean) / std::sqrt(var + eps);
        ref[base + jj] = quantize(n * gamma[jj] + beta[jj], qo);
      }
    }
    worst = std::max(worst, max_abs_diff(got, ref));
  }
  CHECK(worst <= 4);
  MESSAGE("layernorm max |int - float| = " << worst << " LSB");
}
