// Concat on the fast kernels: an input with the output's parameters is copied, any other one is
// rescaled block by block through the exact int32 requantize epilogue (x - z_in of a 16-bit or
// 8-bit value fits int32) instead of fx::requantize per element. Anything fx::concat refuses is
// handed to it for its message.
#include <algorithm>

#include "fixed_point/fast_kernels.h"

namespace qflow::fx::fast {
namespace {

bool params_ok(const QParams& q) {
  const Range r = range_of(q.type);
  return q.scale > 0.0 && q.scale <= 1e300 && q.zero_point >= r.min && q.zero_point <= r.max;
}

}  // namespace

Status concat(const std::vector<ConcatInput>& inputs, int64_t outer, int64_t inner, const QParams& output, Isa isa,
              std::span<int32_t> y) {
  // Every check of fx::concat and rescale, as a yes / no.
  bool ok = outer >= 1 && inner >= 1 && params_ok(output);
  int64_t total = 0;
  std::vector<Multiplier> multipliers(inputs.size());
  for (size_t i = 0; ok && i < inputs.size(); ++i) {
    const ConcatInput& in = inputs[i];
    ok = in.axis_dim >= 0 && in.data.size() == static_cast<size_t>(outer * in.axis_dim * inner) && params_ok(in.params) &&
         check_range(in.data, in.params.type, "").is_ok() &&
         (in.params == output || make_multiplier(in.params.scale / output.scale, multipliers[i]).is_ok());
    total += in.axis_dim;
  }
  if (!ok || y.size() != static_cast<size_t>(outer * total * inner)) return fx::concat(inputs, outer, inner, output, y);
  const Range r = range_of(output.type);
  constexpr int64_t kChunk = 256;
  int32_t acc[kChunk];
  int64_t offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ConcatInput& in = inputs[i];
    const int64_t block = in.axis_dim * inner;
    const bool same = in.params == output;
    for (int64_t o = 0; o < outer; ++o) {
      const int32_t* src = in.data.data() + o * block;
      int32_t* dst = y.data() + (o * total + offset) * inner;
      if (same) {
        std::copy_n(src, block, dst);
        continue;
      }
      for (int64_t j0 = 0; j0 < block; j0 += kChunk) {
        const int64_t n = std::min(kChunk, block - j0);
        for (int64_t j = 0; j < n; ++j) acc[j] = src[j0 + j] - in.params.zero_point;
        requantize_row(isa, acc, n, multipliers[i], output.zero_point, r.min, r.max, dst + j0, 1);
      }
    }
    offset += in.axis_dim;
  }
  return Status{};
}

}  // namespace qflow::fx::fast
