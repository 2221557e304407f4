// MaxCalibrator: option parsing and the per-tensor scale computation.
#include "max_calibrator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace qflow {

namespace {

int64_t qmax_of(DType dtype) { return dtype == DType::Int16 ? 32767 : 127; }

// Smallest power of two >= value (value > 0); frexp is exact, so no pow/log rounding.
double next_power_of_two(double value) {
  int exponent = 0;
  const double mantissa = std::frexp(value, &exponent);  // value = mantissa * 2^exponent, mantissa in [0.5, 1)
  return mantissa == 0.5 ? std::ldexp(1.0, exponent - 1) : std::ldexp(1.0, exponent);
}

Expected<QuantParams> calibrate_tensor(const std::string& name, const TensorStatistics& stats, DType dtype,
                                       bool power_of_two) {
  if (stats.count <= 0) {
    if (stats.nan_count > 0 || stats.inf_count > 0)
      return invalid_input("max calibrator: tensor '" + name + "' has no finite values (" +
                           std::to_string(stats.nan_count) + " NaN, " + std::to_string(stats.inf_count) +
                           " Inf): no range to calibrate");
    return invalid_input("max calibrator: tensor '" + name + "' has no observed values");
  }
  if (!std::isfinite(stats.min) || !std::isfinite(stats.max) || stats.min > stats.max)
    return invalid_input("max calibrator: tensor '" + name + "' has an invalid range [" + std::to_string(stats.min) +
                         ", " + std::to_string(stats.max) + "]");

  const double qmax = static_cast<double>(qmax_of(dtype));
  const double threshold = std::max(std::fabs(stats.min), std::fabs(stats.max));
  double scale = threshold > 0.0 ? threshold / qmax : 1.0 / qmax;
  if (power_of_two) scale = next_power_of_two(scale);
  const auto scale32 = static_cast<float>(scale);
  if (!(scale32 >= std::numeric_limits<float>::min()) || !std::isfinite(scale32))
    return invalid_input("max calibrator: tensor '" + name + "': threshold " + std::to_string(threshold) +
                         " gives a scale that float32 cannot hold as a normal number");

  QuantParams params;
  params.dtype = dtype;
  params.scale = {scale32};
  params.zero_point = {0};
  params.axis = -1;
  params.threshold = threshold;
  params.method = "max";
  return params;
}

}  // namespace

ComponentInfo MaxCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "max";
  info.summary = "Symmetric per-tensor scale from the largest finite magnitude: max(|min|, |max|) / qmax";
  info.options = {
      {"dtype", OptionType::String, std::string("int8"), "quantized type: int8 (qmax 127) or int16 (qmax 32767)"},
      {"power-of-two", OptionType::Bool, false, "round each scale up to the next power of two (shift-only requantization)"},
  };
  return info;
}

Expected<std::unique_ptr<Calibrator>> MaxCalibrator::create(const Options& options) {
  const std::string dtype = options.get_string("dtype");
  DType parsed = DType::Undefined;
  if (dtype == "int8") parsed = DType::Int8;
  else if (dtype == "int16") parsed = DType::Int16;
  else return invalid_input("max calibrator: option dtype must be int8 or int16, got '" + dtype + "'");
  return std::unique_ptr<Calibrator>(std::make_unique<MaxCalibrator>(parsed, options.get_bool("power-of-two")));
}

Expected<QuantTable> MaxCalibrator::calibrate(const CalibrationRequest& request) {
  if (!request.statistics) return invalid_input("max calibrator: the request carries no statistics");
  QuantTable table;
  for (const auto& [name, stats] : *request.statistics) {
    QFLOW_ASSIGN_OR_RETURN(QuantParams params, calibrate_tensor(name, stats, dtype_, power_of_two_));
    table.emplace(name, std::move(params));
  }
  return table;
}

}  // namespace qflow
