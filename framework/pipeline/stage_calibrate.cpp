// calibrator stages: statistics (and the model) in, the calibration table out.
#include "framework/pipeline/stage_util.h"

#include "framework/plugin/component_registry.h"

namespace qflow {

namespace {

std::string qparams_json(const QuantTable& table) {
  JsonWriter json;
  json.begin_object();
  json.key("tensors").begin_object();
  for (const auto& [name, q] : table) {
    json.key(name).begin_object();
    json.field("axis", q.axis);
    json.field("dtype", dtype_name(q.dtype));
    json.field("method", q.method);
    json.key("scale");
    write_numbers(json, q.scale);
    json.field("threshold", q.threshold);
    json.key("zero_point");
    write_numbers(json, q.zero_point);
    json.end_object();
  }
  json.end_object();
  json.end_object();
  auto text = json.finish();
  return text ? *text : std::string();
}

}  // namespace

Expected<StageResult> run_calibrator(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                     const ComponentRegistry& registry, const StageContext& context) {
  (void)context;
  std::optional<Model> model;
  if (auto it = inputs.find("model"); it != inputs.end()) {
    QFLOW_ASSIGN_OR_RETURN(Model imported, model_input(stage, *it->second));
    model = std::move(imported);
  }
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Calibrator> calibrator, registry.make_calibrator(stage.component, options_of(stage)));
  CalibrationRequest request;
  if (auto it = inputs.find("statistics"); it != inputs.end()) request.statistics = it->second->statistics.get();
  request.model = model ? &*model : nullptr;
  QFLOW_ASSIGN_OR_RETURN(QuantTable table, calibrator->calibrate(request));
  StageResult result;
  result.artifact.type = ArtifactType::QParams;
  result.artifact.bytes = qparams_json(table);
  result.artifact.qparams = std::make_shared<const QuantTable>(std::move(table));
  return result;
}


}  // namespace qflow
