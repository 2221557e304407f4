// One tensor through the histogram observer and the built-in calibrators, as the observe and
// calibrate stages run them: shared by the calibrator tests.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/calibrators/kl_calibrator.h"
#include "plugins/calibrators/max_calibrator.h"
#include "plugins/calibrators/mix_calibrator.h"
#include "plugins/calibrators/mse_calibrator.h"
#include "plugins/calibrators/percentile_calibrator.h"
#include "plugins/observers/histogram_observer.h"

namespace qflow::test {

// Options of a component filled with its declared defaults, as the host passes them.
template <typename Component>
Options defaults() {
  Options options;
  for (const OptionSpec& spec : Component::info().options) options.set(spec.name, spec.default_value);
  return options;
}

// The statistics of `values` (one tensor) from the histogram observer with 2048 bins, both passes.
inline TensorStatistics observe(const std::vector<float>& values) {
  Options options;
  options.set("bins", int64_t{2048});
  auto observer = HistogramObserver::create(options);
  REQUIRE(observer);
  const Tensor t = Tensor::from_vector<float>({static_cast<int64_t>(values.size())}, values);
  REQUIRE((*observer)->begin_pass(0).is_ok());
  REQUIRE((*observer)->observe(t).is_ok());
  REQUIRE((*observer)->begin_pass(1).is_ok());
  REQUIRE((*observer)->observe(t).is_ok());
  return (*observer)->statistics();
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
