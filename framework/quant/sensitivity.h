// Quantization sensitivity per node: the model-output cosine against the float model when only
// that node's weights, or only its output activations, are quantized
// (docs/accuracy-debugging.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/core/progress_line.h"
#include "framework/data/progress_bar.h"
#include "framework/distributed/world.h"
#include "framework/data/dataset.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

struct SensitivityRow {
  std::string node;
  std::string op_type;
  bool has_weight = false;       // the node has a weight the PTQ model quantizes
  double weight_cosine = 1.0;    // only its weight quantized
  bool has_activation = false;   // the node has an output activation in the table
  double activation_cosine = 1.0;  // only its output activations quantized
  // The lower of the two cosines it has: what the ranking sorts by.
  double worst() const;
};

struct SensitivityResult {
  int64_t samples = 0;  // the samples the rows were measured on
  // How the rows were measured: "output" (the model's output cosine with only that node
  // quantized) or "local" (the node's own outputs: see local_sensitivity.h); "" when not ranked.
  std::string method;
  // The multiply-accumulates the output ranking costs (or would have cost), in GMAC.
  double output_gmacs = 0.0;
  // With a `when_below` bound: the whole PTQ model's output cosine, and whether the nodes were
  // ranked (false: that cosine reached the bound, so no search needs a ranking; rows empty).
  bool measured = true;
  double when_below = 0.0;
  std::optional<double> ptq_cosine;
  std::vector<SensitivityRow> rows;  // worst first: lowest worst(), then node name
  std::vector<std::string> skipped;  // quantized nodes without a unique name (not testable)
};

// The output ranking's cost above which method "auto" ranks locally: about 20 minutes of
// two cores of the interpreter.
constexpr double kAutoOutputBudgetGmacs = 50000.0;

// The fewest samples an output ranking bounded by `ranking_gmacs` measures. The ranking
// orders nodes; it needs fewer samples than a precision search's acceptance test. On
// PP-OCRv4 rec and det (16-sample search) a ranking of 4 samples gave the held-out accuracy
// of a 16-sample one within a line or page (docs/accuracy-debugging.md).
constexpr int64_t kMinRankingSamples = 4;

struct SensitivityOptions {
  int threads = 1;     // samples (or nodes) measured at once; results do not depend on it
  int64_t limit = 0;   // the first N samples; <= 0: all
  // > 0: measure the whole PTQ model first and rank only when its output cosine is below.
  double when_below = 0.0;
  // "output", "local", or "auto": output unless that costs more than kAutoOutputBudgetGmacs.
  std::string method = "auto";
  // > 0: the output ranking measures only as many of the samples as its estimated cost
  // allows, floor(ranking_gmacs / GMAC per sample), but at least kMinRankingSamples (and at
  // most all); the `when_below` measurement and the local ranking use every sample.
  // 0: every sample.
  double ranking_gmacs = 0.0;
  ProgressLine progress;  // how many nodes are ranked, about once a minute
  // Not owned; null: none. The output ranking restarts it as phase "ranking" and advances it
  // per node and sample measured (a terminal's progress line with an ETA).
  ProgressBar* bar = nullptr;
  // Not owned; null or a world of one: this process measures every node. In a distributed
  // world each rank measures a share of the output ranking's nodes and all ranks end with the
  // same result (every rank must call with the same arguments).
  const World* world = nullptr;
};

// For every node the QDQ model built from `float_model`, `table` and `config` (may be null:
// all defaults) quantizes, measures its weight alone and its output activations alone
// quantized, over the first `limit` samples of `dataset`, as the mean over samples of a
// cosine. The table is scale-aligned over the whole model first, so each node gets the
// parameters it has in the full PTQ model. The dataset feeds every model input (bind_inputs).
// Method "output": two models with build_qdq_model in which only that node is quantized,
// cosine between all float outputs and all outputs of that model (flattened in output
// order). The float model runs once per sample and its tensors are kept (in chunks of
// samples of at most 1 GiB) so that each single-node model runs only from the quantized node
// on. Method "local": the node's own outputs (local_sensitivity.h), one float run per sample.
// With `when_below` > 0 the whole PTQ model (weights and activations) is measured first, and
// the nodes are ranked only when its output cosine is below `when_below`: a model whose PTQ
// form already reaches a precision search's target skips the ranking.
Expected<SensitivityResult> analyze_sensitivity(const Model& float_model, const QuantTable& table,
                                                const QuantConfig* config, const Dataset& dataset,
                                                const SensitivityOptions& options);

// sensitivity.txt: a fixed-width table, worst first; `top` > 0 keeps the first `top` rows.
std::string sensitivity_text(const SensitivityResult& result, int64_t top = 0);
// sensitivity.json: the same rows (all of them unless `top` > 0); a cosine the node does not
// have is null.
Expected<std::string> sensitivity_json(const SensitivityResult& result, int64_t top = 0);

}  // namespace qflow
