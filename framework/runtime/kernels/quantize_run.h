// The float32 -> integer loop of QuantizeLinear: round_half_to_even(x / scale) + zero point,
// saturated, NaN to the zero point. An AVX2 loop is chosen at run time; it gives the same
// bytes as the scalar saturate_round (division and rounding are exact IEEE operations).
#pragma once

#include <cstdint>

namespace qflow::quant_detail {

template <typename Q>
void quantize_float_run(const float* in, Q* out, int64_t n, float scale, int32_t zero_point);

}  // namespace qflow::quant_detail
