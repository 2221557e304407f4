// MseCalibrator: the per-tensor threshold with the smallest expected quantization error.
#include "mse_calibrator.h"

#include <string>

#include "histogram_thresholds.h"

namespace qflow {

ComponentInfo MseCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "mse";
  info.summary = "Per-tensor threshold at the histogram bin edge with the smallest expected quantization error";
  info.required_statistics = {std::string(kStatisticAbsHistogram)};
  return info;
}

Expected<std::unique_ptr<Calibrator>> MseCalibrator::create(const Options&) {
  return std::unique_ptr<Calibrator>(std::make_unique<MseCalibrator>());
}

Expected<QuantTable> MseCalibrator::calibrate(const CalibrationRequest& request) {
  return calibrate_from_histograms(request, "mse",
                                   [](const std::string&, const TensorStatistics& stats, const QuantSpec& spec) {
                                     return Expected<double>(mse_threshold(stats.histogram, stats.histogram_range,
                                                                           error_qmax(spec, stats)));
                                   });
}

}  // namespace qflow
