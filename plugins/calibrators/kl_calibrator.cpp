// KlCalibrator: option check and the per-tensor entropy threshold.
#include "kl_calibrator.h"

#include <algorithm>
#include <string>

#include "histogram_thresholds.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

ComponentInfo KlCalibrator::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "kl";
  info.summary = "Per-tensor threshold minimising the KL divergence of the quantized histogram (TensorRT entropy)";
  info.required_statistics = {std::string(kStatisticAbsHistogram)};
  info.options = {
      {"target-bins", OptionType::Int, int64_t{128}, "quantization levels the clipped histogram is merged into",
       {.min = 1.0}},
      {"flatten-zero-bin", OptionType::Bool, true,
       "replace bin 0 by bin 1 before the search, so a spike of exact zeros (ReLU outputs) does not pull the "
       "threshold down (as NVIDIA's pytorch-quantization does); false: the plain TensorRT search"},
      {"max-clipped", OptionType::Float, kKlMaxClippedPercent,
       "percent of the values a threshold may clip, in [0, 100]: candidates below the bulk of a distribution whose "
       "mass lies away from zero (sigmoid gates) look perfect to the divergence; 100: no floor",
       {.min = 0.0, .max = 100.0}},
  };
  return info;
}

Expected<std::unique_ptr<Calibrator>> KlCalibrator::create(const Options& options) {
  const int64_t target_bins = options.get_int("target-bins");
  if (target_bins < 1)
    return invalid_input("kl calibrator: option target-bins must be at least 1, got " + std::to_string(target_bins));
  const double max_clipped = options.get_float("max-clipped");
  if (!(max_clipped >= 0.0 && max_clipped <= 100.0))
    return invalid_input("kl calibrator: option max-clipped must be in [0, 100], got " + std::to_string(max_clipped));
  return std::unique_ptr<Calibrator>(
      std::make_unique<KlCalibrator>(target_bins, options.get_bool("flatten-zero-bin"), max_clipped));
}

int64_t kl_grid_bins(int64_t target_bins, const QuantSpec& spec) {
  const int b = grid_bits(spec.activation_dtype, spec.activation_bits);
  if (b == 0 || is_16bit_quant(spec.activation_dtype)) return target_bins;
  return std::max<int64_t>(1, target_bins >> (8 - b));
}

Expected<double> kl_tensor_threshold(const TensorStatistics& stats, int64_t target_bins, bool flatten_zero_bin,
                                     double max_clipped, const std::string& method, const std::string& what) {
  const auto bins = static_cast<int64_t>(stats.histogram.size());
  if (target_bins > bins)
    return invalid_input(method + " calibrator: tensor '" + what + "': target-bins " + std::to_string(target_bins) +
                         " exceeds the histogram's " + std::to_string(bins) + " bins");
  if (flatten_zero_bin && bins >= 2) {
    std::vector<double> counts = stats.histogram;
    counts[0] = counts[1];
    return kl_threshold(counts, stats.histogram_range, target_bins, bulk_edge(counts, max_clipped));
  }
  return kl_threshold(stats.histogram, stats.histogram_range, target_bins, bulk_edge(stats.histogram, max_clipped));
}

Expected<QuantTable> KlCalibrator::calibrate(const CalibrationRequest& request) {
  return calibrate_from_histograms(request, "kl",
                                   [this](const std::string& name, const TensorStatistics& stats, const QuantSpec& spec) {
                                     return kl_tensor_threshold(stats, kl_grid_bins(target_bins_, spec), flatten_zero_bin_,
                                                                max_clipped_, "kl", name);
                                   });
}

}  // namespace qflow
