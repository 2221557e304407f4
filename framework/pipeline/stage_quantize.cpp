// quantize: the float model and its calibration table turned into a QDQ model.
#include "framework/pipeline/stage_util.h"

#include "framework/onnx/onnx_check.h"

#include "framework/quant/bias_correction.h"
#include "framework/quant/precision_search.h"
#include "framework/quant/qdq_builder.h"

namespace qflow {

// weights = false: the calibrated model (activation Q/DQ pairs only); weights = true: the
// PTQ model (also quantized weights and int32 biases), optionally with bias correction
// measured on input 'dataset'. docs/quantization.md describes both. Input 'precision' (a
// precision-search result) merges its node overrides over the pipeline's [quantization] and
// recomputes the raised activations' table entries for their new type.
Expected<StageResult> run_quantize(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                   const StageContext& context) {
  const std::string head = "stage '" + stage.id + "'";
  auto model_it = inputs.find("model");
  auto qparams_it = inputs.find("qparams");
  if (model_it == inputs.end() || qparams_it == inputs.end())
    return invalid_input(head + ": quantize needs inputs 'model' and 'qparams'");
  if (!qparams_it->second->qparams) return internal_error(head + ": input 'qparams' carries no table");
  const bool weights = std::get<bool>(stage.options.at("weights").value);
  const bool bias_correction = std::get<bool>(stage.options.at("bias-correction").value);
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *model_it->second));
  // The QDQ models carry every shape inference can find now that the passes have folded the
  // shape computations: a target's lowering needs them. Best effort: a model inference cannot
  // handle is still quantized, and the lowering names any value left without a shape.
  (void)infer_shapes(model);

  // The settings this stage quantizes with: the pipeline's, or those with the searched overrides.
  const QuantConfig* config = context.quantization;
  QuantConfig searched;
  const QuantTable* table = qparams_it->second->qparams.get();
  const std::map<std::string, TensorStatistics>* observed = nullptr;
  if (auto it = inputs.find("precision"); it != inputs.end()) {
    QFLOW_ASSIGN_OR_RETURN(const PrecisionReplay replay,
                           precision_replay_from_json(it->second->bytes, "input 'precision' of " + head));
    searched = merge_quant_config(config ? *config : QuantConfig{}, replay.overrides);
    config = &searched;
    // The search measured raised activations with their observed ranges: the model it
    // measured needs the same statistics.
    const std::map<std::string, TensorStatistics>* statistics = nullptr;
    if (auto stats_it = inputs.find("statistics"); stats_it != inputs.end()) statistics = stats_it->second->statistics.get();
    if (replay.observed_ranges && !statistics)
      return invalid_input(head + ": input 'precision' raised activations to their observed ranges; give this stage "
                                  "the same input 'statistics' as the precision search");
    if (replay.observed_ranges) observed = statistics;
  }
  // Entries whose type the settings change (searched raises; a loaded table's uint8 where
  // the settings ask for int8) are recomputed for it; the rest are kept as they are.
  auto retabled = table_for_config(*model.graph, *table, config, observed);
  if (!retabled) return retabled.status().with_context(head);
  const QuantTable adjusted = std::move(*retabled);
  table = &adjusted;

  QdqOptions options;
  options.weights = weights;
  if (bias_correction) {
    if (!weights)
      return invalid_input(head + ": option 'bias-correction' needs 'weights = true' (the calibrated model keeps float weights)");
    auto dataset_it = inputs.find("dataset");
    if (dataset_it == inputs.end() || !dataset_it->second->dataset)
      return invalid_input(head + ": option 'bias-correction' needs input 'dataset' (the calibration samples)");
    auto shift = measure_bias_shift(model, config, *dataset_it->second->dataset);
    if (!shift) return shift.status().with_context(head);
    options.bias_shift = std::move(*shift);
  }
  const Status built = build_qdq_model(model, *table, config, options);
  if (!built) return built.with_context(head);
  return model_result(model);
}

}  // namespace qflow
