// Float -> integer quantize on the fast kernels: fx::quantize per element is an out-of-line call
// that re-derives the type range and rounds through libm; here the same double expression,
// nearbyint(x / scale) + zero_point then saturation, runs inline in one loop (vectorizable with
// AVX2's vroundpd). IEEE division and round-to-nearest-even are exact operations, so every
// instruction set gives fx::quantize's result.
#include <cmath>

#include "runtime/fixed_point/fast_kernels.h"

namespace qflow::fx::fast {
namespace {

[[gnu::always_inline]] inline void quantize_loop(const float* x, int64_t n, double scale, double zero_point, double lo,
                                                 double hi, int32_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = std::nearbyint(static_cast<double>(x[i]) / scale) + zero_point;
    // As fx::quantize: below (or NaN-free -inf) to the minimum, from the maximum up to the maximum.
    const double c = !(v > lo) ? lo : (v >= hi ? hi : v);
    y[i] = static_cast<int32_t>(c);
  }
}

void quantize_portable(const float* x, int64_t n, double scale, double zero_point, double lo, double hi, int32_t* y) {
  quantize_loop(x, n, scale, zero_point, lo, hi, y);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void quantize_avx2(const float* x, int64_t n, double scale, double zero_point,
                                                   double lo, double hi, int32_t* y) {
  quantize_loop(x, n, scale, zero_point, lo, hi, y);
}
#endif

}  // namespace

int64_t quantize(const QParams& q, Isa isa, std::span<const float> x, std::span<int32_t> y) {
  for (size_t i = 0; i < x.size(); ++i)
    if (std::isnan(x[i])) return static_cast<int64_t>(i);
  const Range r = range_of(q.type);
  const auto n = static_cast<int64_t>(std::min(x.size(), y.size()));
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa != Isa::Portable) {
    quantize_avx2(x.data(), n, q.scale, q.zero_point, r.min, r.max, y.data());
    return -1;
  }
#else
  (void)isa;
#endif
  quantize_portable(x.data(), n, q.scale, q.zero_point, r.min, r.max, y.data());
  return -1;
}

}  // namespace qflow::fx::fast
