// backend stages: the model and its calibration table lowered to the target's artifact.
#include "framework/pipeline/stage_util.h"

#include "framework/plugin/component_registry.h"

namespace qflow {

Expected<StageResult> run_backend(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                  const ComponentRegistry& registry) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, registry.make_backend(stage.component, options_of(stage)));
  static const QuantTable kNoParams;
  auto it = inputs.find("qparams");
  const QuantTable& params = it != inputs.end() ? *it->second->qparams : kNoParams;
  StageResult result;
  result.artifact.type = ArtifactType::Binary;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, backend->compile(model, params));
  return result;
}

Status check_backends(const Pipeline& pipeline, const ComponentRegistry& registry) {
  for (const PipelineStage& stage : pipeline.stages) {
    Status made = Status::ok();
    if (stage.kind == StageKind::Backend) made = registry.make_backend(stage.component, options_of(stage)).status();
    if (is_target_stage(stage.kind)) made = make_stage_target(stage, registry).status();
    if (!made.is_ok()) return made.with_context(stage.use_pos.prefix() + "stage '" + stage.id + "'");
  }
  return Status::ok();
}

}  // namespace qflow
