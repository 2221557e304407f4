// Helpers shared by the quantization kernel files: rounding, saturation, parameter reading.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"

namespace qflow::quant_detail {

// Integer types a quantized tensor (and its zero point) may hold. int16/uint16 are accepted
// at every opset: ONNX standardised them late, but qflow's 16-bit paths rely on them.
template <typename Body>
Status dispatch_quantized(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::Int8: return body.template operator()<int8_t>();
    case DType::UInt8: return body.template operator()<uint8_t>();
    case DType::Int16: return body.template operator()<int16_t>();
    case DType::UInt16: return body.template operator()<uint16_t>();
    default:
      return unsupported(std::string("quantized element type ") + std::string(dtype_name(dtype)) +
                         " is not supported (int8, uint8, int16 or uint16 expected)");
  }
}

// round_half_to_even(value) + zero_point, saturated to T. NaN maps to the zero point, as a
// value that is already rounded cannot carry it further.
template <typename T>
inline T saturate_round(float value, int32_t zero_point) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (std::isnan(value)) value = 0.0f;
  const double q = static_cast<double>(std::nearbyint(value)) + zero_point;
  return static_cast<T>(std::clamp(q, lo, hi));
}

template <typename T>
inline T saturate_round(double value, int32_t zero_point) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (std::isnan(value)) value = 0.0;
  const double q = std::nearbyint(value) + zero_point;
  return static_cast<T>(std::clamp(q, lo, hi));
}

// Scale values as float32, whatever float type the tensor holds.
Expected<std::vector<float>> read_scales(const KernelContext& context, const Tensor& scale, const char* what);
// Zero-point values as int32; a missing zero point reads as `count` zeros.
Expected<std::vector<int32_t>> read_zero_points(const KernelContext& context, const Tensor* zero_point,
                                                std::size_t count, const char* what);
// Errors unless the tensor holds exactly one element (scalar or 1-element 1-D).
Status require_per_tensor(const KernelContext& context, const Tensor* tensor, const char* what);

void register_qlinear_kernels(KernelRegistry& registry);

}  // namespace qflow::quant_detail
