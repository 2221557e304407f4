// load-data: checks the options, scans the calibration samples once (NaN/Inf, limit) and
// describes them; later stages stream them one at a time.
#include "framework/data/data_options.h"
#include "framework/pipeline/stage_util.h"

namespace qflow {

Expected<StageResult> run_load_data(const PipelineStage& stage, const StageContext& context) {
  QFLOW_ASSIGN_OR_RETURN(DataSpec spec, data_spec_from_options(options_of(stage)));
  QFLOW_ASSIGN_OR_RETURN(Dataset dataset, open_dataset(spec, context.world));
  StageResult result;
  result.warnings = dataset_warnings(dataset);
  result.artifact.type = ArtifactType::Dataset;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, dataset_json(dataset));
  result.artifact.dataset = std::make_shared<const Dataset>(std::move(dataset));
  return result;
}

}  // namespace qflow
