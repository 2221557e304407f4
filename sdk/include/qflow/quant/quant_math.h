// Quantization arithmetic shared by calibrators, the QDQ model builder and backends:
// integer ranges, half-to-even rounding, power-of-two scales and parameters from a threshold.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "qflow/core/status.h"
#include "qflow/ir/dtype.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

struct QuantRange {
  int64_t min = 0;
  int64_t max = 0;
};

// Saturation range of a quantized type, as ONNX QuantizeLinear saturates to it.
inline QuantRange quant_range(DType dtype) {
  switch (dtype) {
    case DType::Int8: return {-128, 127};
    case DType::UInt8: return {0, 255};
    case DType::Int16: return {-32768, 32767};
    case DType::UInt16: return {0, 65535};
    default: return {0, 0};
  }
}
inline bool is_signed_quant(DType dtype) { return dtype == DType::Int8 || dtype == DType::Int16; }
inline bool is_16bit_quant(DType dtype) { return dtype == DType::Int16 || dtype == DType::UInt16; }
// The width of a quantized type's container: 8, 16, or 0 for other types.
inline int quant_bits(DType dtype) {
  if (quant_range(dtype).max == 0) return 0;
  return is_16bit_quant(dtype) ? 16 : 8;
}

// `bits` as a QuantParams records it: b when 0 < b < the container's width (a narrowed
// grid), else 0 (the full range), so an 8-bit grid in int8 is the plain int8 entry.
inline int grid_bits(DType dtype, int bits) { return bits > 0 && bits < quant_bits(dtype) ? bits : 0; }

// The integer grid of an activation: the container's range narrowed to `bits` b when
// 0 < b < its width, [-2^(b-1), 2^(b-1)-1] for signed types (int8 container at 4 bits:
// [-8, 7]) and [0, 2^b-1] for unsigned ones; otherwise quant_range(dtype). Every place that
// quantizes an activation or derives something from its parameters clamps to this range.
inline QuantRange grid_range(DType dtype, int bits) {
  const int b = grid_bits(dtype, bits);
  if (b == 0) return quant_range(dtype);
  if (is_signed_quant(dtype)) return {-(int64_t{1} << (b - 1)), (int64_t{1} << (b - 1)) - 1};
  return {0, (int64_t{1} << b) - 1};
}
inline QuantRange grid_range(const QuantParams& params) { return grid_range(params.dtype, params.bits); }
// The grid a QuantSpec asks for its output activations.
inline QuantRange activation_grid(const QuantSpec& spec) { return grid_range(spec.activation_dtype, spec.activation_bits); }
// Whether `params` are on the grid `spec` asks for (type and width).
inline bool on_spec_grid(const QuantParams& params, const QuantSpec& spec) {
  return params.dtype == spec.activation_dtype && params.bits == grid_bits(spec.activation_dtype, spec.activation_bits);
}

// The largest finite magnitude observed, max(|min|, |max|): the `max` calibrator's threshold,
// and every histogram calibrator's at 16 bits.
inline double observed_magnitude(const TensorStatistics& stats) {
  return std::max(std::fabs(stats.min), std::fabs(stats.max));
}

// The largest magnitude a symmetric scale maps to: 127 for int8, 32767 for int16, the
// unsigned maximum for unsigned types (whose zero point is then 0).
inline double symmetric_qmax(DType dtype) { return static_cast<double>(quant_range(dtype).max); }

// The largest |q| of a weight quantized under `spec`: 2^(b-1) - 1 for weight_bits b (7 at 4
// bits), else 127 for Int8 (64 with reduce_range, docs/quantization.md) and 32767 for Int16.
// The per-channel scale is max|w| / weight_qmax, so a channel's largest weight lies on the grid.
inline double weight_qmax(DType dtype, bool reduce_range, int bits = 0) {
  double qmax = bits > 0 ? std::ldexp(1.0, bits - 1) - 1.0 : symmetric_qmax(dtype);
  if (dtype == DType::Int8 && reduce_range) qmax = std::min(qmax, 64.0);
  return qmax;
}
inline double weight_qmax(const QuantSpec& spec) { return weight_qmax(spec.weight_dtype, spec.reduce_range, spec.weight_bits); }

// Round half to even, as ONNX QuantizeLinear (std::nearbyint under the default rounding mode).
inline double round_half_even(double x) { return std::nearbyint(x); }

