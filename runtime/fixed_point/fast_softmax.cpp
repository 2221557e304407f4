// Softmax on the fast kernels for 8-bit inputs: x - max takes 256 values, so the reference's
// interpolated exponentials are computed once per call into a table, and the Q30
// probabilities (at most 2^30, inside the exact int32 epilogue's range) go through the vector
// requantize instead of one out-of-line requantize per element. The same integer steps as
// fx::softmax (normalize.cpp), so the same bits.
#include <algorithm>
#include <array>

#include "runtime/fixed_point/fast_kernels.h"

namespace qflow::fx::fast {

Status softmax(const SoftmaxParams& p, Isa isa, int64_t row, std::span<const int32_t> x, std::span<int32_t> y,
               bool inputs_in_range) {
  const Multiplier m = p.output_multiplier;
  // Anything the reference refuses (or computes in other ways) goes to it, for its message.
  if (is_16bit(p.input.type) || row < 1 || row > 65536 || x.size() % static_cast<size_t>(row) != 0 ||
      x.size() != y.size() || p.exp_table.size() != static_cast<size_t>(kSoftmaxEntries) || p.segment_bits < 0 ||
      p.segment_bits > 4 || m.mantissa < 0 || m.shift < kMinShift || m.shift > kMaxShift ||
      (!inputs_in_range && !check_range(x, p.input.type, "").ok()))
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
  thread_local std::vector<int32_t> probabilities;
  if (probabilities.size() < static_cast<size_t>(row)) probabilities.resize(static_cast<size_t>(row));
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(row)) {
    const int32_t* xr = x.data() + base;
    const int32_t mx = *std::max_element(xr, xr + row);
    int64_t sum = 0;  // at least 2^30 (the maximum's entry)
    for (int64_t j = 0; j < row; ++j) sum += exp_of[static_cast<size_t>(mx - xr[j])];
    for (int64_t j = 0; j < row; ++j)
      probabilities[static_cast<size_t>(j)] =
          static_cast<int32_t>(rounding_divide(exp_of[static_cast<size_t>(mx - xr[j])] << 30, sum));
    requantize_row(isa, probabilities.data(), row, m, p.output.zero_point, ro.min, ro.max, y.data() + base, 1);
  }
  return Status{};
}

}  // namespace qflow::fx::fast
