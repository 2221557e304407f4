// import-onnx: reads a float ONNX model through qflow's importer and checks.
#include "framework/pipeline/stage_util.h"

namespace qflow {

Expected<StageResult> run_import(const PipelineStage& stage) {
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(string_option(stage, "path")));
  return model_result(model);
}

}  // namespace qflow
