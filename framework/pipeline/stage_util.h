// Helpers shared by the stage implementations (stage_*.cpp): options, model artifacts, JSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/json_writer.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/stage_execution.h"

namespace qflow {

class ComponentRegistry;

inline Options options_of(const PipelineStage& stage) {
  Options options;
  for (const auto& [name, option] : stage.options) options.set(name, option.value);
  return options;
}

inline std::string string_option(const PipelineStage& stage, const std::string& name) {
  return std::get<std::string>(stage.options.at(name).value);
}

inline Expected<Model> model_input(const PipelineStage& stage, const Artifact& artifact) {
  return import_onnx_bytes(artifact.bytes, "input 'model' of stage '" + stage.id + "'");
}

inline Expected<StageResult> model_result(const Model& model) {
  StageResult result;
  result.artifact.type = ArtifactType::Model;
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, export_onnx_bytes(model));
  return result;
}

template <typename T>
void write_numbers(JsonWriter& json, const std::vector<T>& numbers) {
  json.begin_array(true);
  for (const T& x : numbers) json.value(x);
  json.end_array();
}

// One function per stage kind, each in its own stage_<kind>.cpp.
Expected<StageResult> run_import(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs);
Expected<StageResult> run_load_data(const PipelineStage& stage, const StageContext& context);
Expected<StageResult> run_observer(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                   const ComponentRegistry& registry, const StageContext& context);
Expected<StageResult> run_calibrator(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                     const ComponentRegistry& registry, const StageContext& context);
Expected<StageResult> run_quantize(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                   const StageContext& context);
Expected<StageResult> run_pass(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                               const ComponentRegistry& registry, const StageContext& context);
Expected<StageResult> run_compare(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                  const StageContext& context);
Expected<StageResult> run_sensitivity(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                      const StageContext& context);
Expected<StageResult> run_compare_calibrators(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                              const ComponentRegistry& registry, const StageContext& context);
Expected<StageResult> run_precision_search(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                           const ComponentRegistry& registry, const StageContext& context);
// The target a target stage names, made with the stage's options except the stage's own.
Expected<std::shared_ptr<Target>> make_stage_target(const PipelineStage& stage, const ComponentRegistry& registry);
Expected<StageResult> run_target_check(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                       const ComponentRegistry& registry);
Expected<StageResult> run_target_estimate(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                          const ComponentRegistry& registry);
Expected<StageResult> run_target_lower(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                       const ComponentRegistry& registry);
Expected<StageResult> run_target_verify(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                        const ComponentRegistry& registry, const StageContext& context);
Expected<StageResult> run_report(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                 const StageContext& context);

}  // namespace qflow
