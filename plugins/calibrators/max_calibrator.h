// MaxCalibrator: symmetric per-tensor scales from the largest finite magnitude observed.
#pragma once

#include <cstdint>
#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// threshold = max(|min|, |max|) over the finite values, scale = threshold / qmax
// (127 for int8, 32767 for int16), zero point 0. With `power-of-two` the scale is rounded
// up to the next power of two, so the representable range still covers the threshold;
// `threshold` keeps the observed value.
//
// Degenerate statistics:
//  * finite values seen but all zero (threshold 0): any scale represents them exactly;
//    the scale is 1 / qmax (the unit range), which keeps it positive as QuantizeLinear
//    requires. The reported threshold stays 0.
//  * no finite value (only NaN/Inf, or nothing observed): an error naming the tensor,
//    because no range can be derived and guessing one would silently hide a broken model.
class MaxCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  MaxCalibrator(DType dtype, bool power_of_two) : dtype_(dtype), power_of_two_(power_of_two) {}

  // The `dtype` option decides the quantized type; request.activation_dtype is not
  // consulted, so the pipeline file alone says what a stage produces.
  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;

 private:
  DType dtype_;
  bool power_of_two_;
};

}  // namespace qflow
