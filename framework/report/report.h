// The run report: one self-contained HTML page (inline CSS and SVG, no scripts, no network)
// and the same sections as Markdown, rendered from a structured summary of a finished run
// (docs/report.md).
#pragma once

#include "framework/distributed/world.h"
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/quant/layer_compare.h"
#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/observer.h"

namespace qflow::report {

// One finished stage of the run, as the runner recorded it.
struct StageRow {
  std::string id;
  std::string kind;      // stage_kind_name: "pass", "target-check", ...
  std::string use;       // canonical use: "pass:constant-folding"
  std::string artifact;  // file name in the output folder; "" when the run kept it in memory
  int64_t bytes = 0;
  double seconds = 0.0;
};

// One node of the check stage's placement table.
struct PlacementNode {
  int64_t index = 0;
  std::string node;
  std::string op_type;
  std::string placement;  // as the target names it, upper case: "NPU" / "CPU"
  std::string subgraph;   // "" off the accelerated path
  std::string reason;     // why a node is off the accelerated path
};

// The check section of a target (docs/targets.md): model and platform header, the per-node
// table, the subgraph and summary lines.
struct Placement {
  std::string accelerator = "ACCELERATOR";  // the placement of the accelerated path: "NPU"
  std::string fallback = "CPU";             // the placement of the other nodes
  std::vector<std::pair<std::string, std::string>> header;  // "model" -> "torch_jit"
  std::vector<PlacementNode> nodes;
  std::vector<std::string> subgraphs;  // "0: 33 nodes [0-32]" and its in/out lines
  std::vector<std::pair<std::string, std::string>> summary;  // "nodes" -> "33 (NPU 33, CPU 0)"
};

// The estimate section of a target: per-subgraph lines and the totals, plus the slowest nodes.
struct PerfNode {
  std::string node;
  std::string op_type;
  std::string subgraph;
  double cycles = 0.0;
  std::string bound;  // "memory" / "compute"
};
struct Perf {
  std::string accelerator = "ACCELERATOR";  // as in Placement
  std::vector<std::pair<std::string, std::string>> header;
  std::vector<std::string> subgraphs;
  std::vector<std::pair<std::string, std::string>> totals;  // "NPU" -> "MACs ..., 4.094 us"
  std::vector<PerfNode> slowest;                           // most cycles first, at most 10
};

// The target-verify stage's result: each deployable file (by role) against the PTQ model, and
// the files after the first against the first.
struct VerifyFile {
  double cosine_mean = 0.0, cosine_min = 0.0, max_abs_error = 0.0;
};
struct VerifyOutput {
  std::string name;
  int64_t elements = 0;
  std::vector<VerifyFile> files;  // in the order of Verify::roles
  int64_t exact_matches = 0, compared = 0;
};
struct Verify {
  int64_t samples = 0;
  bool bit_identical = false;
  std::vector<std::string> roles;
  std::vector<VerifyOutput> outputs;
};

// The sensitivity stage's ranking (sensitivity.json), most sensitive first.
struct SensitivityEntry {
  std::string node, op_type;
  std::optional<double> weight_cosine, activation_cosine;  // absent: the node has none
};
struct Sensitivity {
  int64_t samples = 0;
  std::vector<SensitivityEntry> ranking;
  // Not ranked: the whole PTQ model's output cosine already reached `when_below`.
  bool measured = true;
  std::optional<double> ptq_cosine;
  double when_below = 0.0;
};

// The precision search's decisions (precision.json), in the order they were made.
struct PrecisionDecision {
  std::string node, op_type;
  std::vector<std::string> tensors;
  std::string from, to;  // "int8" -> "int16" or "cpu"
  bool activation = false, weight = false;
  std::string refusal;   // to = cpu: why int16 was not taken
  double sensitivity = 1.0;
  double value_after = 0.0;
};
struct Precision {
  std::string target_kind;  // "cosine" or a metric name
  std::vector<std::string> classifier_outputs;  // compared through their logits
  double threshold = 0.0, before = 0.0, after = 0.0;
  int64_t samples = 0, quantized_tensors = 0, raised_tensors = 0;
  std::vector<PrecisionDecision> decisions;
  std::string overrides_toml;
};

// A threshold drawn on a histogram: "kl (chosen)" at 6.1.
struct Threshold {
  std::string label;
  double value = 0.0;
  bool chosen = false;
};

// The observer's histogram of |x| for one tensor: equal bins over [0, range].
struct Histogram {
  std::string tensor;
  double range = 0.0;
  std::vector<double> counts;
  double min = 0.0, max = 0.0;
  std::optional<double> cosine;  // the tensor's accumulated cosine from the layer comparison
  std::vector<Threshold> thresholds;
};

struct ReportInput {
  std::string title;
  std::vector<StageRow> stages;
  std::optional<Placement> placement;
  std::optional<LayerComparison> comparison;
  std::string comparison_note;  // why there is no comparison, when there is none
  std::vector<Histogram> histograms;
  int64_t histograms_omitted = 0;  // tensors with a histogram not drawn (the cap)
  std::optional<Verify> verify;
  std::optional<Sensitivity> sensitivity;
  std::optional<Precision> precision;
  std::optional<Perf> perf;
};

// What a report is built from; every part is optional.
struct ReportSources {
  std::string title;
  std::vector<StageRow> stages;
  const Model* float_model = nullptr;  // with ptq_model and dataset: the layer comparison
  const Model* ptq_model = nullptr;
  const Dataset* dataset = nullptr;
  int64_t samples = 16;  // compared samples (the first N); <= 0: all
  std::string progress_label = "report";  // of the comparison's progress line on a terminal
  int threads = 1;
  // Not owned; may be null: in a distributed world the ranks split the layer comparison's
  // samples (compare_layers).
  const World* world = nullptr;
  const std::map<std::string, TensorStatistics>* statistics = nullptr;  // histograms
  const QuantTable* qparams = nullptr;                                  // the chosen thresholds
  std::optional<std::string> check;   // the target's check section (JSON)
  std::optional<std::string> perf;    // the target's estimate section (JSON)
  std::optional<std::string> verify;  // verify_result.json (target-verify)
  std::optional<std::string> sensitivity;  // sensitivity.json
  std::optional<std::string> precision;    // precision.json
  std::size_t max_histograms = 24;
};
// Parses the reports and runs the layer comparison. A comparison the models do not allow
// (e.g. several inputs) becomes a note in the report, not an error.
Expected<ReportInput> build_report(const ReportSources& sources);

// Parsers of the artifacts the report reads, all JSON.
Expected<Placement> parse_check(std::string_view text);
Expected<Perf> parse_perf(std::string_view text);
Expected<Verify> parse_verify(std::string_view json);
Expected<Sensitivity> parse_sensitivity(std::string_view json);
Expected<Precision> parse_precision(std::string_view json);

// The percentile of a histogram of |x| (linear inside the bin), for threshold lines.
double histogram_percentile(const std::vector<double>& counts, double range, double percentile);

// The pages. Equal inputs give byte-identical output.
std::string render_html(const ReportInput& input);
std::string render_markdown(const ReportInput& input);

// Escapes & < > " ' for HTML text and attribute values.
std::string html_escape(std::string_view text);

}  // namespace qflow::report
