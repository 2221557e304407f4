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

// The reference's interpolated exponential for x = max - d (0 below the table: exp < 2^-31).
int32_t exp_at(const SoftmaxParams& p, int64_t d) {
  const int bits = p.segment_bits;
  const int64_t u = (int64_t{kSoftmaxEntries - 1} << bits) - d;
  if (u < 0) return 0;
  const int64_t i = u >> bits, t = u & ((int64_t{1} << bits) - 1);
  const int64_t e0 = p.exp_table[static_cast<size_t>(i)];
  return static_cast<int32_t>(t == 0 ? e0 : e0 + rounding_shift((p.exp_table[static_cast<size_t>(i + 1)] - e0) * t, bits));
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
  s.exp_of.resize(static_cast<size_t>(last + 1));
  for (int64_t d = 0; d <= last; ++d) s.exp_of[static_cast<size_t>(d)] = exp_at(p, d);
  s.probabilities.resize(static_cast<size_t>(row));
  int32_t* prob = s.probabilities.data();
  const Range ro = range_of(p.output.type);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* xr = x.data() + r * row;
    const int64_t mx = s.ranges[static_cast<size_t>(r)].second;
    int64_t sum = 0;  // at least 2^30 (the maximum's entry), at most 65536 * 2^30
    for (int64_t j = 0; j < row; ++j) {
      prob[j] = s.exp_of[static_cast<size_t>(std::min(mx - xr[j], last))];
      sum += prob[j];
    }
    const Divider divide(sum);
    for (int64_t j = 0; j < row; ++j) prob[j] = divide(prob[j]);
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
