// Helpers shared by the fixed-point tests: a seeded generator and float reference pieces.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx::test {

inline std::vector<int32_t> random_values(std::mt19937& rng, size_t n, QType type) {
  const Range r = range_of(type);
  std::uniform_int_distribution<int32_t> d(r.min, r.max);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline double random_log_uniform(std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> d(std::log2(lo), std::log2(hi));
  return std::exp2(d(rng));
}

inline Multiplier multiplier(double real) {
  Multiplier m;
  const Status s = make_multiplier(real, m);
  return s.is_ok() ? m : Multiplier{-1, 0};  // an invalid pair makes the using test fail
}

// Largest |a[i] - b[i]|.
inline int64_t max_abs_diff(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int64_t worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max<int64_t>(worst, std::llabs(int64_t{a[i]} - b[i]));
  return a.size() == b.size() ? worst : INT64_MAX;
}

}  // namespace qflow::fx::test
