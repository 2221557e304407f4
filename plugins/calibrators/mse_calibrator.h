// MseCalibrator: the threshold minimising the expected quantization error of the histogram.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// threshold = the bin edge with the smallest expected_quantization_mse() of the tensor's
// |x| histogram (mse_threshold() in histogram_thresholds.h: candidates are every bin's upper
// edge up to the range), with qmax from error_qmax() for the tensor's QuantSpec, then
// activation_params() under that spec. Needs histograms (observer `histogram`).
class MseCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;
};

}  // namespace qflow
