// import-onnx: reads a float ONNX model through qflow's importer and checks, optionally
// raising its opset (QDQ with per-channel weights needs opset 13) and recording inferred shapes.
#include "framework/pipeline/input_shapes.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_version.h"
#include "framework/pipeline/stage_util.h"
#include "framework/quant/opset_upgrade.h"

namespace qflow {

Expected<StageResult> run_import(const PipelineStage& stage) {
  const std::string path = string_option(stage, "path");
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  const int64_t min_opset = std::get<int64_t>(stage.options.at("min-opset").value);
  if (min_opset > 0 && default_opset(model) < min_opset) {
    QFLOW_RETURN_IF_ERROR(convert_opset_with_ranks(model, min_opset).with_context(path));
  }
  const std::string input_shape = string_option(stage, "input-shape");
  if (!input_shape.empty()) QFLOW_RETURN_IF_ERROR(set_input_shapes(model, input_shape).with_context(path));
  if (std::get<bool>(stage.options.at("infer-shapes").value))
    QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(path));
  return model_result(model);
}

}  // namespace qflow
