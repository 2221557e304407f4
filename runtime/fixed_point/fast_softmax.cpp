// Softmax on the fast kernels. 8-bit inputs: d = max - x takes at most 256 values, so the
// reference's interpolated exponentials are computed once per call into a table, and within a
// row (one sum) each output is a function of d alone: the row's outputs for d in [0, max -
// min] are computed once (the reference's 64-bit division, then the vector requantize of the
// Q30 probabilities, at most 2^30) and looked up per element. PP-OCR rec's 40 x 6625 head had
// spent 4.3 ns per element in the division; it now takes 0.8. 16-bit inputs: the exponentials
// are tabulated as far as the call's rows reach, each probability is an exact division by a
// reciprocal and one correction, and the row is requantized in vectors. The same integer steps
// as fx::softmax (normalize.cpp), so the same bits.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::fx::fast {
namespace {

// The smallest and largest value of a row (the cmov chains of std::minmax_element took most
// of a 6625-wide row's time, and GCC leaves a plain min / max loop scalar).
std::pair<int32_t, int32_t> row_range_portable(const int32_t* x, int64_t n) {
  int32_t lo = x[0], hi = x[0];
  for (int64_t j = 1; j < n; ++j) {
    lo = x[j] < lo ? x[j] : lo;
    hi = x[j] > hi ? x[j] : hi;
  }
  return {lo, hi};
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) std::pair<int32_t, int32_t> row_range_avx2(const int32_t* x, int64_t n) {
  if (n < 8) return row_range_portable(x, n);
  __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), hi = lo;
  int64_t j = 8;
  for (; j + 8 <= n; j += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + j));
    lo = _mm256_min_epi32(lo, v);
    hi = _mm256_max_epi32(hi, v);
  }
  alignas(32) int32_t l[8], h[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(h), hi);
  const auto [tail_lo, tail_hi] = j < n ? row_range_portable(x + j, n - j) : std::pair<int32_t, int32_t>{l[0], h[0]};
  return {std::min(*std::min_element(l, l + 8), tail_lo), std::max(*std::max_element(h, h + 8), tail_hi)};
}
#endif

std::pair<int32_t, int32_t> row_range(Isa isa, const int32_t* x, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa != Isa::Portable) return row_range_avx2(x, n);
#else
  (void)isa;
#endif
  return row_range_portable(x, n);
}

// The reference's interpolated exponential for x = max - d (0 below the table: exp < 2^-31),
// its rounding_shift inlined: |(e1 - e0) * t| < 2^36 rounds half away from zero by one shift.
int32_t exp_at(const SoftmaxParams& p, int64_t d) {
  const int bits = p.segment_bits;
  const int64_t u = (int64_t{kSoftmaxEntries - 1} << bits) - d;
  if (u < 0) return 0;
  const int64_t i = u >> bits, t = u & ((int64_t{1} << bits) - 1);
  const int64_t e0 = p.exp_table[static_cast<size_t>(i)];
  if (t == 0) return static_cast<int32_t>(e0);
  const int64_t v = (p.exp_table[static_cast<size_t>(i + 1)] - e0) * t;
  const int64_t r = ((v < 0 ? -v : v) + (int64_t{1} << (bits - 1))) >> bits;
  return static_cast<int32_t>(e0 + (v < 0 ? -r : r));
}

// rounding_divide(e << 30, sum) for 0 <= e <= min(sum, 2^30) and sum <= 2^46, as floor((2^31 e
// + sum) / (2 sum)) (round half up): the quotient, at most 2^30, estimated through the
// reciprocal in double (off by at most one), then corrected on the exact integer remainder.
struct Divider {
  int64_t den;
  double inverse;
  explicit Divider(int64_t sum) : den(2 * sum), inverse(1.0 / static_cast<double>(2 * sum)) {}
  int32_t operator()(int64_t e) const {
    const int64_t num = (e << 31) + den / 2;
    auto q = static_cast<int64_t>(static_cast<double>(num) * inverse);
    int64_t rem = num - q * den;
    while (rem < 0) --q, rem += den;
    while (rem >= den) ++q, rem -= den;
    return static_cast<int32_t>(q);
  }
};

// Scalar: prob[j] = exp_of[min(mx - x[j], last)] for j < n, and their sum.
int64_t gather_exps(const int32_t* exp_of, int64_t last, int64_t mx, const int32_t* x, int64_t n, int32_t* prob) {
  int64_t sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    prob[j] = exp_of[std::min(mx - x[j], last)];
    sum += prob[j];
  }
  return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
