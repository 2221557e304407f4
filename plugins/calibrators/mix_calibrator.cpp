// MixCalibrator: candidate thresholds per tensor, scored by the expected quantization error.
#include "mix_calibrator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "histogram_thresholds.h"
#include "kl_calibrator.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

constexpr const char* kMethod = "mix";
const std::vector<std::string> kBuiltIn = {"max", "percentile", "kl", "mse"};

bool is_built_in(const std::string& name) { return std::find(kBuiltIn.begin(), kBuiltIn.end(), name) != kBuiltIn.end(); }

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// The threshold a built-in method gives with its default options.
Expected<double> built_in_threshold(const std::string& method, const TensorStatistics& stats, const QuantSpec& spec,
                                    const std::string& what) {
  if (method == "max") return observed_magnitude(stats);
  if (method == "percentile") return percentile_threshold(stats.histogram, stats.histogram_range, 99.99);
  if (method == "kl") return kl_tensor_threshold(stats, kl_grid_bins(128, spec), true, kKlMaxClippedPercent, kMethod, what);
  return mse_threshold(stats.histogram, stats.histogram_range, error_qmax(spec, stats));
}

}  // namespace

ComponentInfo MixCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "mix";
  info.summary = "Per tensor, the threshold of several methods with the smallest expected quantization error";
  info.required_statistics = {std::string(kStatisticRange), std::string(kStatisticAbsHistogram)};
  info.options = {
      {"methods", OptionType::StringList, kBuiltIn,
       "calibrators to choose from per tensor; max, percentile, kl and mse are computed directly, other names are "
       "made by the host"},
  };
  return info;
}

Expected<std::unique_ptr<Calibrator>> MixCalibrator::create(const Options& options) {
  std::vector<std::string> methods = options.get_strings("methods");
  if (methods.empty()) return invalid_input("mix calibrator: option methods names no calibrator");
  std::set<std::string> seen;
  for (const std::string& method : methods) {
    if (method == kMethod) return invalid_input("mix calibrator: option methods cannot name 'mix' itself");
    if (!seen.insert(method).second)
      return invalid_input("mix calibrator: option methods names '" + method + "' twice");
  }
  return std::unique_ptr<Calibrator>(std::make_unique<MixCalibrator>(std::move(methods)));
}

Expected<QuantTable> MixCalibrator::calibrate(const CalibrationRequest& request) {
  if (!request.statistics) return invalid_input("mix calibrator: the request carries no statistics");

  // Methods that are not built in run once over the whole request.
  std::map<std::string, QuantTable> external;
  CalibrationRequest inner = request;
  inner.report = nullptr;
  for (const std::string& method : methods_) {
    if (is_built_in(method)) continue;
    if (!request.services)
      return invalid_input("mix calibrator: method '" + method + "' is not built in (" + joined(kBuiltIn) +
                           ") and needs calibration services: give its stage the input 'dataset'");
    auto calibrator = request.services->make_calibrator(method, Options{});
    if (!calibrator) return calibrator.status().with_context("mix calibrator: method '" + method + "'");
    auto table = calibrator.value()->calibrate(inner);
    if (!table) return table.status().with_context("mix calibrator: method '" + method + "'");
    external.emplace(method, std::move(table).value());
  }

  std::map<std::string, int64_t> counts;
  for (const std::string& method : methods_) counts[method] = 0;
  QuantTable table;
  for (const auto& [name, stats] : *request.statistics) {
    QFLOW_RETURN_IF_ERROR(check_observed(stats, kMethod, name));
    QFLOW_RETURN_IF_ERROR(check_histogram(stats, kMethod, name));
    const QuantSpec spec = request.spec_for(name);
    const double qmax = error_qmax(spec, stats);

    std::size_t best = 0;
    double best_error = 0.0;
    double best_threshold = 0.0;
    for (std::size_t m = 0; m < methods_.size(); ++m) {
      const std::string& method = methods_[m];
      double threshold = 0.0;
      if (is_built_in(method)) {
        QFLOW_ASSIGN_OR_RETURN(threshold, built_in_threshold(method, stats, spec, name));
      } else {
        const QuantTable& proposed = external.at(method);
        auto it = proposed.find(name);
        if (it == proposed.end())
          return invalid_input("mix calibrator: method '" + method + "' gave no parameters for tensor '" + name + "'");
        threshold = it->second.threshold;
        if (!std::isfinite(threshold) || threshold < 0.0)
          return invalid_input("mix calibrator: method '" + method + "' gave tensor '" + name + "' the threshold " +
                               std::to_string(threshold));
      }
      const double error = expected_quantization_mse(stats.histogram, stats.histogram_range, threshold, qmax);
      if (m == 0 || error < best_error) {
        best = m;
        best_error = error;
        best_threshold = threshold;
      }
    }

    const std::string& chosen = methods_[best];
    QuantParams params;
    if (is_built_in(chosen)) {
      QFLOW_ASSIGN_OR_RETURN(params, activation_params(spec, stats, best_threshold, kMethod, name));
    } else {
      params = external.at(chosen).at(name);
    }
    params.method = std::string(kMethod) + ":" + chosen;
    table.emplace(name, std::move(params));
    ++counts[chosen];
  }
  if (request.report)
    for (const auto& [method, count] : counts) request.report->counts[method] = count;
  return table;
}

}  // namespace qflow
