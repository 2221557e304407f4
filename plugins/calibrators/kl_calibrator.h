// KlCalibrator: entropy calibration as in TensorRT, on the histogram of |x|.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// threshold = the candidate clipping edge whose clipped histogram, quantized to
// `target-bins` levels, diverges least from the original (kl_threshold() in
// histogram_thresholds.h, which documents the divergence), then activation_params() under
// the tensor's QuantSpec. Works on the bins the histogram has (2048 from the `histogram`
// observer by default); target-bins above a tensor's bin count is an error for that tensor.
class KlCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  KlCalibrator(int64_t target_bins, bool flatten_zero_bin)
      : target_bins_(target_bins), flatten_zero_bin_(flatten_zero_bin) {}

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;

 private:
  int64_t target_bins_;
  bool flatten_zero_bin_;
};

// The threshold kl_threshold() gives, after checking target_bins against the histogram;
// with `flatten_zero_bin` on a copy whose bin 0 holds bin 1's count.
Expected<double> kl_tensor_threshold(const TensorStatistics& stats, int64_t target_bins, bool flatten_zero_bin,
                                     const std::string& method, const std::string& what);

}  // namespace qflow
