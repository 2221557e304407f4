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
// compiler vectorizes the loop (value_scan.cpp compiles it for AVX2 and the baseline); the
// lanes are folded at the end. The result equals a plain sequential scan: min and max do not
// depend on the order, and -0 is made +0 first.
inline constexpr std::size_t kScanLanes = 16;

ValueScan scan_values(std::span<const float> values);

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
