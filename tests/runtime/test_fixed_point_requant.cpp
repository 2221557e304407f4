// Requantization: multiplier derivation, the integer multiply against exact rational
// arithmetic, rounding, saturation and power-of-two shifts.
#include <doctest/doctest.h>

#include <climits>

#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using namespace qflow::fx::test;

namespace {

__extension__ typedef unsigned __int128 u128;  // GCC and Clang; tests only

// round_half_away(|v| * 2^-s) computed with the compiler's 128-bit integers, independently of
// the library's two-word arithmetic.
u128 round_shift_exact(u128 v, int s) {
  if (s <= 0) return v << -s;
  if (s >= 127) return 0;
  return (v + (u128{1} << (s - 1))) >> s;
}

// round_half_away(acc * real) in exact rational arithmetic: real = F * 2^E with F < 2^53.
int64_t exact_round(int64_t acc, double real) {
  int e = 0;
  const double f = std::frexp(real, &e);
  const auto F = static_cast<uint64_t>(std::ldexp(f, 53));
  const u128 mag = u128{static_cast<uint64_t>(acc < 0 ? -acc : acc)} * F;
  const auto r = static_cast<int64_t>(round_shift_exact(mag, 53 - e));
  return acc < 0 ? -r : r;
}

}  // namespace

TEST_CASE("make_multiplier: hand-computed pairs") {
  Multiplier m;
  REQUIRE(make_multiplier(0.5, m).is_ok());
  CHECK(m.mantissa == (1 << 30));
  CHECK(m.shift == 0);
  REQUIRE(make_multiplier(1.0, m).is_ok());
  CHECK(m.mantissa == (1 << 30));
  CHECK(m.shift == -1);
  REQUIRE(make_multiplier(0.75, m).is_ok());
  CHECK(m.mantissa == 3 * (1 << 29));
  CHECK(m.shift == 0);
  REQUIRE(make_multiplier(std::ldexp(1.0, -40), m).is_ok());
  CHECK(m.mantissa == (1 << 30));
  CHECK(m.shift == 39);
  REQUIRE(make_multiplier(1000.0, m).is_ok());
  CHECK(multiplier_value(m) == 1000.0);
  CHECK(m.shift == -10);
  REQUIRE(make_multiplier(0.0, m).is_ok());
  CHECK(m.mantissa == 0);
  REQUIRE(make_multiplier(1e-30, m).is_ok());
  CHECK(m.mantissa == 0);
  REQUIRE(make_multiplier(std::ldexp(1.0, -63), m).is_ok());  // the smallest non-zero multiplier
  CHECK(m.mantissa == (1 << 30));
  CHECK(m.shift == 62);
  // A mantissa rounding up to 2^31 moves to the next exponent.
  REQUIRE(make_multiplier(1.0 - std::ldexp(1.0, -40), m).is_ok());
  CHECK(m.mantissa == (1 << 30));
  CHECK(m.shift == -1);
}

TEST_CASE("make_multiplier: refuses what it cannot represent") {
  Multiplier m;
  CHECK_FALSE(make_multiplier(-0.5, m).is_ok());
  CHECK_FALSE(make_multiplier(std::nan(""), m).is_ok());
  CHECK_FALSE(make_multiplier(INFINITY, m).is_ok());
  CHECK_FALSE(make_multiplier(2147483648.0, m).is_ok());
  CHECK_FALSE(make_multiplier(2147483647.9, m).is_ok());  // rounds to 2^31
  CHECK(make_multiplier(2147483000.0, m).is_ok());
}

TEST_CASE("make_multiplier: representation error is at most half a mantissa unit") {
  std::mt19937 rng(1);
  for (int i = 0; i < 20000; ++i) {
    const double real = random_log_uniform(rng, std::ldexp(1.0, -60), std::ldexp(1.0, 30));
    Multiplier m;
    REQUIRE(make_multiplier(real, m).is_ok());
    CHECK(m.mantissa >= (1 << 30));
    const double unit = std::ldexp(1.0, -31 - m.shift);
    CHECK(std::fabs(real - multiplier_value(m)) <= 0.5 * unit);
    CHECK(std::fabs(real - multiplier_value(m)) <= std::ldexp(real, -31));
  }
}

TEST_CASE("multiply_by_multiplier equals exact rounding of acc * m * 2^(-31-n)") {
  std::mt19937 rng(2);
  std::uniform_int_distribution<int64_t> acc32(INT32_MIN, INT32_MAX);
  std::uniform_int_distribution<int64_t> acc48(-(int64_t{1} << 47) + 1, (int64_t{1} << 47) - 1);
  int mismatches_vs_real = 0;
  for (int i = 0; i < 200000; ++i) {
    const int64_t acc = i % 2 ? acc32(rng) : acc48(rng);
    const double real = random_log_uniform(rng, std::ldexp(1.0, -60), 64.0);
    Multiplier m;
    REQUIRE(make_multiplier(real, m).is_ok());
    const int64_t got = multiply_by_multiplier(acc, m);
    // Exact for the represented multiplier, whatever the magnitude.
    REQUIRE(got == exact_round(acc, multiplier_value(m)));
    // Against the real multiplier: |acc| * |M - Mq| <= |acc * M| * 2^-31, below one unit
    // for results under 2^31. Equal there except next to a tie, where that error can cross the
    // half (results beyond 2^31 saturate any output type anyway).
    const double v = std::fabs(static_cast<double>(acc) * real);
    if (v >= 2147483648.0) continue;
    const int64_t ideal = exact_round(acc, real);
    if (got != ideal) {
      if (v < 65536.0) ++mismatches_vs_real;
      CHECK(std::llabs(got - ideal) == 1);
      const double distance_to_tie = std::fabs(v - std::floor(v) - 0.5);
      CHECK(distance_to_tie <= std::fabs(static_cast<double>(acc)) * std::fabs(real - multiplier_value(m)) + 1e-9 * v);
    }
  }
  // Results a 16-bit output can hold: the error is below 2^-15 of a unit, ties are rare.
  CHECK(mismatches_vs_real <= 2);
}

