// The host's CalibrationServices: other installed calibrators and the output cosine of a
// calibrated model, offered to meta-calibrators when a calibrator stage has a model and a dataset.
#pragma once

#include <memory>
#include <string>

#include "framework/plugin/component_registry.h"
#include "framework/quant/output_cosine.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

class HostCalibrationServices final : public CalibrationServices {
 public:
  // `cosine` may hold an error (a model the dataset cannot feed): only output_cosine() fails then.
  HostCalibrationServices(const ComponentRegistry& registry, Expected<std::unique_ptr<OutputCosine>> cosine)
      : registry_(registry), cosine_(std::move(cosine)) {}

  // The registry checks option names and types against the calibrator's declaration (an
  // unknown name is an error listing the allowed ones) and fills defaults for the others.
  Expected<std::shared_ptr<Calibrator>> make_calibrator(const std::string& name, const Options& options) const override {
    return registry_.make_calibrator(name, options);
  }
  Expected<double> output_cosine(const QuantTable& table, int64_t samples) const override {
    if (!cosine_) return cosine_.status();
    return (*cosine_)->evaluate(table, samples);
  }

 private:
  const ComponentRegistry& registry_;
  Expected<std::unique_ptr<OutputCosine>> cosine_;
};

}  // namespace qflow