// gather_exps 16 lanes at a time: d = mx - x in int32 (at most 65535), one vpgatherdd; the
// entries (below 2^31) summed as their 16-bit halves in int32 lanes (at most 4096 per lane).
__attribute__((target("avx512f,avx512vl"))) int64_t gather_exps_avx512(const int32_t* exp_of, int64_t last,
                                                                       int64_t mx, const int32_t* x, int64_t n,
                                                                       int32_t* prob) {
  const __m512i top = _mm512_set1_epi32(static_cast<int32_t>(mx)), cap = _mm512_set1_epi32(static_cast<int32_t>(last));
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  __m512i sum_high = _mm512_setzero_si512(), sum_low = sum_high;
  for (int64_t j = 0; j < n; j += 16) {
    const auto lanes = static_cast<__mmask16>(n - j >= 16 ? 0xFFFF : (1u << (n - j)) - 1);
    const __m512i d = _mm512_maskz_min_epi32(lanes, _mm512_maskz_sub_epi32(lanes, top, _mm512_maskz_loadu_epi32(lanes, x + j)), cap);
    const __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lanes, d, exp_of, 4);
    _mm512_mask_storeu_epi32(prob + j, lanes, e);
    sum_high = _mm512_add_epi32(sum_high, _mm512_maskz_srli_epi32(0xFFFF, e, 16));
    sum_low = _mm512_add_epi32(sum_low, _mm512_and_si512(e, low16));
  }
  alignas(64) int32_t high[16], low[16];
  _mm512_store_si512(high, sum_high);
  _mm512_store_si512(low, sum_low);
  int64_t sum = 0;
  for (int i = 0; i < 16; ++i) sum += int64_t{high[i]} * 65536 + low[i];
  return sum;
}

// Divider's quotients eight at a time: num in double from its two exact 32-bit halves, the
// estimate truncated, q * den from 32-bit products, one correction each way; a vector whose
// remainder is still out of [0, den) (none, by the bound on the estimate) goes one by one.
__attribute__((target("avx512f,avx512vl"))) void divide_avx512(const Divider& divide, int32_t* prob, int64_t n) {
  constexpr __mmask8 all = 0xFF;
  const __m512i den = _mm512_set1_epi64(divide.den), half = _mm512_set1_epi64(divide.den / 2);
  const __m512i den_high = _mm512_set1_epi64(divide.den >> 32), den_low = _mm512_set1_epi64(divide.den & 0xFFFFFFFF);
  const __m512i one = _mm512_set1_epi64(1);
  const __m512d inverse = _mm512_set1_pd(divide.inverse), two32 = _mm512_set1_pd(4294967296.0);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m512i e = _mm512_maskz_cvtepu32_epi64(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(prob + j)));
    const __m512i num = _mm512_add_epi64(_mm512_maskz_slli_epi64(all, e, 31), half);
    const __m512d approx = _mm512_add_pd(
        _mm512_mul_pd(_mm512_maskz_cvtepi32_pd(all, _mm512_maskz_cvtepi64_epi32(all, _mm512_maskz_srli_epi64(all, num, 32))),
                      two32),
        _mm512_maskz_cvtepu32_pd(all, _mm512_maskz_cvtepi64_epi32(all, num)));
    __m512i q = _mm512_maskz_cvtepu32_epi64(all, _mm512_maskz_cvttpd_epi32(all, _mm512_mul_pd(approx, inverse)));
    const __m512i product = _mm512_add_epi64(_mm512_maskz_mul_epu32(all, q, den_low),
                                             _mm512_maskz_slli_epi64(all, _mm512_maskz_mul_epu32(all, q, den_high), 32));
    __m512i rem = _mm512_sub_epi64(num, product);
    const __mmask8 under = _mm512_cmplt_epi64_mask(rem, _mm512_setzero_si512());
    q = _mm512_mask_sub_epi64(q, under, q, one);
    rem = _mm512_mask_add_epi64(rem, under, rem, den);
    const __mmask8 over = _mm512_cmpge_epi64_mask(rem, den);
    q = _mm512_mask_add_epi64(q, over, q, one);
    rem = _mm512_mask_sub_epi64(rem, over, rem, den);
    if ((_mm512_cmplt_epi64_mask(rem, _mm512_setzero_si512()) | _mm512_cmpge_epi64_mask(rem, den)) != 0) {
      for (int64_t i = j; i < j + 8; ++i) prob[i] = divide(prob[i]);
      continue;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(prob + j), _mm512_maskz_cvtepi64_epi32(all, q));
  }
  for (; j < n; ++j) prob[j] = divide(prob[j]);
}
#endif

// Per-thread tables of the 16-bit softmax, reused across calls.
struct Softmax16Scratch {
  std::vector<int32_t> exp_of;                    // [d]: the exponential for x = max - d
  std::vector<std::pair<int32_t, int32_t>> ranges;  // per row: its smallest and largest value
  std::vector<int32_t> probabilities;             // one row's Q30 probabilities
};

