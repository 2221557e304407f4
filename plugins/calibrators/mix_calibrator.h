// MixCalibrator: per tensor, the threshold of several methods with the smallest local error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// For every tensor, each method of `methods` proposes a threshold and the one with the
// smallest expected_quantization_mse() of the tensor's |x| histogram (qmax from
// error_qmax() for its QuantSpec) wins; ties go to the earlier method in the list.
//  * built-in names are computed here with their default options: max = max(|min|, |max|),
//    percentile = percentile_threshold(99.99), kl = the kl calibrator's defaults,
//    mse = mse_threshold(); the parameters then come from activation_params();
//  * any other name is made through request.services->make_calibrator(name, {}) and run
//    once on the same request (without the report); its entry for the tensor is scored by
//    its threshold and, when it wins, kept as that calibrator made it.
// params.method is "mix:<method>"; request.report->counts holds, for every method of the
// list, the number of tensors that chose it. Needs histograms (observer `histogram`).
class MixCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  explicit MixCalibrator(std::vector<std::string> methods) : methods_(std::move(methods)) {}

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;

 private:
  std::vector<std::string> methods_;
};

}  // namespace qflow
