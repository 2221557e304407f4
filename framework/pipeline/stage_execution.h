// Stage execution: what each stage kind computes from its input artifacts, and their file forms.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/distributed/world.h"
#include "framework/quant/output_cosine.h"
#include "framework/quant/precision_search.h"
#include "framework/pipeline/pass_manager.h"
#include "framework/pipeline/pipeline.h"
#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/observer.h"
#include "qflow/plugin/quant_config.h"
#include "qflow/plugin/target.h"

namespace qflow {

class ComponentRegistry;

// An artifact as later stages consume it; `bytes` is exactly the file written to disk.
// Models travel as ONNX bytes so a pass mutates its own copy and sees what the file holds.
struct Artifact {
  ArtifactType type = ArtifactType::Model;
  std::string bytes;
  std::shared_ptr<const Dataset> dataset;
  std::shared_ptr<const std::map<std::string, TensorStatistics>> statistics;
  std::shared_ptr<const QuantTable> qparams;
  // Deployable artifacts: the target's files by role (`bytes` is then the JSON list of them).
  std::shared_ptr<const std::vector<TargetArtifact>> deployables;
  // Observer stages: the observed model's outputs on every sample, from the runs the
  // observers watched, so that a later stage on the same model and samples need not run
  // them again; null when not kept.
  std::shared_ptr<const FloatOutputs> outputs;
};

struct StageResult {
  Artifact artifact;
  // Pass and passes stages: per pass its effects, the graph size around it and its own run
  // time (Pass::run's, without import and export of the model bytes).
  std::vector<PassRecord> passes;
  std::string graph_text;  // the graphs StageContext::print_after asked for
  // Calibrator stages: what the calibrator reported (choice, scores), for the manifest.
  std::optional<CalibrationReport> calibration;
  // Things the user should know that did not stop the stage (NaN samples, skipped
  // tensors); printed on stderr and listed in the manifest.
  std::vector<std::string> warnings;
  // Files written next to the artifact (name -> bytes), e.g. the text form of a report
  // artifact; listed in the manifest with the stage.
  std::map<std::string, std::string> side_files;
  // Target-lower stages: the role of each file it wrote (file name -> role), for the manifest.
  std::map<std::string, std::string> side_file_roles;
  // Text the run prints after the stage's summary line (a comparison table).
  std::string printed;
  // Precision-search stages: the decisions, for the manifest.
  std::optional<PrecisionSearchResult> precision;
};

// A stage the run has completed, as the manifest records it (the report stage's run summary).
struct FinishedStage {
  std::string id;
  StageKind kind = StageKind::Pass;
  std::string use;     // canonical_use
  std::string output;  // artifact file name in the output folder
  int64_t bytes = 0;
  double seconds = 0.0;
};

// What a stage sees of the run besides its inputs.
struct StageContext {
  // Graph::validate() and libonnx's checker after every pass; a failure fails the stage.
  bool verify = false;
  // Pass names and stage ids (--print-after) whose resulting graph goes to StageResult::graph_text.
  std::vector<std::string> print_after;
  // Passes stages also keep the model after each pass as side files (--save-intermediate).
  bool save_intermediate = false;
  // Threads a stage may use for its own work (observer and evaluation sweeps over samples).
  // Artifacts never depend on it.
  int threads = 1;
  // The ranks of a distributed run (observer stages split their shards over them); null:
  // this process alone.
  const World* world = nullptr;
  // The pipeline's [quantization] table; null means all defaults.
  const QuantConfig* quantization = nullptr;
  // Observer stages: a calibrator stage that can score tables on the samples (it has the
  // inputs `model` and `dataset`) reads the statistics, so the observed runs' model outputs
  // are kept for it (Artifact::outputs).
  bool keep_outputs = false;
  // Report and compare-calibrators stages only: the stages completed before this one
  // started, in file order (with one worker, every earlier stage of the file; always every
  // stage it depends on); null outside a run.
  const std::vector<FinishedStage>* finished = nullptr;
  // Long stages (sensitivity, precision search) say how far they got; empty outside a run.
  ProgressLine progress;
};

// Runs one resolved stage; `inputs` maps each given input port to its artifact.
Expected<StageResult> execute_stage(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                    const ComponentRegistry& registry, const StageContext& context = {});

// Makes every target stage's target once, and the [quantization] table's target, so that
// what it checks when it is made (a platform file found and valid) fails before the first
// stage runs, not hours later.
Status check_targets(const Pipeline& pipeline, const ComponentRegistry& registry);

// The settings every stage quantizes with: the [quantization] table laid over the
// quantization rule of its `target` (docs/quantization.md), level by level; the table alone
// when it names no target.
Expected<QuantConfig> pipeline_quantization(const Pipeline& pipeline, const ComponentRegistry& registry);
// "reduce-range = true" for the rule's keys the table leaves to it, one "key = value" per
// setting ([quantization.op-type.X] and node tables prefixed with their names); empty when
// the table sets them all.
std::vector<std::string> quantization_rule_lines(const QuantConfig& rule, const QuantConfig& table);

}  // namespace qflow