TEST_CASE("requantize: rounding half away from zero, zero point, saturation") {
  const Multiplier half = multiplier(0.5);
  CHECK(requantize(5, half, 0, -128, 127) == 3);
  CHECK(requantize(-5, half, 0, -128, 127) == -3);
  CHECK(requantize(3, half, 0, -128, 127) == 2);
  CHECK(requantize(-3, half, 0, -128, 127) == -2);
  CHECK(requantize(4, half, 0, -128, 127) == 2);
  CHECK(requantize(10, half, 3, -128, 127) == 8);
  CHECK(requantize(INT32_MAX, multiplier(1.0), 0, -128, 127) == 127);
  CHECK(requantize(INT32_MIN, multiplier(1.0), 0, -128, 127) == -128);
  CHECK(requantize(1000, multiplier(0.1), 250, 0, 255) == 255);
  CHECK(requantize(INT32_MAX, multiplier(2147483000.0), 0, INT32_MIN, INT32_MAX) == INT32_MAX);
  CHECK(multiply_by_multiplier((int64_t{1} << 62) - 1, multiplier(2147483000.0)) == int64_t{1} << 62);
  CHECK(multiply_by_multiplier(-(int64_t{1} << 61), multiplier(1000.0)) == -(int64_t{1} << 62));
  CHECK(requantize(123456, Multiplier{}, -7, -128, 127) == -7);
  CHECK(multiply_by_multiplier((int64_t{1} << 62) - 1, multiplier(std::ldexp(1.0, -63))) == 0);
  CHECK(multiply_by_multiplier((int64_t{1} << 47) - 1, multiplier(std::ldexp(1.0, -16))) ==
        (int64_t{1} << 31));
}

TEST_CASE("power-of-two shifts") {
  int s = 0;
  REQUIRE(make_pot_shift(0.25, s).is_ok());
  CHECK(s == 2);
  REQUIRE(make_pot_shift(8.0, s).is_ok());
  CHECK(s == -3);
  REQUIRE(make_pot_shift(1.0, s).is_ok());
  CHECK(s == 0);
  CHECK_FALSE(make_pot_shift(0.3, s).is_ok());
  CHECK_FALSE(make_pot_shift(0.0, s).is_ok());
  CHECK_FALSE(make_pot_shift(-0.25, s).is_ok());
  CHECK_FALSE(make_pot_shift(std::ldexp(1.0, -63), s).is_ok());
  CHECK_FALSE(make_pot_shift(std::ldexp(1.0, 32), s).is_ok());
  CHECK(rounding_shift(-3, 1) == -2);
  CHECK(rounding_shift(3, 1) == 2);
  CHECK(rounding_shift(-1, 1) == -1);
  CHECK(rounding_shift(1, 2) == 0);
  CHECK(rounding_shift(5, -2) == 20);
  CHECK(rounding_shift(int64_t{1} << 40, -30) == int64_t{1} << 62);
  CHECK(rounding_shift(-(int64_t{1} << 40), -62) == -(int64_t{1} << 62));
  CHECK(requantize_pot(300, 1, 0, -128, 127) == 127);
  CHECK(requantize_pot(-7, 2, 1, -128, 127) == -1);
  // Identical to the general multiplier path for exact powers of two.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> acc(INT32_MIN, INT32_MAX);
  std::uniform_int_distribution<int> shifts(-8, 40);
  for (int i = 0; i < 20000; ++i) {
    const int64_t a = acc(rng);
    const int sh = shifts(rng);
    CHECK(rounding_shift(a, sh) == multiply_by_multiplier(a, multiplier(std::ldexp(1.0, -sh))));
  }
}

TEST_CASE("rounding_divide rounds half away from zero") {
  CHECK(rounding_divide(7, 2) == 4);
  CHECK(rounding_divide(-7, 2) == -4);
  CHECK(rounding_divide(5, 3) == 2);
  CHECK(rounding_divide(-5, 3) == -2);
  CHECK(rounding_divide(4, 3) == 1);
  CHECK(rounding_divide(0, 9) == 0);
  CHECK(rounding_divide(INT64_MIN + 1, 1) == INT64_MIN + 1);
}

TEST_CASE("requantization is deterministic") {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int64_t> acc(INT32_MIN, INT32_MAX);
  for (int i = 0; i < 1000; ++i) {
    const int64_t a = acc(rng);
    const Multiplier m = multiplier(random_log_uniform(rng, 1e-6, 10.0));
    CHECK(requantize(a, m, 5, -128, 127) == requantize(a, m, 5, -128, 127));
  }
}
