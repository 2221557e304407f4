// float16 and bfloat16 conversions (Eigen::half, Eigen::bfloat16 behind qflow's functions):
// every float16 pattern round-trips, and chosen floats convert to the bits IEEE 754
// round-to-nearest-even gives, subnormals, infinities and NaNs included.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "qflow/ir/dtype.h"

namespace qflow {
namespace {

bool is_half_nan(uint16_t bits) { return (bits & 0x7C00u) == 0x7C00u && (bits & 0x03FFu) != 0; }

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST_CASE("float16: all 65536 patterns widen exactly and narrow back to themselves") {
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    const float wide = half_to_float(bits);
    CAPTURE(bits);
    if (is_half_nan(bits)) {
      CHECK(std::isnan(wide));
      CHECK(std::signbit(wide) == ((bits & 0x8000u) != 0));
      // The payload goes: every NaN narrows to the quiet NaN of its sign.
      CHECK(float_to_half(wide) == ((bits & 0x8000u) | 0x7E00u));
      continue;
    }
    // Widening is exact: the value is sign * 2^(e-15) * 1.m (or 2^-14 * 0.m when subnormal).
    const int exponent = (bits >> 10) & 0x1F;
    const double mantissa = bits & 0x3FF;
    const double magnitude = exponent == 0x1F ? std::numeric_limits<double>::infinity()
                             : exponent == 0  ? std::ldexp(mantissa, -24)
                                              : std::ldexp(1024.0 + mantissa, exponent - 25);
    CHECK(static_cast<double>(wide) == ((bits & 0x8000u) ? -magnitude : magnitude));
    CHECK(std::signbit(wide) == ((bits & 0x8000u) != 0));
    CHECK(float_to_half(wide) == bits);
  }
}

TEST_CASE("float16: narrowing rounds to nearest even, overflows to infinity, keeps subnormals") {
  CHECK(float_to_half(0.0f) == 0x0000);
  CHECK(float_to_half(-0.0f) == 0x8000);
  CHECK(float_to_half(1.0f) == 0x3C00);
  CHECK(float_to_half(-2.0f) == 0xC000);
  CHECK(float_to_half(0.1f) == 0x2E66);
  CHECK(float_to_half(65504.0f) == 0x7BFF);                     // largest finite
  CHECK(float_to_half(65519.996f) == 0x7BFF);                   // just below the halfway to 65536
  CHECK(float_to_half(65520.0f) == 0x7C00);                     // halfway: rounds to even, infinity
  CHECK(float_to_half(1e10f) == 0x7C00);
  CHECK(float_to_half(-1e10f) == 0xFC00);
  CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(float_to_half(-std::numeric_limits<float>::infinity()) == 0xFC00);
  // Ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 -> even (1); 1 + 3 * 2^-11 -> 1 + 2^-9.
  CHECK(float_to_half(1.0f + 0x1p-11f) == 0x3C00);
  CHECK(float_to_half(1.0f + 3 * 0x1p-11f) == 0x3C02);
  CHECK(float_to_half(1.0f + 0x1p-11f + 0x1p-20f) == 0x3C01);  // above the tie
  // Subnormals: 2^-24 is the smallest; half of it ties to even (zero), a bit more rounds up.
  CHECK(float_to_half(0x1p-24f) == 0x0001);
  CHECK(float_to_half(0x1p-25f) == 0x0000);
  CHECK(float_to_half(0x1.000002p-25f) == 0x0001);
  CHECK(float_to_half(3 * 0x1p-25f) == 0x0002);  // 1.5 * 2^-24: tie, to even
  CHECK(float_to_half(-0x1p-24f) == 0x8001);
  CHECK(float_to_half(0x1p-14f) == 0x0400);  // smallest normal
  CHECK(float_to_half(0x1.ffcp-15f) == 0x0400);  // largest subnormal + half a step: tie, to even (normal)
  CHECK(float_to_half(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(float_to_half(from_bits(0x7FC00000u)) == 0x7E00);
  CHECK(float_to_half(from_bits(0xFF800001u)) == 0xFE00);  // signalling, negative
}

TEST_CASE("bfloat16: widening is exact, narrowing rounds to nearest even") {
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    const float wide = bfloat16_to_float(bits);
    CHECK(std::bit_cast<uint32_t>(wide) == i << 16);
    if (!std::isnan(wide)) CHECK(float_to_bfloat16(wide) == bits);
  }
  CHECK(float_to_bfloat16(1.0f) == 0x3F80);
  CHECK(float_to_bfloat16(-0.0f) == 0x8000);
  CHECK(float_to_bfloat16(from_bits(0x3F808000u)) == 0x3F80);  // tie, even stays
  CHECK(float_to_bfloat16(from_bits(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  CHECK(float_to_bfloat16(from_bits(0x3F808001u)) == 0x3F81);  // above the tie
  CHECK(float_to_bfloat16(from_bits(0x7F7FFFFFu)) == 0x7F80);  // float max rounds to infinity
  CHECK(float_to_bfloat16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(float_to_bfloat16(from_bits(0x00018000u)) == 0x0002);  // subnormal tie, odd rounds up
  CHECK(float_to_bfloat16(from_bits(0x00008000u)) == 0x0000);  // subnormal tie, even stays
  // Every NaN becomes the quiet NaN of its sign.
  CHECK(float_to_bfloat16(from_bits(0x7FC00000u)) == 0x7FC0);
  CHECK(float_to_bfloat16(from_bits(0x7F800001u)) == 0x7FC0);
  CHECK(float_to_bfloat16(from_bits(0xFFA00000u)) == 0xFFC0);
}

}  // namespace
}  // namespace qflow
