// PercentileCalibrator: option check and the per-tensor percentile threshold.
#include "percentile_calibrator.h"

#include <string>

#include "histogram_thresholds.h"

namespace qflow {

ComponentInfo PercentileCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "percentile";
  info.summary = "Per-tensor threshold at a percentile of |x| from its histogram";
  info.required_statistics = {std::string(kStatisticAbsHistogram)};
  info.options = {
      {"percentile", OptionType::Float, 99.99, "percent of the values inside the threshold, in (0, 100]",
       {.min = 0.0, .max = 100.0, .min_exclusive = true}},
  };
  return info;
}

Expected<std::unique_ptr<Calibrator>> PercentileCalibrator::create(const Options& options) {
  const double percentile = options.get_float("percentile");
  if (!(percentile > 0.0 && percentile <= 100.0))
    return invalid_input("percentile calibrator: option percentile must be in (0, 100], got " +
                         std::to_string(percentile));
  return std::unique_ptr<Calibrator>(std::make_unique<PercentileCalibrator>(percentile));
}

Expected<QuantTable> PercentileCalibrator::calibrate(const CalibrationRequest& request) {
  return calibrate_from_histograms(request, "percentile",
                                   [this](const std::string&, const TensorStatistics& stats, const QuantSpec&) {
                                     return Expected<double>(percentile_threshold(
                                         stats.histogram, stats.histogram_range, percentile_));
                                   });
}

}  // namespace qflow
