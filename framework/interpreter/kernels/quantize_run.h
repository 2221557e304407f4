// The float32 loops of QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.
// QuantizeLinear's: round_half_to_even(x / scale) + zero point, saturated, NaN to the zero point. An AVX2 loop is chosen at run time; it gives the same
// bytes as the scalar saturate_round (division and rounding are exact IEEE operations).
#pragma once

#include <cstdint>

namespace qflow::quant_detail {

template <typename Q>
void quantize_float_run(const float* in, Q* out, int64_t n, float scale, int32_t zero_point);

// DequantizeLinear's: out = (float(in) - float(zero point)) * scale, both operands
// converted to float32 before subtracting, as the reference does. The AVX2 copy of the same
// loop gives the same bits (no multiply-add to contract into).
template <typename T>
void dequantize_run(const T* in, float* out, int64_t n, float scale, int32_t zero_point);

// Widens [lo, hi] to hold every non-NaN value of in[0, n) (DynamicQuantizeLinear's range);
// NaNs are skipped. AVX2 when the CPU has it; min and max are exact, so both paths agree.
void float_range_run(const float* in, int64_t n, float& lo, float& hi);

}  // namespace qflow::quant_detail
