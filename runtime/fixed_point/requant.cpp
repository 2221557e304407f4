// Requantization: multipliers, rounding shifts and saturation (docs/fixed-point.md, section 2).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx {
namespace {

constexpr int64_t kSaturation = int64_t{1} << 62;

// Unsigned 128-bit value as two 64-bit halves: the standard library has no wider integer.
struct U128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
};

U128 mul_u64_u32(uint64_t a, uint32_t b) {
  const uint64_t p0 = (a & 0xFFFFFFFFu) * b;  // < 2^64
  const uint64_t p1 = (a >> 32) * b;          // < 2^64
  U128 r;
  r.lo = p0 + (p1 << 32);
  r.hi = (p1 >> 32) + (r.lo < p0 ? 1 : 0);
  return r;
}

U128 add_pow2(U128 x, int k) {  // x + 2^k, k in [0, 127]
  if (k < 64) {
    const uint64_t add = uint64_t{1} << k;
    const uint64_t lo = x.lo + add;
    x.hi += lo < x.lo ? 1 : 0;
    x.lo = lo;
  } else {
    x.hi += uint64_t{1} << (k - 64);
  }
  return x;
}

U128 shift_right(U128 x, int s) {  // s in [0, 127]
  if (s == 0) return x;
  if (s < 64) return U128{x.hi >> s, (x.lo >> s) | (x.hi << (64 - s))};
  return U128{0, x.hi >> (s - 64)};
}

// round_half_away(magnitude * 2^-s) for a non-negative 128-bit magnitude, saturated to 2^62.
uint64_t round_shift_magnitude(U128 magnitude, int s) {
  if (s > 0) magnitude = add_pow2(magnitude, s - 1);
  const U128 r = shift_right(magnitude, s);
  if (r.hi != 0 || r.lo > static_cast<uint64_t>(kSaturation)) return static_cast<uint64_t>(kSaturation);
  return r.lo;
}

uint64_t magnitude_of(int64_t v) { return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

int32_t clamp_to(int64_t v, int32_t lo, int32_t hi) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, lo, hi));
}

}  // namespace

Range range_of(QType type) {
  switch (type) {
    case QType::Int8: return {-128, 127};
    case QType::UInt8: return {0, 255};
    case QType::Int16: return {-32768, 32767};
    case QType::UInt16: return {0, 65535};
  }
  return {0, 0};
}

bool is_16bit(QType type) { return type == QType::Int16 || type == QType::UInt16; }

Status make_multiplier(double real, Multiplier& out) {
  if (!std::isfinite(real) || real < 0.0)
    return invalid_input("multiplier " + std::to_string(real) + " is not a finite non-negative number");
  if (real >= 2147483648.0) return invalid_input("multiplier " + std::to_string(real) + " is not below 2^31");
  out = Multiplier{};
  if (real == 0.0) return Status{};
  int exponent = 0;
  const double fraction = std::frexp(real, &exponent);  // real = fraction * 2^exponent, fraction in [0.5, 1)
  // fraction * 2^31 is exact in double; round half away from zero (std::round).
  auto mantissa = static_cast<int64_t>(std::round(std::ldexp(fraction, 31)));
  if (mantissa == (int64_t{1} << 31)) {
    mantissa >>= 1;
    ++exponent;
  }
  const int shift = -exponent;
  if (shift > kMaxShift) return Status{};  // M < 2^-63: the zero multiplier
  if (shift < kMinShift) return invalid_input("multiplier " + std::to_string(real) + " rounds to 2^31");
  out.mantissa = static_cast<int32_t>(mantissa);
  out.shift = shift;
  return Status{};
}

double multiplier_value(Multiplier m) { return std::ldexp(static_cast<double>(m.mantissa), -31 - m.shift); }

int64_t multiply_by_multiplier(int64_t acc, Multiplier m) {
  if (m.mantissa == 0 || acc == 0) return 0;
  const U128 product = mul_u64_u32(magnitude_of(acc), static_cast<uint32_t>(m.mantissa));
  const auto r = static_cast<int64_t>(round_shift_magnitude(product, 31 + m.shift));
  return acc < 0 ? -r : r;
}

int32_t requantize(int64_t acc, Multiplier m, int32_t zero_point, int32_t lo, int32_t hi) {
  return clamp_to(multiply_by_multiplier(acc, m) + zero_point, lo, hi);
}

Status make_pot_shift(double real, int& shift) {
  if (!std::isfinite(real) || real <= 0.0)
    return invalid_input("multiplier " + std::to_string(real) + " is not a positive finite number");
  int exponent = 0;
  const double fraction = std::frexp(real, &exponent);
  if (fraction != 0.5)
    return invalid_input("multiplier " + std::to_string(real) +
                         " is not a power of two (power-of-two platforms shift only)");
  const int s = 1 - exponent;  // real = 2^(exponent - 1) = 2^-s
  if (s < kMinShift || s > kMaxShift)
    return invalid_input("multiplier " + std::to_string(real) + " needs a shift outside [-31, 62]");
  shift = s;
  return Status{};
}

int64_t rounding_shift(int64_t acc, int shift) {
  if (acc == 0) return 0;
  const uint64_t mag = magnitude_of(acc);
  uint64_t r = 0;
  if (shift <= 0) {
    const int left = -shift;
    r = (left >= 62 || mag > (static_cast<uint64_t>(kSaturation) >> left)) ? static_cast<uint64_t>(kSaturation)
                                                                           : mag << left;
  } else {
    r = round_shift_magnitude(U128{0, mag}, shift);
  }
  const auto v = static_cast<int64_t>(r);
  return acc < 0 ? -v : v;
}

int32_t requantize_pot(int64_t acc, int shift, int32_t zero_point, int32_t lo, int32_t hi) {
  return clamp_to(rounding_shift(acc, shift) + zero_point, lo, hi);
}

int64_t rounding_divide(int64_t num, int64_t den) {
  const uint64_t mag = magnitude_of(num);
  const auto d = static_cast<uint64_t>(den);
  const uint64_t q = mag / d;
  const uint64_t rem = mag - q * d;
  const uint64_t r = q + (2 * rem >= d ? 1 : 0);
  const auto v = static_cast<int64_t>(r);
  return num < 0 ? -v : v;
}

}  // namespace qflow::fx
