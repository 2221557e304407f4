// One pass over a tensor's values: finite count, NaN and Inf counts, finite min and max.
// Every observer starts from it, so all of them treat non-finite values and signed zeros
// the same way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace qflow {

struct ValueScan {
  int64_t count = 0;  // finite values
  int64_t nans = 0;
  int64_t infs = 0;
  float lo = 0.0f;  // finite min and max; meaningful when count > 0
  float hi = 0.0f;
};

inline ValueScan scan_values(std::span<const float> values) {
  ValueScan scan;
  for (float value : values) {
    const float x = value + 0.0f;  // -0 becomes +0, so the first zero seen does not decide the sign
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

}  // namespace qflow
