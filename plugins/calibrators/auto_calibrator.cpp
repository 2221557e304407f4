// AutoCalibrator: whole-table candidates scored end to end by the host's output cosine.
#include "auto_calibrator.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

namespace qflow {

ComponentInfo AutoCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "auto";
  info.summary = "Runs several calibrators and keeps the table whose quantized model output is closest to float";
  info.required_statistics = {std::string(kStatisticRange), std::string(kStatisticAbsHistogram)};
  info.options = {
      {"methods", OptionType::StringList, std::vector<std::string>{"kl", "mse", "percentile", "max"},
       "calibrators to try, each with its default options; the first wins ties"},
      {"samples", OptionType::Int, int64_t{16},
       "score each table on the first N calibration samples (0: all), as the precision search measures its "
       "target on 16"},
  };
  return info;
}

Expected<std::unique_ptr<Calibrator>> AutoCalibrator::create(const Options& options) {
  std::vector<std::string> methods = options.get_strings("methods");
  if (methods.empty()) return invalid_input("auto calibrator: option methods names no calibrator");
  std::set<std::string> seen;
  for (const std::string& method : methods) {
    if (method == "auto") return invalid_input("auto calibrator: option methods cannot name 'auto' itself");
    if (!seen.insert(method).second)
      return invalid_input("auto calibrator: option methods names '" + method + "' twice");
  }
  const int64_t samples = options.get_int("samples");
  if (samples < 0) return invalid_input("auto calibrator: option samples must be >= 0, got " + std::to_string(samples));
  return std::unique_ptr<Calibrator>(std::make_unique<AutoCalibrator>(std::move(methods), samples));
}

Expected<QuantTable> AutoCalibrator::calibrate(const CalibrationRequest& request) {
  if (!request.services)
    return invalid_input("auto calibrator needs calibration samples: give its stage the input 'dataset'");
  CalibrationRequest inner = request;
  inner.report = nullptr;

  std::map<std::string, double> scores;
  QuantTable best_table;
  std::string best_method;
  double best_score = 0.0;
  for (const std::string& method : methods_) {
    const std::string context = "auto calibrator: method '" + method + "'";
    auto calibrator = request.services->make_calibrator(method, Options{});
    if (!calibrator) return calibrator.status().with_context(context);
    auto table = calibrator.value()->calibrate(inner);
    if (!table) return table.status().with_context(context);
    auto score = request.services->output_cosine(table.value(), samples_);
    if (!score) return score.status().with_context(context);
    if (!std::isfinite(score.value()))
      return invalid_input(context + ": the output cosine is " + std::to_string(score.value()) +
                           ", not a finite number");
    scores[method] = score.value();
    if (best_method.empty() || score.value() > best_score) {
      best_method = method;
      best_score = score.value();
      best_table = std::move(table).value();
    }
  }
  for (auto& [name, params] : best_table) params.method = "auto:" + params.method;
  if (request.report) {
    request.report->chosen = best_method;
    for (const auto& [method, score] : scores) request.report->scores[method] = score;
  }
  return best_table;
}

}  // namespace qflow
