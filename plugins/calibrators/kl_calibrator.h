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
// A grid narrowed by activation-bits b < 8 merges into 2^(b-1) levels (kl_grid_bins()).
// Candidates that clip more than `max-clipped` percent of the values are not considered
// (bulk_edge() says why: on distributions whose mass lies away from zero the divergence
// favours a threshold below the whole distribution).
class KlCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  KlCalibrator(int64_t target_bins, bool flatten_zero_bin, double max_clipped)
      : target_bins_(target_bins), flatten_zero_bin_(flatten_zero_bin), max_clipped_(max_clipped) {}

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;

 private:
  int64_t target_bins_;
  bool flatten_zero_bin_;
  double max_clipped_;
};

// The default of option max-clipped, in percent.
inline constexpr double kKlMaxClippedPercent = 1.0;

// The target bins of a tensor quantized under `spec`: `target_bins` (128: int8's levels on
// one side of zero) scaled down with a grid narrowed below 8 bits, target_bins >> (8 - b),
// at least 1: 2^(b-1) levels for activation_bits b with the default (8 at 4 bits). Grids in
// 16-bit containers take their observed range (calibrate_from_histograms()), so need none.
int64_t kl_grid_bins(int64_t target_bins, const QuantSpec& spec);

// The threshold kl_threshold() gives, after checking target_bins against the histogram;
// with `flatten_zero_bin` on a copy whose bin 0 holds bin 1's count; candidates start at
// bulk_edge(counts, max_clipped) of the counts searched.
Expected<double> kl_tensor_threshold(const TensorStatistics& stats, int64_t target_bins, bool flatten_zero_bin,
                                     double max_clipped, const std::string& method, const std::string& what);

}  // namespace qflow
