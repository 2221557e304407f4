// One pass over a tensor's values (finite count, NaN and Inf counts, finite min and max)
// and the count bookkeeping around it. Every observer starts from these, so all of them treat non-finite values and signed zeros
// the same way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "qflow/plugin/observer.h"

namespace qflow {

struct ValueScan {
  int64_t count = 0;  // finite values
  int64_t nans = 0;
  int64_t infs = 0;
  float lo = 0.0f;  // finite min and max; meaningful when count > 0
  float hi = 0.0f;
};

// Lane-wise accumulators over blocks of kScanLanes values, without per-value branches, so the
// compiler vectorizes the loop; the lanes are folded at the end. The result equals a plain
// sequential scan: min and max do not depend on the order, and -0 is made +0 first.
inline constexpr std::size_t kScanLanes = 16;

inline ValueScan scan_values(std::span<const float> values) {
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

// The summary every observer reports: its counts, and the range once a finite value was seen.
inline TensorStatistics range_statistics(int64_t count, int64_t nans, int64_t infs, double min, double max) {
  TensorStatistics stats;
  stats.count = count;
  stats.nan_count = nans;
  stats.inf_count = infs;
  if (count > 0) {
    stats.min = min;
    stats.max = max;
  }
  return stats;
}

// Adds a peer state's counts; false when a sum overflows int64. States may come from files,
// so merges check the sums rather than trust them.
inline bool add_counts(int64_t& count, int64_t& nans, int64_t& infs, int64_t peer_count, int64_t peer_nans,
                       int64_t peer_infs) {
  return !__builtin_add_overflow(count, peer_count, &count) && !__builtin_add_overflow(nans, peer_nans, &nans) &&
         !__builtin_add_overflow(infs, peer_infs, &infs);
}

}  // namespace qflow
