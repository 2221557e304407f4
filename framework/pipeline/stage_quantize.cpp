// quantize: the float model and its calibration table turned into a QDQ model.
#include "framework/pipeline/stage_util.h"

namespace qflow {

Expected<StageResult> run_quantize(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                   const StageContext& context) {
  (void)inputs;
  (void)context;
  return unsupported("stage '" + stage.id + "': the quantize stage is not available in this build");
}

}  // namespace qflow