// 16-bit inputs: d = max - x spans up to 65535 values, of which the table reaches the first
// (kSoftmaxEntries - 1) << segment_bits; exp_of is filled only as far as the rows' spans go, and
// its last entry stands for every d past it (0 once past the table).
void softmax16(const SoftmaxParams& p, Isa isa, int64_t row, std::span<const int32_t> x, std::span<int32_t> y) {
  thread_local Softmax16Scratch s;
  const int64_t rows = static_cast<int64_t>(x.size()) / row;
  s.ranges.resize(static_cast<size_t>(rows));
  int64_t widest = 0;
  for (int64_t r = 0; r < rows; ++r) {
    s.ranges[static_cast<size_t>(r)] = row_range(isa, x.data() + r * row, row);
    widest = std::max<int64_t>(widest, int64_t{s.ranges[static_cast<size_t>(r)].second} - s.ranges[static_cast<size_t>(r)].first);
  }
  const int64_t last = std::min(widest, (int64_t{kSoftmaxEntries - 1} << p.segment_bits) + 1);
  // Fewer values than the table would hold (a classifier's few logits far apart: filling it
  // took 50 us for two values): each value's exponential directly, the entry the table holds.
  const bool direct = static_cast<int64_t>(x.size()) <= last;
  if (!direct) {
    s.exp_of.resize(static_cast<size_t>(last + 1));
    for (int64_t d = 0; d <= last; ++d) s.exp_of[static_cast<size_t>(d)] = exp_at(p, d);
  }
  s.probabilities.resize(static_cast<size_t>(row));
  int32_t* prob = s.probabilities.data();
  const Range ro = range_of(p.output.type);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* xr = x.data() + r * row;
    const int64_t mx = s.ranges[static_cast<size_t>(r)].second;
    // The sum is at least 2^30 (the maximum's entry) and at most 65536 * 2^30.
    if (direct) {
      int64_t sum = 0;
      for (int64_t j = 0; j < row; ++j) sum += prob[j] = exp_at(p, std::min(mx - xr[j], last));
      const Divider divide(sum);
      for (int64_t j = 0; j < row; ++j) prob[j] = divide(prob[j]);
    } else
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == Isa::Avx512Vnni) {
      divide_avx512(Divider(gather_exps_avx512(s.exp_of.data(), last, mx, xr, row, prob)), prob, row);
    } else
#endif
    {
      const Divider divide(gather_exps(s.exp_of.data(), last, mx, xr, row, prob));
      for (int64_t j = 0; j < row; ++j) prob[j] = divide(prob[j]);
    }
    requantize_row(isa, prob, row, p.output_multiplier, p.output.zero_point, ro.min, ro.max, y.data() + r * row, 1);
  }
}

}  // namespace

Status softmax(const SoftmaxParams& p, Isa isa, int64_t row, std::span<const int32_t> x, std::span<int32_t> y,
               bool inputs_in_range) {
  const Multiplier m = p.output_multiplier;
  // Anything the reference refuses (or computes in other ways) goes to it, for its message.
  if (row < 1 || row > 65536 || x.size() % static_cast<size_t>(row) != 0 ||
      x.size() != y.size() || p.exp_table.size() != static_cast<size_t>(kSoftmaxEntries) || p.segment_bits < 0 ||
      p.segment_bits > 4 || m.mantissa < 0 || m.shift < kMinShift || m.shift > kMaxShift ||
      (!inputs_in_range && !check_range(x, p.input.type, "").is_ok()))
    return fx::softmax(p, row, x, y);
  if (is_16bit(p.input.type)) {
    // The division by a reciprocal takes entries in [0, 2^30] and a positive sum (the
    // maximum's entry is the last one); other tables go to the reference.
    if (p.exp_table.back() == 0 ||
        std::any_of(p.exp_table.begin(), p.exp_table.end(), [](int32_t e) { return e < 0 || e > (1 << 30); }))
      return fx::softmax(p, row, x, y);
    softmax16(p, isa, row, x, y);
    return Status{};
  }
  std::array<int64_t, 256> exp_of{};  // [d]: the exponential for x = max - d
  for (int64_t d = 0; d < 256; ++d) exp_of[static_cast<size_t>(d)] = exp_at(p, d);
  const Range ro = range_of(p.output.type);
  std::array<int32_t, 256> probability_of{}, output_of{};
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(row)) {
    const int32_t* xr = x.data() + base;
    const auto [lowest, mx] = row_range(isa, xr, row);
    const auto distinct = static_cast<size_t>(mx - lowest) + 1;  // values of d in this row
    int64_t sum = 0;  // at least 2^30 (the maximum's entry)
    for (int64_t j = 0; j < row; ++j) sum += exp_of[static_cast<size_t>(mx - xr[j])];
    for (size_t d = 0; d < distinct; ++d)
      probability_of[d] = static_cast<int32_t>(rounding_divide(exp_of[d] << 30, sum));
    requantize_row(isa, probability_of.data(), static_cast<int64_t>(distinct), m, p.output.zero_point, ro.min, ro.max,
                   output_of.data(), 1);
    int32_t* yr = y.data() + base;
    for (int64_t j = 0; j < row; ++j) yr[j] = output_of[static_cast<size_t>(mx - xr[j])];
  }
  return Status{};
}

}  // namespace qflow::fx::fast
