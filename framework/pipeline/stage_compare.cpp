// compare and sensitivity: the per-layer error and the per-node sensitivity of a quantized
// model against its float model on the samples (docs/accuracy-debugging.md).
#include "framework/pipeline/stage_util.h"

#include <algorithm>

#include "framework/data/progress_bar.h"
#include "framework/distributed/share_units.h"
#include "framework/quant/layer_compare.h"
#include "framework/quant/sensitivity.h"

namespace qflow {

Expected<StageResult> run_compare(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                  const StageContext& context) {
  QFLOW_ASSIGN_OR_RETURN(Model float_model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(Model quantized,
                         import_onnx_bytes(inputs.at("quantized")->bytes, "input 'quantized' of stage '" + stage.id + "'"));
  const int64_t limit = std::get<int64_t>(stage.options.at("limit").value);
  const Dataset& dataset = *inputs.at("dataset")->dataset;
  const ShardRange mine = my_slice(context.world, limit > 0 ? std::min(limit, dataset.count) : dataset.count);
  ProgressBar progress("stage '" + stage.id + "'", mine.end - mine.begin);
  QFLOW_ASSIGN_OR_RETURN(LayerComparison result,
                         compare_layers(float_model, quantized, dataset, context.threads, limit, &progress, context.world));
  progress.finish();
  StageResult out;
  out.artifact.type = ArtifactType::Report;
  QFLOW_ASSIGN_OR_RETURN(out.artifact.bytes, layer_comparison_json(result));
  for (const std::string& name : result.unmatched)
    out.warnings.push_back("compare: quantized tensor '" + name + "' is not in the float model");
  return out;
}

Expected<StageResult> run_sensitivity(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                      const StageContext& context) {
  QFLOW_ASSIGN_OR_RETURN(Model float_model, model_input(stage, *inputs.at("model")));
  SensitivityOptions options;
  options.threads = context.threads;
  options.limit = std::get<int64_t>(stage.options.at("limit").value);
  options.when_below = std::get<double>(stage.options.at("when-below").value);
  options.method = std::get<std::string>(stage.options.at("method").value);
  options.ranking_gmacs = std::get<double>(stage.options.at("ranking-gmacs").value);
  options.progress = context.progress;
  options.world = context.world;
  ProgressBar bar("stage '" + stage.id + "'", 0);
  options.bar = &bar;
  QFLOW_ASSIGN_OR_RETURN(SensitivityResult result,
                         analyze_sensitivity(float_model, *inputs.at("qparams")->qparams, context.quantization,
                                             *inputs.at("dataset")->dataset, options));
  StageResult out;
  out.artifact.type = ArtifactType::Report;
  QFLOW_ASSIGN_OR_RETURN(out.artifact.bytes, sensitivity_json(result));
  for (const std::string& node : result.skipped)
    out.warnings.push_back("sensitivity: node '" + node + "' has no unique name and was not measured");
  return out;
}

}  // namespace qflow
