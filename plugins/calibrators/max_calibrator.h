// MaxCalibrator: per-tensor parameters from the largest finite magnitude observed.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// threshold = max(|min|, |max|) over the finite values; the parameters follow from it under
// each tensor's QuantSpec (request.spec_for(name): dtype, symmetric, power-of-two, from the
// pipeline's [quantization] table) through activation_params() in quant_math.h. Symmetric
// int8: scale = threshold / 127, zero point 0; with power-of-two the scale is rounded up to
// the next power of two and `threshold` keeps the observed value.
//
// Degenerate statistics:
//  * finite values seen but all zero (threshold 0): any scale represents them exactly;
//    activation_params() gives the unit range (1 / qmax for symmetric types), which keeps
//    the scale positive as QuantizeLinear requires. The reported threshold stays 0.
//  * no finite value (only NaN/Inf, or nothing observed): an error naming the tensor
//    (check_observed()), because no range can be derived and guessing one would silently
//    hide a broken model.
class MaxCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;
};

}  // namespace qflow
