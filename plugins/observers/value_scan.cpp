// scan_values: the first pass of every observer, in lanes the compiler vectorizes.
#include "value_scan.h"

namespace qflow {

// The same IEEE comparisons at any vector width, so every clone gives the same result.
__attribute__((target_clones("avx2", "default"))) ValueScan scan_values(std::span<const float> values) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo[kScanLanes], hi[kScanLanes];
  uint32_t nans[kScanLanes] = {}, infs[kScanLanes] = {};
  for (std::size_t j = 0; j < kScanLanes; ++j) {
    lo[j] = kInf;
    hi[j] = -kInf;
  }
  const float* p = values.data();
  const std::size_t n = values.size();
  // One lane's counters take n / kScanLanes + 1 values at most: far below 2^32 for any tensor.
  auto step = [&](std::size_t j, float value) {
    const float x = value + 0.0f;  // -0 becomes +0, so the first zero seen does not decide the sign
    const bool nan = x != x;
    const bool inf = std::fabs(x) == kInf;
    const bool finite = std::fabs(x) < kInf;
    nans[j] += nan;
    infs[j] += inf;
    lo[j] = (finite & (x < lo[j])) ? x : lo[j];
    hi[j] = (finite & (x > hi[j])) ? x : hi[j];
  };
  std::size_t i = 0;
  for (; i + kScanLanes <= n; i += kScanLanes)
    for (std::size_t j = 0; j < kScanLanes; ++j) step(j, p[i + j]);
  for (std::size_t j = 0; i < n; ++i, ++j) step(j, p[i]);
  ValueScan scan;
  float low = kInf, high = -kInf;
  for (std::size_t j = 0; j < kScanLanes; ++j) {
    scan.nans += nans[j];
    scan.infs += infs[j];
    low = std::min(low, lo[j]);
    high = std::max(high, hi[j]);
  }
  scan.count = static_cast<int64_t>(n) - scan.nans - scan.infs;
  if (scan.count > 0) {
    scan.lo = low;
    scan.hi = high;
  }
  return scan;
}

}  // namespace qflow
