// Side-by-side calibrators: the models several calibration tables of one float model give,
// scored on the same samples by output cosine and optionally a metric
// (docs/calibrators.md, "Comparing calibrators").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/metric.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// One calibration table to score and where it came from.
struct CalibratorBranch {
  std::string label;   // the port label: qparams.<label>
  std::string stage;   // the calibrator stage that produced the table
  std::string method;  // that stage's component
  double seconds = 0.0;  // that stage's run time
  const QuantTable* table = nullptr;
};

struct CalibratorScore {
  std::string label;
  std::string stage;
  std::string method;
  double seconds = 0.0;
  double cosine = 0.0;  // mean over samples of cos(float outputs, quantized outputs)
  std::optional<double> metric;
};

struct CalibratorComparison {
  int64_t samples = 0;
  bool weights = true;      // PTQ models (weights too) or calibrated models (activations only)
  std::string metric;       // "" when no metric was given
  std::optional<double> float_metric;
  std::vector<CalibratorScore> rows;  // branch order
};

// For every branch builds the QDQ model of `float_model` with its table under `config` (may
// be null: all defaults) -- weights and activations quantized (the PTQ model, no bias
// correction) when `weights`, activations only (the calibrated model) otherwise -- and runs
// it and the float model on the first `limit` samples (all when limit <= 0), `threads`
// samples at once. The cosine per sample flattens all graph outputs in output order; its mean
// is taken in sample order, so results do not depend on the thread count. `metric` (may be
// null; its name in `metric_name`) scores the float model and every branch on the same
// outputs. The dataset feeds every model input (bind_inputs).
Expected<CalibratorComparison> compare_calibrators(const Model& float_model, const std::vector<CalibratorBranch>& branches,
                                                   const QuantConfig* config, bool weights, const Dataset& dataset,
                                                   int threads, int64_t limit, const Metric* metric,
                                                   const std::string& metric_name);

// calibrators_compare.txt: a fixed-width table, one row per branch.
std::string calibrator_comparison_text(const CalibratorComparison& result);
// calibrators_compare.json: the same figures.
Expected<std::string> calibrator_comparison_json(const CalibratorComparison& result);

}  // namespace qflow
