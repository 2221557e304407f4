// Pipeline: a TOML file of stages resolved into a validated, ordered DAG of typed artifacts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

class ComponentRegistry;

// Where a value came from in a pipeline file; line 0 means "not from a file" (--set).
struct SourcePos {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  // "file:line:column: " or "" when there is no position.
  std::string prefix() const;
};

// Deployable: the files a target's lowering emits (TargetArtifact), each written under its own name.
enum class ArtifactType { Model, Dataset, Statistics, QParams, Report, Deployable };
std::string_view artifact_type_name(ArtifactType type);

// Host stages (import-onnx, load-data, quantize, report, ...) are built into the runner; the
// others are plugin components. A target component serves four stage kinds: its check
// section, its performance estimate, its lowering and the verification of the lowering's
// files (`use = "target-check:npu"`).
enum class StageKind {
  ImportOnnx, LoadData, Observer, Calibrator, Quantize, Pass, Passes, Report, Compare, Sensitivity,
  CompareCalibrators, PrecisionSearch, TargetCheck, TargetEstimate, TargetLower, TargetVerify
};
// Stages that transform a model with graph passes: one pass component, or a pass list.
inline bool is_pass_stage(StageKind kind) { return kind == StageKind::Pass || kind == StageKind::Passes; }
inline bool is_target_stage(StageKind kind) {
  return kind == StageKind::TargetCheck || kind == StageKind::TargetEstimate || kind == StageKind::TargetLower ||
         kind == StageKind::TargetVerify;
}
std::string_view stage_kind_name(StageKind kind);
inline bool is_host_stage(StageKind kind) {
  return kind == StageKind::ImportOnnx || kind == StageKind::LoadData || kind == StageKind::Quantize ||
         kind == StageKind::Passes || kind == StageKind::Report || kind == StageKind::Compare ||
         kind == StageKind::Sensitivity || kind == StageKind::CompareCalibrators ||
         kind == StageKind::PrecisionSearch;
}

// A [vars] entry: string, int, float or bool (OptionValue without the list alternative).
struct PipelineVar {
  OptionValue value;
  SourcePos pos;
};

struct StageInput {
  std::string stage;  // producing stage id
  std::string port;   // its output port
  SourcePos pos;
};

struct StageOption {
  OptionValue value;
  SourcePos pos;
  std::string var;  // the var the value is, when written as exactly "${var}" (for messages)
};

struct PipelineStage {
  std::string id;
  SourcePos pos;      // of the id value
  std::string use;    // as written, vars substituted
  SourcePos use_pos;
  std::map<std::string, StageInput> inputs;    // by input port
  std::map<std::string, StageOption> options;  // as written; after resolve: every declared option
  std::string output;                          // artifact file name; "" until resolved when not given
  SourcePos output_pos;
  double timeout = 0.0;  // seconds from the stage's `timeout` key, over --stage-timeout; 0: not set
  SourcePos timeout_pos;

  // Filled by resolve_pipeline.
  StageKind kind = StageKind::Pass;
  std::string component;  // component name (host stages: the stage name)
  ArtifactType output_type = ArtifactType::Model;
  std::vector<std::size_t> dependencies;  // indices of stages feeding this one, ascending
  // The artifact goes into the output folder: an `output` was given, or the kind makes what
  // users ask for (tables, reports, the import's original model). Intermediate models,
  // datasets and statistics are written only with --save-intermediate.
  bool writes_output = true;
  // Passes stages: the pass names of the expanded list, and the named pass pipelines it uses.
  std::vector<std::string> pass_names;
  std::vector<PassPipelineInfo> pass_pipelines;
};

// `target` and `target-options` of the [quantization] table: the target component whose own
// quantization rule (Target::quantization_rule) lies under the table's keys.
struct QuantizationTarget {
  std::string name;                  // "": none
  std::vector<std::string> options;  // the target's options as "key=value" strings
  SourcePos pos;                     // of `target`
  SourcePos options_pos;             // of `target-options`
};

// A stage the file holds but this run leaves out: its `when` does not match the vars.
struct SkippedStage {
  std::string id;
  SourcePos pos;
  std::string why;  // the condition that failed: "target = \"npu\" (it is \"cpu\")"
};

struct Pipeline {
  std::string path;  // the pipeline file as given
  std::map<std::string, PipelineVar> vars;
  std::vector<std::string> plugins;  // absolute paths
  std::vector<PipelineStage> stages;  // file order, without the skipped ones
  std::vector<SkippedStage> skipped;  // file order
  QuantConfig quantization;           // the [quantization] table (docs/quantization.md)
  QuantizationTarget quantization_target;
  std::vector<std::size_t> order;     // a topological order (after resolve)
};

// The components a pipeline may use, as declarations: a registry's, or a fixed list (tests).
class ComponentCatalog {
 public:
  explicit ComponentCatalog(std::vector<ComponentInfo> components, std::vector<PassPipelineInfo> pass_pipelines = {})
      : components_(std::move(components)), pass_pipelines_(std::move(pass_pipelines)) {}
  static ComponentCatalog from_registry(const ComponentRegistry& registry);

  const std::vector<ComponentInfo>& components() const { return components_; }
  std::vector<const ComponentInfo*> find_any(const std::string& name) const;
  const ComponentInfo* find(ComponentKind kind, const std::string& name) const;
  const std::vector<PassPipelineInfo>& pass_pipelines() const { return pass_pipelines_; }
  const PassPipelineInfo* find_pass_pipeline(const std::string& name) const;

 private:
  std::vector<ComponentInfo> components_;
  std::vector<PassPipelineInfo> pass_pipelines_;
};

// Parses the file text, applies `--set var=value` overrides from `sets` (entries without
// a '.' before the '='), and substitutes ${var} references. Stage overrides are left for
// resolve_pipeline, which knows the option types.
Expected<Pipeline> parse_pipeline(std::string_view text, const std::string& path, const std::vector<std::string>& sets = {});
// Reads and parses a file.
Expected<Pipeline> load_pipeline(const std::string& path, const std::vector<std::string>& sets = {});

// Resolves every `use`, checks and completes options (defaults, `--set stage.option=value`),
// checks inputs against ports and types, derives output names and orders the DAG.
Status resolve_pipeline(Pipeline& pipeline, const ComponentCatalog& catalog, const std::vector<std::string>& sets = {});

// Canonical TOML of a resolved pipeline: parse_pipeline + resolve_pipeline of this text
// gives the same text back.
std::string format_pipeline(const Pipeline& pipeline);

// The ports of a stage kind: inputs with their type and whether they are required.
// A port family takes any number of inputs named "<name>.<label>" (label an identifier);
// a required family needs at least one.
struct InputPort {
  std::string_view name;
  ArtifactType type;
  bool required;
  bool family = false;
};
std::vector<InputPort> stage_inputs(StageKind kind);
// The options a target stage takes besides its target's (target-lower: `name`).
std::vector<OptionSpec> target_stage_options(StageKind kind);
ArtifactType stage_output(StageKind kind);

// The canonical `use` spelling: "import-onnx", "pass:dead-code-elimination".
std::string canonical_use(const PipelineStage& stage);
// Text of a value as ${var} substitution and messages show it.
std::string option_value_text(const OptionValue& value);

}  // namespace qflow
