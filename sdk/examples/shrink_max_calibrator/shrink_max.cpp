// Example out-of-tree calibrator "shrink-max": clips at a fixed fraction of the observed |x| range.
//
// It exists to show the plugin API end to end (component metadata, a typed option with
// limits the host checks, registration through QFLOW_PLUGIN); it is not a recommended
// calibration method. It needs only the min/max a range observer records.
#include <memory>
#include <string>

#include "qflow/plugin/entry.h"
#include "qflow/quant/quant_math.h"

namespace {

constexpr const char* kMethod = "shrink-max";

class ShrinkMaxCalibrator final : public qflow::Calibrator {
 public:
  explicit ShrinkMaxCalibrator(double ratio) : ratio_(ratio) {}

  qflow::Expected<qflow::QuantTable> calibrate(const qflow::CalibrationRequest& request) override {
    if (request.statistics == nullptr) return qflow::internal_error("shrink-max: calibration request without statistics");
    qflow::QuantTable table;
    for (const auto& [name, stats] : *request.statistics) {
      // A tensor that never held a finite value has no range to shrink; leave it to others.
      if (stats.count == 0) continue;
      const double threshold = ratio_ * qflow::observed_magnitude(stats);
      // quant_math.h turns a threshold into parameters under the tensor's settings
      // (dtype, symmetric or not, power-of-two scales) from the pipeline's [quantization].
      QFLOW_ASSIGN_OR_RETURN(qflow::QuantParams params,
                             qflow::activation_params(request.spec_for(name), stats, threshold, kMethod, name));
      table.emplace(name, std::move(params));
    }
    return table;
  }

 private:
  double ratio_;
};

qflow::Status register_components(qflow::ComponentRegistrar& registrar) {
  qflow::ComponentInfo info;
  info.kind = qflow::ComponentKind::Calibrator;
  info.name = kMethod;
  info.summary = "example: symmetric threshold at ratio * max(|min|, |max|)";
  // The host refuses a ratio outside (0, 1] when it validates the pipeline, before any stage runs.
  info.options.push_back({"ratio", qflow::OptionType::Float, 0.95, "fraction of the observed max |x| to clip at, in (0, 1]",
                          {.min = 0.0, .max = 1.0, .min_exclusive = true}});
  return registrar.add_calibrator(std::move(info), [](const qflow::Options& options) -> qflow::Expected<std::unique_ptr<qflow::Calibrator>> {
    return std::unique_ptr<qflow::Calibrator>(std::make_unique<ShrinkMaxCalibrator>(options.get_float("ratio")));
  });
}

}  // namespace

QFLOW_PLUGIN("qflow-example-calibrator", "1.0.0", register_components)
