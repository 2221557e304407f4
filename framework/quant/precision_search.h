// Automatic precision search: the fewest per-node changes (int16, or float on the CPU) that
// bring a PTQ model to a target output cosine or user metric (docs/accuracy-debugging.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qflow/core/json_writer.h"
#include "framework/core/progress_line.h"
#include "framework/data/progress_bar.h"
#include "framework/data/dataset.h"
#include "framework/quant/sensitivity.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/metric.h"
#include "qflow/plugin/observer.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// Where a backend places the nodes of a PTQ model: node name -> "" on the accelerator, else
// the reason it is not (names of the model's float view: the PTQ model without Q/DQ nodes).
using PlacementOracle = std::function<Expected<std::map<std::string, std::string>>(const Model& ptq)>;

struct PrecisionSearchOptions {
  // Target: output cosine >= target_cosine, or, with a metric, metric(PTQ) >= metric(float) - max_drop.
  double target_cosine = 0.999;
  const Metric* metric = nullptr;  // not owned; null: output cosine
  std::string metric_name;         // for messages and the artifact
  double max_drop = 0.0;
  int threads = 1;
  int64_t limit = 0;        // first N samples; <= 0: all
  int64_t max_changes = 0;  // <= 0: no limit
  // Models built and run, the plain PTQ model included; <= 0: no limit. The search stops
  // growing, bisecting, pruning or measuring values_after when it is spent.
  int64_t max_evaluations = 0;
  // Once the target holds: drop every kept change it does not need (one PTQ model per kept
  // change; with more than 16, per block of consecutive changes, 16 models at most), then
  // measure value_after where the growth did not (up to one more each, for up to 16 changes).
  // false: the shortest prefix of the ranking that holds the target is the result, values
  // after changes inside a measured batch stay unmeasured.
  bool prune = true;
  // A missed target is an error; otherwise the best configuration measured is the result
  // (reached = false, `miss` says what happened).
  bool error_on_miss = false;
  // Empty: int16 is allowed on every node. Otherwise a node is raised to int16 only when no
  // node the oracle places on the accelerator before the change leaves it afterwards.
  PlacementOracle oracle;
  // The ranking to follow (a `sensitivity` stage's result); null: computed here.
  const SensitivityResult* sensitivity = nullptr;
  // The observer's statistics (not owned; may be null): with them an activation raised to
  // 16 bits takes its observed range (table_for_config).
  const std::map<std::string, TensorStatistics>* statistics = nullptr;
  // Hears one line per model measured (and the ranking's progress when the search ranks).
  ProgressLine progress;
  // Not owned; null: none. Counts the models measured (phase "search", up to
  // max_evaluations when that is set), and the ranking's node-samples when the search ranks.
  ProgressBar* bar = nullptr;
  // Not owned; null or a world of one: this process runs every sample. In a distributed world
  // with a cosine target each rank runs a slice of the samples of every model measured, and
  // every rank ends with the same result (every rank must call with the same arguments).
  const World* world = nullptr;
};

struct PrecisionChange {
  std::string node;
  std::string op_type;
  std::vector<std::string> tensors;  // the activations and weight whose type changes
  // Nodes whose output activations go to int16 with this node's: the other producers of a
  // Concat group its output is in (a group shares one type), in name order.
  std::vector<std::string> with;
  std::string from;                  // "int8" (the type before)
  std::string to;                    // "int16" or "cpu" (float: quantize = false)
  bool activation = false;           // activation-dtype raised (to = int16; to = cpu: kept from an earlier raise)
  bool weight = false;               // weight-dtype raised (to = int16)
  std::string refusal;               // to = cpu: why int16 was not taken ("" with no oracle)
  double sensitivity = 1.0;          // the node's worst single-node output cosine
  // The target value with this and every earlier kept change; NaN when the evaluation
  // budget ran out before it was measured.
  double value_after = 0.0;
};

