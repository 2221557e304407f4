// MaxCalibrator: the threshold is the largest finite magnitude; the spec does the rest.
#include "max_calibrator.h"

#include <string>

#include "qflow/quant/quant_math.h"

namespace qflow {

ComponentInfo MaxCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "max";
  info.summary = "Per-tensor threshold at the largest finite magnitude max(|min|, |max|)";
  info.required_statistics = {std::string(kStatisticRange)};
  return info;
}

Expected<std::unique_ptr<Calibrator>> MaxCalibrator::create(const Options&) {
  return std::unique_ptr<Calibrator>(std::make_unique<MaxCalibrator>());
}

Expected<QuantTable> MaxCalibrator::calibrate(const CalibrationRequest& request) {
  if (!request.statistics) return invalid_input("max calibrator: the request carries no statistics");
  QuantTable table;
  for (const auto& [name, stats] : *request.statistics) {
    QFLOW_RETURN_IF_ERROR(check_observed(stats, "max", name));
    QFLOW_ASSIGN_OR_RETURN(QuantParams params,
                           activation_params(request.spec_for(name), stats, observed_magnitude(stats), "max", name));
    table.emplace(name, std::move(params));
  }
  return table;
}

}  // namespace qflow