// Smallest power of two >= value (value > 0); frexp is exact, so no pow/log rounding.
inline double next_power_of_two(double value) {
  int exponent = 0;
  const double mantissa = std::frexp(value, &exponent);  // value = mantissa * 2^exponent
  return mantissa == 0.5 ? std::ldexp(1.0, exponent - 1) : std::ldexp(1.0, exponent);
}

// Activation parameters for clipping threshold `threshold` (|x| units) under `spec`, on its
// grid (activation_grid: qmin, qmax). Symmetric signed: scale = threshold / qmax (127, or
// 2^(b-1)-1 for activation_bits b), zero point 0. Asymmetric (or unsigned): the observed
// range [min, max] clipped to [-threshold, threshold] and widened to hold 0, spread over
// qmax - qmin steps. `what` names the tensor in errors.
inline Expected<QuantParams> activation_params(const QuantSpec& spec, const TensorStatistics& stats, double threshold,
                                               const std::string& method, const std::string& what) {
  if (!std::isfinite(threshold) || threshold < 0.0)
    return invalid_input(method + " calibrator: tensor '" + what + "': threshold " + std::to_string(threshold) +
                         " is not a finite non-negative number");
  const DType dtype = spec.activation_dtype;
  if (quant_range(dtype).max == 0) return invalid_input(method + " calibrator: tensor '" + what + "': " +
                                                        std::string(dtype_name(dtype)) + " is not a quantized type");
  if (spec.activation_bits != 0 && (spec.activation_bits < 2 || spec.activation_bits > quant_bits(dtype)))
    return invalid_input(method + " calibrator: tensor '" + what + "': " + std::to_string(spec.activation_bits) +
                         "-bit activations do not fit " + std::string(dtype_name(dtype)));
  const QuantRange range = activation_grid(spec);
  double scale = 0.0;
  int64_t zero_point = 0;
  const bool symmetric = spec.symmetric && is_signed_quant(dtype);
  if (symmetric) {
    scale = (threshold > 0.0 ? threshold : 1.0) / static_cast<double>(range.max);
    if (spec.power_of_two) scale = next_power_of_two(scale);
  } else {
    double lo = std::min(0.0, std::max(stats.min, -threshold));
    double hi = std::max(0.0, std::min(stats.max, threshold));
    if (!std::isfinite(lo) || !std::isfinite(hi)) lo = -threshold, hi = threshold;
    if (hi - lo <= 0.0) hi = lo + 1.0;
    scale = (hi - lo) / static_cast<double>(range.max - range.min);
    if (spec.power_of_two) scale = next_power_of_two(scale);
    const double zp = round_half_even(static_cast<double>(range.min) - lo / scale);
    zero_point = static_cast<int64_t>(std::clamp(zp, static_cast<double>(range.min), static_cast<double>(range.max)));
  }
  const auto scale32 = static_cast<float>(scale);
  if (!(scale32 >= std::numeric_limits<float>::min()) || !std::isfinite(scale32))
    return invalid_input(method + " calibrator: tensor '" + what + "': threshold " + std::to_string(threshold) +
                         " gives a scale that float32 cannot hold as a normal number");
  QuantParams params;
  params.dtype = dtype;
  params.bits = grid_bits(dtype, spec.activation_bits);
  params.scale = {scale32};
  params.zero_point = {zero_point};
  params.axis = -1;
  params.threshold = threshold;
  params.method = method;
  return params;
}

// The checks every calibrator makes before trusting a tensor's statistics.
inline Status check_observed(const TensorStatistics& stats, const std::string& method, const std::string& what) {
  if (stats.count > 0 && std::isfinite(stats.min) && std::isfinite(stats.max) && stats.min <= stats.max)
    return Status::ok();
  if (stats.count <= 0 && (stats.nan_count > 0 || stats.inf_count > 0))
    return invalid_input(method + " calibrator: tensor '" + what + "' has no finite values (" +
                         std::to_string(stats.nan_count) + " NaN, " + std::to_string(stats.inf_count) +
                         " Inf): no range to calibrate");
  if (stats.count <= 0) return invalid_input(method + " calibrator: tensor '" + what + "' has no observed values");
  return invalid_input(method + " calibrator: tensor '" + what + "' has an invalid range [" +
                       std::to_string(stats.min) + ", " + std::to_string(stats.max) + "]");
}

}  // namespace qflow
