// build_report: the report's structured input from a run's artifacts.
#include <algorithm>
#include <cmath>
#include <set>

#include "framework/distributed/share_units.h"
#include "framework/report/report.h"

namespace qflow::report {

namespace {

Histogram histogram_of(const std::string& tensor, const TensorStatistics& stats, const QuantTable* qparams,
                       std::optional<double> cosine) {
  Histogram h;
  h.tensor = tensor;
  h.range = stats.histogram_range;
  h.counts = stats.histogram;
  h.min = stats.count > 0 ? stats.min : 0.0;
  h.max = stats.count > 0 ? stats.max : 0.0;
  h.cosine = cosine;
  if (qparams) {
    if (auto it = qparams->find(tensor); it != qparams->end() && it->second.threshold > 0.0)
      h.thresholds.push_back({(it->second.method.empty() ? std::string("threshold") : it->second.method) + " (chosen)",
                              it->second.threshold, true});
  }
  h.thresholds.push_back({"p99.99", histogram_percentile(h.counts, h.range, 99.99), false});
  h.thresholds.push_back({"max |x|", std::max(std::fabs(h.min), std::fabs(h.max)), false});
  return h;
}

}  // namespace

Expected<ReportInput> build_report(const ReportSources& sources) {
  ReportInput input;
  input.title = sources.title;
  input.stages = sources.stages;
  if (sources.check) {
    Expected<Placement> placement = parse_check(*sources.check);
    if (!placement) return placement.status().with_context("the check report");
    input.placement = std::move(*placement);
  }
  if (sources.perf) {
    Expected<Perf> perf = parse_perf(*sources.perf);
    if (!perf) return perf.status().with_context("the performance report");
    input.perf = std::move(*perf);
  }
  if (sources.sensitivity) {
    Expected<Sensitivity> sensitivity = parse_sensitivity(*sources.sensitivity);
    if (!sensitivity) return sensitivity.status().with_context("the sensitivity result");
    input.sensitivity = std::move(*sensitivity);
  }
  if (sources.precision) {
    Expected<Precision> precision = parse_precision(*sources.precision);
    if (!precision) return precision.status().with_context("the precision search result");
    input.precision = std::move(*precision);
  }
  if (sources.verify) {
    Expected<Verify> verify = parse_verify(*sources.verify);
    if (!verify) return verify.status().with_context("the verify result");
    input.verify = std::move(*verify);
  }
  if (sources.float_model && sources.ptq_model && sources.dataset) {
    const int64_t count = sources.dataset->count;
    const ShardRange mine = my_slice(sources.world, sources.samples > 0 ? std::min(sources.samples, count) : count);
    ProgressBar progress(sources.progress_label + ": layer comparison", mine.end - mine.begin);
    Expected<LayerComparison> comparison = compare_layers(*sources.float_model, *sources.ptq_model, *sources.dataset,
                                                          sources.threads, sources.samples, &progress, sources.world);
    progress.finish();
    if (comparison)
      input.comparison = std::move(*comparison);
    else
      input.comparison_note = "No layer comparison: " + comparison.status().message();
  } else {
    input.comparison_note = "No layer comparison (it needs the inputs 'model', 'ptq' and 'dataset').";
  }
  if (sources.statistics) {
    const auto& statistics = *sources.statistics;
    std::set<std::string> drawn;
    auto add = [&](const std::string& tensor, std::optional<double> cosine) {
      if (input.histograms.size() >= sources.max_histograms || drawn.count(tensor)) return;
      auto it = statistics.find(tensor);
      if (it == statistics.end() || it->second.histogram.empty()) return;
      drawn.insert(tensor);
      input.histograms.push_back(histogram_of(tensor, it->second, sources.qparams, cosine));
    };
    if (input.comparison)
      for (const LayerRow& row : input.comparison->rows) add(row.tensor, row.accumulated.cosine);
    for (const auto& [tensor, stats] : statistics) add(tensor, std::nullopt);
    int64_t with_histogram = 0;
    for (const auto& [tensor, stats] : statistics) with_histogram += stats.histogram.empty() ? 0 : 1;
    input.histograms_omitted = with_histogram - static_cast<int64_t>(input.histograms.size());
  }
  return input;
}

}  // namespace qflow::report
