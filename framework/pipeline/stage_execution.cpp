// Stage execution: dispatch of a resolved stage to its kind's implementation (stage_*.cpp).
#include "framework/pipeline/stage_util.h"

namespace qflow {

Expected<StageResult> execute_stage(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                    const ComponentRegistry& registry, const StageContext& context) {
  switch (stage.kind) {
    case StageKind::ImportOnnx: return run_import(stage, inputs);
    case StageKind::LoadData: return run_load_data(stage, context);
    case StageKind::Observer: return run_observer(stage, inputs, registry, context);
    case StageKind::Calibrator: return run_calibrator(stage, inputs, registry, context);
    case StageKind::Quantize: return run_quantize(stage, inputs, context);
    case StageKind::Pass:
    case StageKind::Passes: return run_pass(stage, inputs, registry, context);
    case StageKind::Report: return run_report(stage, inputs, context);
    case StageKind::Compare: return run_compare(stage, inputs, context);
    case StageKind::Sensitivity: return run_sensitivity(stage, inputs, context);
    case StageKind::CompareCalibrators: return run_compare_calibrators(stage, inputs, registry, context);
    case StageKind::PrecisionSearch: return run_precision_search(stage, inputs, registry, context);
    case StageKind::TargetCheck: return run_target_check(stage, inputs, registry);
    case StageKind::TargetEstimate: return run_target_estimate(stage, inputs, registry);
    case StageKind::TargetLower: return run_target_lower(stage, inputs, registry);
    case StageKind::TargetVerify: return run_target_verify(stage, inputs, registry, context);
  }
  return internal_error("unknown stage kind");
}

}  // namespace qflow
