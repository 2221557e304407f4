// scan_values (the first pass of every observer) against a plain per-value loop: counts, and
// min/max to the bit, on lengths around its lane width with NaN, Inf and signed zeros.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "plugins/observers/value_scan.h"

namespace qflow {
namespace {

ValueScan reference_scan(const std::vector<float>& values) {
  ValueScan scan;
  for (float value : values) {
    const float x = value + 0.0f;
    if (std::isnan(x)) {
      ++scan.nans;
    } else if (std::isinf(x)) {
      ++scan.infs;
    } else if (scan.count++ == 0) {
      scan.lo = scan.hi = x;
    } else {
      scan.lo = std::min(scan.lo, x);
      scan.hi = std::max(scan.hi, x);
    }
  }
  return scan;
}

void check_same(const std::vector<float>& values) {
  const ValueScan got = scan_values(values);
  const ValueScan want = reference_scan(values);
  CHECK(got.count == want.count);
  CHECK(got.nans == want.nans);
  CHECK(got.infs == want.infs);
  CHECK(std::bit_cast<uint32_t>(got.lo) == std::bit_cast<uint32_t>(want.lo));
  CHECK(std::bit_cast<uint32_t>(got.hi) == std::bit_cast<uint32_t>(want.hi));
}

TEST_CASE("scan_values: equals a per-value scan on every length around the lane width") {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (std::size_t n = 0; n <= 3 * kScanLanes + 1; ++n) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<float> v(n);
      for (float& x : v) {
        const unsigned r = rng() % 10;
        // kind 0: plain values; 1: some NaN/Inf/zeros; 2: mostly non-finite; 3: only -0 and +0.
        if (kind == 3) x = r % 2 ? -0.0f : 0.0f;
        else if (kind >= 1 && r == 0) x = kNaN;
        else if (kind >= 1 && r == 1) x = rng() % 2 ? kInf : -kInf;
        else if (kind >= 1 && r == 2) x = -0.0f;
        else if (kind == 2) x = rng() % 2 ? kNaN : -kInf;
        else x = dist(rng);
      }
      check_same(v);
    }
  }
  // The extremes of the finite range are values like any other.
  check_same({std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), kInf, -kInf});
  check_same({std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()});
  // Only zeros: the sign of the first one seen does not decide, both come out +0.
  const ValueScan zeros = scan_values(std::vector<float>{-0.0f, 0.0f});
  CHECK(std::bit_cast<uint32_t>(zeros.lo) == 0u);
  CHECK(std::bit_cast<uint32_t>(zeros.hi) == 0u);
  const ValueScan none = scan_values(std::vector<float>{kNaN, kInf});
  CHECK(none.count == 0);
  CHECK(none.lo == 0.0f);
  CHECK(none.hi == 0.0f);
}

}  // namespace
}  // namespace qflow
