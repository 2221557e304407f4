// AutoCalibrator: runs several calibrators and keeps the table with the best output cosine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// For each method of `methods`, in order: request.services->make_calibrator(method, {})
// (default options), calibrate with the same request (without the report, which is auto's
// own), and score the table with request.services->output_cosine(table, samples): the mean
// cosine similarity of the quantized model's outputs to the float ones on the first
// `samples` calibration samples (0: all). The table with the highest score is returned (ties: the earlier method), each
// entry's method prefixed with "auto:". request.report->chosen is the method kept and
// scores[method] the cosine of every method. Without services (a stage without the
// 'dataset' input) it is an error; a non-finite score is an error.
class AutoCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  AutoCalibrator(std::vector<std::string> methods, int64_t samples) : methods_(std::move(methods)), samples_(samples) {}

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;

 private:
  std::vector<std::string> methods_;
  int64_t samples_;
};

}  // namespace qflow
