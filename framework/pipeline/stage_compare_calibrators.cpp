// compare-calibrators: the tables of several calibrator branches scored side by side on the
// same model and samples (docs/calibrators.md, "Comparing calibrators").
#include "framework/pipeline/stage_util.h"

#include "framework/pipeline/component_options.h"
#include "framework/plugin/component_registry.h"
#include "framework/quant/calibrator_comparison.h"

namespace qflow {

namespace {

constexpr std::string_view kFamily = "qparams.";

// The metric named by the stage's options, or null when none is.
Expected<std::shared_ptr<Metric>> stage_metric(const PipelineStage& stage, const ComponentRegistry& registry) {
  const std::string name = string_option(stage, "metric");
  if (name.empty()) return std::shared_ptr<Metric>();
  const ComponentInfo* info = registry.find(ComponentKind::Metric, name);
  if (!info) return not_found("unknown metric '" + name + "'");
  QFLOW_ASSIGN_OR_RETURN(Options options,
                         parse_component_options(*info, std::get<std::vector<std::string>>(stage.options.at("metric-options").value), "metric-options"));
  return registry.make_metric(name, options);
}

}  // namespace

Expected<StageResult> run_compare_calibrators(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                              const ComponentRegistry& registry, const StageContext& context) {
  const std::string head = "stage '" + stage.id + "'";
  QFLOW_ASSIGN_OR_RETURN(Model float_model, model_input(stage, *inputs.at("model")));
  std::vector<CalibratorBranch> branches;
  for (const auto& [port, artifact] : inputs) {
    if (!port.starts_with(kFamily)) continue;
    CalibratorBranch branch;
    branch.label = port.substr(kFamily.size());
    branch.table = artifact->qparams.get();
    branch.stage = stage.inputs.at(port).stage;
    // The producer's component and run time, as the run recorded them.
    if (context.finished)
      for (const FinishedStage& done : *context.finished)
        if (done.id == branch.stage) {
          branch.method = done.use.substr(done.use.find(':') + 1);
          branch.seconds = done.seconds;
        }
    if (branch.method.empty()) branch.method = branch.stage;
    branches.push_back(std::move(branch));
  }
  Expected<std::shared_ptr<Metric>> metric = stage_metric(stage, registry);
  if (!metric) return metric.status().with_context(head);
  QFLOW_ASSIGN_OR_RETURN(
      CalibratorComparison result,
      compare_calibrators(float_model, branches, context.quantization, std::get<bool>(stage.options.at("weights").value),
                          *inputs.at("dataset")->dataset, context.threads,
                          std::get<int64_t>(stage.options.at("limit").value), metric->get(),
                          string_option(stage, "metric")));
  StageResult out;
  out.artifact.type = ArtifactType::Report;
  QFLOW_ASSIGN_OR_RETURN(out.artifact.bytes, calibrator_comparison_json(result));
  out.printed = calibrator_comparison_text(result);
  const std::string base = stage.output.ends_with(".json") ? stage.output.substr(0, stage.output.size() - 5) : stage.output;
  out.side_files[base + ".txt"] = out.printed;
  return out;
}

}  // namespace qflow
