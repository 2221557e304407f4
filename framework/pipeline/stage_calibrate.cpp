// calibrator stages: statistics (and the model) in, the calibration table out. The host side
// of calibration: per-tensor quantization settings, filtering of tensors left float, and the
// services meta-calibrators use (other calibrators, output cosine of a calibrated model).
#include "framework/data/progress_bar.h"
#include "framework/pipeline/stage_util.h"

#include "framework/plugin/component_registry.h"
#include "framework/quant/calibration_services.h"
#include "framework/quant/qdq_builder.h"

namespace qflow {

namespace {

std::string qparams_json(const QuantTable& table, const std::map<std::string, TensorStatistics>* statistics) {
  JsonWriter json;
  json.begin_object();
  json.key("tensors").begin_object();
  for (const auto& [name, q] : table) {
    const TensorStatistics* stats = nullptr;
    if (statistics)
      if (auto it = statistics->find(name); it != statistics->end()) stats = &it->second;
    json.key(name).begin_object();
    json.field("axis", q.axis);
    // Only a narrowed grid: tables of full-range entries stay as they were.
    if (q.bits != 0) json.field("bits", static_cast<int64_t>(q.bits));
    json.field("dtype", dtype_name(q.dtype));
    if (stats) json.field("max", stats->max);
    json.field("method", q.method);
    if (stats) json.field("min", stats->min);
    json.key("scale");
    write_numbers(json, q.scale);
    json.field("threshold", q.threshold);
    json.key("zero_point");
    write_numbers(json, q.zero_point);
    json.end_object();
  }
  json.end_object();
  json.end_object();
  auto text = json.finish();
  return text ? *text : std::string();
}

}  // namespace

Expected<StageResult> run_calibrator(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                     const ComponentRegistry& registry, const StageContext& context) {
  const std::string head = "stage '" + stage.id + "'";
  std::optional<Model> model;
  const Artifact* model_artifact = nullptr;
  if (auto it = inputs.find("model"); it != inputs.end()) {
    model_artifact = it->second;
    QFLOW_ASSIGN_OR_RETURN(Model imported, model_input(stage, *it->second));
    model = std::move(imported);
  }
  const Dataset* dataset = nullptr;
  if (auto it = inputs.find("dataset"); it != inputs.end()) dataset = it->second->dataset.get();
  const std::map<std::string, TensorStatistics>* all_statistics = nullptr;
  std::shared_ptr<const FloatOutputs> observed_outputs;  // the observer stage's runs of its model
  if (auto it = inputs.find("statistics"); it != inputs.end()) {
    all_statistics = it->second->statistics.get();
    observed_outputs = it->second->outputs;
  }

  // Settings per tensor; tensors left float are not handed to the calibrator.
  std::map<std::string, TensorStatistics> statistics;
  std::map<std::string, QuantSpec> specs;
  if (all_statistics) {
    specs = tensor_specs(model ? &*model : nullptr, *all_statistics, context.quantization);
    for (const auto& [name, stats] : *all_statistics)
      if (specs.at(name).quantize) statistics.emplace(name, stats);
      else specs.erase(name);
  }

  std::unique_ptr<HostCalibrationServices> services;
  // What `auto` (or any calibrator scoring tables) runs: a phase per table on a terminal.
  ProgressBar progress("stage '" + stage.id + "'", 0);
  if (dataset && model_artifact) {
    // Calibrators that never ask for the cosine must not fail on a model it cannot evaluate.
    Expected<std::unique_ptr<OutputCosine>> cosine = OutputCosine::create(
        model_artifact->bytes, *dataset, context.quantization, context.threads, std::move(observed_outputs), context.world);
    if (cosine) (*cosine)->set_progress(&progress);
    services = std::make_unique<HostCalibrationServices>(registry, std::move(cosine));
  }

  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Calibrator> calibrator, registry.make_calibrator(stage.component, options_of(stage)));
  CalibrationReport report;
  CalibrationRequest request;
  request.statistics = all_statistics ? &statistics : nullptr;
  request.model = model ? &*model : nullptr;
  request.specs = all_statistics ? &specs : nullptr;
  request.services = services.get();
  request.report = &report;
  request.threads = context.threads;
  auto calibrated = calibrator->calibrate(request);
  if (!calibrated) return calibrated.status().with_context(head);
  QuantTable table = std::move(*calibrated);

  for (const auto& [name, params] : table) {
    if (all_statistics && !statistics.count(name))
      return invalid_input(head + ": calibrator '" + stage.component + "' returned tensor '" + name + "', which " +
                           (all_statistics->count(name) ? "is configured to stay float (quantize = false)"
                                                        : "has no statistics"));
    if (model && !model->graph->find_value(name))
      return invalid_input(head + ": calibrator '" + stage.component + "' returned tensor '" + name +
                           "', which is not in the model");
  }

  StageResult result;
  result.artifact.type = ArtifactType::QParams;
  result.artifact.bytes = qparams_json(table, all_statistics);
  result.artifact.qparams = std::make_shared<const QuantTable>(std::move(table));
  if (!report.chosen.empty() || !report.scores.empty() || !report.counts.empty()) result.calibration = std::move(report);
  return result;
}

}  // namespace qflow
