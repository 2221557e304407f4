// The built-in calibrators run on one tensor's statistics, as the calibrate stage runs them:
// shared by the calibrator tests.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>

#include "plugins/calibrators/kl_calibrator.h"
#include "plugins/calibrators/max_calibrator.h"
#include "plugins/calibrators/mix_calibrator.h"
#include "plugins/calibrators/mse_calibrator.h"
#include "plugins/calibrators/percentile_calibrator.h"

namespace qflow::test {

// Options of a component filled with its declared defaults, as the host passes them.
template <typename Component>
Options defaults() {
  Options options;
  for (const OptionSpec& spec : Component::info().options) options.set(spec.name, spec.default_value);
  return options;
}

// The parameters `method` (max, percentile, kl, mse or mix, default options) gives one
// tensor with statistics `stats` under `spec`.
inline QuantParams calibrate_tensor(const std::string& method, const TensorStatistics& stats, const QuantSpec& spec) {
  Expected<std::unique_ptr<Calibrator>> calibrator = internal_error("unknown method");
  if (method == "max") calibrator = MaxCalibrator::create(defaults<MaxCalibrator>());
  if (method == "percentile") calibrator = PercentileCalibrator::create(defaults<PercentileCalibrator>());
  if (method == "kl") calibrator = KlCalibrator::create(defaults<KlCalibrator>());
  if (method == "mse") calibrator = MseCalibrator::create(defaults<MseCalibrator>());
  if (method == "mix") calibrator = MixCalibrator::create(defaults<MixCalibrator>());
  REQUIRE(calibrator);
  const std::map<std::string, TensorStatistics> statistics = {{"t", stats}};
  const std::map<std::string, QuantSpec> specs = {{"t", spec}};
  CalibrationRequest request;
  request.statistics = &statistics;
  request.specs = &specs;
  auto table = (*calibrator)->calibrate(request);
  REQUIRE_MESSAGE(table, method);
  return table->at("t");
}

}  // namespace qflow::test
