// exp(x) = 2^k * exp(r), k = round(x / ln 2), r = x - k ln 2 in two parts (|r| <= 0.347), exp(r)
// by its Taylor polynomial to r^13 (truncation below 5e-18). Written once with GCC vector types
// and compiled twice (baseline and AVX2, neither with FMA, so nothing is contracted): the same
// operations, the same bits.
#include "framework/interpreter/kernels/softmax_exp.h"

#include <cstring>

#include "framework/interpreter/kernel_isa.h"

namespace qflow {

namespace {

typedef double Doubles4 __attribute__((vector_size(32)));
typedef int64_t Int64x4 __attribute__((vector_size(32)));

constexpr double kLog2e = 1.4426950408889634;
// ln 2 split so that k * kLn2Hi is exact for |k| < 2^20 (fdlibm's constants).
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
// Adding 1.5 * 2^52 rounds to an integer, which then sits in the low bits of the sum.
constexpr double kShifter = 0x1.8p52;
constexpr double kZeroBelow = -700.0;

// Passed by reference only: a vector by value would change the ABI between the clones.
[[gnu::always_inline]] inline void exp4(Doubles4& x) {
  const Doubles4 shifter = Doubles4{} + kShifter;
  const Doubles4 t = x * kLog2e + shifter;
  const Doubles4 k = t - shifter;
  const Doubles4 r = (x - k * kLn2Hi) - k * kLn2Lo;
  Doubles4 p = Doubles4{} + 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^k from k's bits in t; x >= -700 keeps k + 1023 >= 13, a normal exponent.
  // (A cast between vector types of one size keeps the bits.)
  const Int64x4 bits = (((Int64x4)t - (Int64x4)shifter) + 1023) << 52;
  const Doubles4 y = p * (Doubles4)bits;
  const Doubles4 zero_below = Doubles4{} + kZeroBelow;
  x = x < zero_below ? Doubles4{} : y;  // -inf too; NaN fails the comparison and stays NaN
}

[[gnu::always_inline]] inline double exp_sum_body(double* v, int64_t n) {
  Doubles4 sum = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    Doubles4 x;
    std::memcpy(&x, v + i, sizeof x);
    exp4(x);
    std::memcpy(v + i, &x, sizeof x);
    sum += x;
  }
  if (i < n) {  // the tail padded with -inf, whose exponentials add nothing
    Doubles4 x = Doubles4{} - __builtin_inf();
    std::memcpy(&x, v + i, sizeof(double) * static_cast<std::size_t>(n - i));
    exp4(x);
    std::memcpy(v + i, &x, sizeof(double) * static_cast<std::size_t>(n - i));
    sum += x;
  }
  return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

typedef float Floats4 __attribute__((vector_size(16)));

// The largest value that is not NaN (-inf when there is none). The sequential
// std::max from src[0] differs only when src[0] is NaN, and then the NaN's exponential makes
// every output NaN either way; which of two equal zeros is kept changes no result.
[[gnu::always_inline]] inline float row_max(const float* src, int64_t n) {
  Floats4 lanes = Floats4{} - __builtin_inff();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    Floats4 x;
    std::memcpy(&x, src + i, sizeof x);
    lanes = lanes < x ? x : lanes;
  }
  float m = lanes[0];
  for (int l = 1; l < 4; ++l) m = m < lanes[l] ? lanes[l] : m;
  for (; i < n; ++i) m = m < src[i] ? src[i] : m;
  return m;
}

[[gnu::always_inline]] inline void softmax_body(const float* src, float* dst, int64_t n, double* e) {
  const float m = row_max(src, n);
  for (int64_t i = 0; i < n; ++i) e[i] = static_cast<double>(src[i] - m);
  const double sum = exp_sum_body(e, n);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    Doubles4 d;
    std::memcpy(&d, e + i, sizeof d);
    d = d / sum;
    const Floats4 f = __builtin_convertvector(d, Floats4);
    std::memcpy(dst + i, &f, sizeof f);
  }
  for (; i < n; ++i) dst[i] = static_cast<float>(e[i] / sum);
}

double exp_sum_baseline(double* v, int64_t n) { return exp_sum_body(v, n); }
void softmax_baseline(const float* src, float* dst, int64_t n, double* e) { softmax_body(src, dst, n, e); }

#if defined(__x86_64__) && defined(__GNUC__)
#define QFLOW_SOFTMAX_EXP_AVX2 1
__attribute__((target("avx2"))) double exp_sum_avx2(double* v, int64_t n) { return exp_sum_body(v, n); }
__attribute__((target("avx2"))) void softmax_avx2(const float* src, float* dst, int64_t n, double* e) {
  softmax_body(src, dst, n, e);
}
#endif

}  // namespace

void softmax_float_row(const float* src, float* dst, int64_t n, double* scratch) {
  if (n <= 0) return;
#ifdef QFLOW_SOFTMAX_EXP_AVX2
  if (kernel_isa_allows_avx2()) return softmax_avx2(src, dst, n, scratch);
#endif
  softmax_baseline(src, dst, n, scratch);
}

double exp_in_place_sum(double* v, int64_t n) {
#ifdef QFLOW_SOFTMAX_EXP_AVX2
  if (kernel_isa_allows_avx2()) return exp_sum_avx2(v, n);
#endif
  return exp_sum_baseline(v, n);
}

}  // namespace qflow
