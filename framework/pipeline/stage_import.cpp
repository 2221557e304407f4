// import-onnx: reads a float ONNX model through qflow's importer and checks, optionally
// raising its opset (QDQ with per-channel weights needs opset 13) and recording inferred shapes.
#include "framework/pipeline/input_shapes.h"
#include "framework/pipeline/constant_inputs.h"
#include "framework/data/input_feeds.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_version.h"
#include "framework/pipeline/stage_util.h"
#include "framework/quant/opset_upgrade.h"

namespace qflow {

namespace {

// The shapes a model's inputs with symbolic dimensions take from the calibration samples
// when no input-shape is given: each sample shape with a batch axis of 1 (feed_shape()), as
// "x=1,3,48,320;state=2,1,128". Empty when the samples do not decide any; a dataset that does
// not fit the model is left for the stages feeding it to report.
std::string shape_from_samples(const Model& model, const Dataset& dataset) {
  Expected<InputBinding> binding = bind_inputs(*model.graph, dataset);
  if (!binding) return "";
  std::string text;
  for (const InputFeed& feed : *binding) {
    const Value* input = model.graph->find_value(feed.input);
    if (!input || feed.shape.empty() || (input->type && input->type->shape && input->type->static_shape())) continue;
    if (!text.empty()) text += ';';
    text += feed.input + '=';
    for (std::size_t i = 0; i < feed.shape.size(); ++i) {
      if (i) text += ',';
      text += std::to_string(feed.shape[i]);
    }
  }
  return text;
}

}  // namespace

Expected<StageResult> run_import(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs) {
  const std::string path = string_option(stage, "path");
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  const int64_t min_opset = std::get<int64_t>(stage.options.at("min-opset").value);
  if (min_opset > 0 && default_opset(model) < min_opset) {
    QFLOW_RETURN_IF_ERROR(convert_opset_with_ranks(model, min_opset).with_context(path));
  }
  if (const std::string constants = string_option(stage, "constant-inputs"); !constants.empty())
    QFLOW_RETURN_IF_ERROR(set_constant_inputs(model, constants).with_context(path));
  std::string input_shape = string_option(stage, "input-shape");
  if (auto it = inputs.find("dataset"); input_shape.empty() && it != inputs.end() && it->second->dataset) {
    input_shape = shape_from_samples(model, *it->second->dataset);
    if (!input_shape.empty())
      QFLOW_RETURN_IF_ERROR(set_input_shapes(model, input_shape)
                                .with_context(path + ": input shape " + input_shape + " from the calibration samples"));
  } else if (!input_shape.empty()) {
    QFLOW_RETURN_IF_ERROR(set_input_shapes(model, input_shape).with_context(path));
  }
  if (std::get<bool>(stage.options.at("infer-shapes").value))
    QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(path));
  return model_result(model);
}

}  // namespace qflow
