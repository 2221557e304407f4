// load-data: describes the calibration samples; later stages stream them one at a time.
#include "framework/pipeline/stage_util.h"

namespace qflow {

Expected<StageResult> run_load_data(const PipelineStage& stage) {
  DataSpec spec;
  spec.path = string_option(stage, "path");
  QFLOW_ASSIGN_OR_RETURN(Dataset dataset, open_dataset(spec));
  StageResult result;
  result.artifact.type = ArtifactType::Dataset;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, dataset_json(dataset));
  result.artifact.dataset = std::make_shared<const Dataset>(std::move(dataset));
  return result;
}

}  // namespace qflow
