// PercentileCalibrator: the threshold is a percentile of |x| read from the histogram.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// threshold = the |x| below which `percentile` percent of the values lie
// (percentile_threshold() in histogram_thresholds.h: linear interpolation inside the bin),
// then activation_params() under the tensor's QuantSpec. Needs histograms (observer
// `histogram`); a tensor without one is an error, as are tensors without finite values.
class PercentileCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  explicit PercentileCalibrator(double percentile) : percentile_(percentile) {}

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;

 private:
  double percentile_;
};

}  // namespace qflow