struct PrecisionSearchResult {
  std::string target_kind;   // "cosine" or the metric name
  // With the cosine: the outputs compared through their logits (classifier_outputs.h).
  std::vector<std::string> classifier_outputs;
  double threshold = 0.0;    // the value the target asks for
  double float_value = 1.0;  // the metric of the float model (1 for cosine)
  double before = 0.0;       // the target value of the plain PTQ model
  double after = 0.0;        // with the kept changes
  int64_t samples = 0;
  int64_t evaluations = 0;        // PTQ models built and run
  int64_t quantized_tensors = 0;  // activations and weights the plain PTQ model quantizes
  int64_t raised_tensors = 0;     // of those, the ones a kept change touches
  bool reached = true;  // the target holds with `changes`
  // Raised activations took their observed range from statistics: the PTQ model is built
  // with the same statistics (precision.json "ranges": "observed", else "threshold").
  bool observed_ranges = false;
  // The raises came from lowering the all-int16 model (precision.json "walk": "lower"),
  // not from raising along the ranking ("raise").
  bool lowered = false;
  std::string miss;     // when not reached: why, and what was kept instead
  std::vector<PrecisionChange> changes;  // kept, in the order they were made
  QuantConfig overrides;                 // node entries only: what the changes set
};

// Searches as docs/accuracy-debugging.md describes: nodes ranked by sensitivity (most
// sensitive first) are raised to int16, then moved to float on the CPU, in growing batches
// until the target holds; the batch that reaches it is bisected, then every kept change is
// dropped again in reverse order when the target holds without it. When the candidates,
// `max_changes` or `max_evaluations` run out first, the result is the best configuration
// measured (reached = false), or with `error_on_miss` an error naming the value reached.
// A model the walk measures for a decision stops running samples once they prove its mean
// cosine below the target (one process, cosine objective, no max_evaluations); the result is
// that of whole evaluations. `config` may be null.
Expected<PrecisionSearchResult> search_precision(const Model& float_model, const QuantTable& table,
                                                 const QuantConfig* config, const Dataset& dataset,
                                                 const PrecisionSearchOptions& options);

// `base` with the node entries of `overrides` applied over its own (field by field).
QuantConfig merge_quant_config(const QuantConfig& base, const QuantConfig& overrides);

// `table` for `config`: an activation entry whose producer's spec asks for another dtype
// than the entry has is recomputed for that dtype. Raised to 16 bits with `statistics` given,
// it takes the tensor's observed range, as every histogram calibrator does at 16 bits
// (docs/calibrators.md): the clipping an 8-bit threshold trades for resolution is the larger
// error at 16 bits. An asymmetric spec of the same width and other signedness keeps the
// scale and moves the zero point (uint8 z -> int8 z - 128: the same values). Otherwise it
// keeps its threshold (symmetric) or the range it represents (asymmetric). Other entries
// are kept.
Expected<QuantTable> table_for_config(const Graph& graph, const QuantTable& table, const QuantConfig* config,
                                      const std::map<std::string, TensorStatistics>* statistics = nullptr);

// The overrides as `[quantization.node."<name>"]` tables to paste into a pipeline ("" when none).
std::string precision_overrides_toml(const PrecisionSearchResult& result);
// precision_overrides.toml: a comment saying what the search reached, then the fragment
// (or a comment that no change was needed).
std::string precision_overrides_file(const PrecisionSearchResult& result);
// The search as JSON members of the object `json` is in: target, values, counts, changes,
// overrides (precision.json and the stage's manifest entry share it).
void write_precision_fields(JsonWriter& json, const PrecisionSearchResult& result);
// precision.json: write_precision_fields and the TOML fragment.
Expected<std::string> precision_json(const PrecisionSearchResult& result);
// What the quantize stage takes from a precision.json: the overrides it merges over
// [quantization], and whether raised activations take their observed ranges (the PTQ model
// then needs the search's statistics; a file without "ranges" kept thresholds).
struct PrecisionReplay {
  QuantConfig overrides;
  bool observed_ranges = false;
};
Expected<PrecisionReplay> precision_replay_from_json(const std::string& text, const std::string& source);

}  // namespace qflow
