// Softmax on the fast kernels for 8-bit inputs: d = max - x takes at most 256 values, so the
// reference's interpolated exponentials are computed once per call into a table, and within a
// row (one sum) each output is a function of d alone: the row's outputs for d in [0, max -
// min] are computed once (the reference's 64-bit division, then the vector requantize of the
// Q30 probabilities, at most 2^30) and looked up per element. PP-OCR rec's 40 x 6625 head had
// spent 4.3 ns per element in the division; it now takes 0.8. The same integer steps as fx::softmax
// (normalize.cpp), so the same bits.
#include <algorithm>
#include <array>
#include <utility>

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

}  // namespace

Status softmax(const SoftmaxParams& p, Isa isa, int64_t row, std::span<const int32_t> x, std::span<int32_t> y,
               bool inputs_in_range) {
  const Multiplier m = p.output_multiplier;
  // Anything the reference refuses (or computes in other ways) goes to it, for its message.
  if (is_16bit(p.input.type) || row < 1 || row > 65536 || x.size() % static_cast<size_t>(row) != 0 ||
      x.size() != y.size() || p.exp_table.size() != static_cast<size_t>(kSoftmaxEntries) || p.segment_bits < 0 ||
      p.segment_bits > 4 || m.mantissa < 0 || m.shift < kMinShift || m.shift > kMaxShift ||
      (!inputs_in_range && !check_range(x, p.input.type, "").is_ok()))
    return fx::softmax(p, row, x, y);
  const int bits = p.segment_bits;
  const int64_t mask = (int64_t{1} << bits) - 1, span = int64_t{kSoftmaxEntries - 1} << bits;
  // exp_of[d]: the reference's entry for x = max - d.
  std::array<int64_t, 256> exp_of{};
  for (int64_t d = 0; d < 256; ++d) {
    const int64_t u = span - d;
    if (u < 0) continue;  // below the table: exp < 2^-31
    const int64_t i = u >> bits, t = u & mask;
    const int64_t e0 = p.exp_table[static_cast<size_t>(i)];
    exp_of[static_cast<size_t>(d)] =
        t == 0 ? e0 : e0 + rounding_shift((p.exp_table[static_cast<size_t>(i + 1)] - e0) * t, bits);
  }
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
