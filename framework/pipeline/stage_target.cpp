// target stages: a target component's check section, performance estimate and lowering.
#include <algorithm>
#include <filesystem>

#include "framework/pipeline/component_options.h"
#include "framework/quant/quantization_settings.h"
#include "framework/pipeline/stage_util.h"
#include "framework/plugin/component_registry.h"
#include "framework/quant/precision_search.h"

namespace qflow {

Expected<std::shared_ptr<Target>> make_stage_target(const PipelineStage& stage, const ComponentRegistry& registry) {
  Options options;
  const std::vector<OptionSpec> own = target_stage_options(stage.kind);
  for (const auto& [name, option] : stage.options)
    if (std::none_of(own.begin(), own.end(), [&](const OptionSpec& spec) { return spec.name == name; }))
      options.set(name, option.value);
  return registry.make_target(stage.component, options);
}

namespace {

// A report section: the JSON is the artifact, the text its readable twin next to it
// (model_check_result.json -> model_check_result.txt).
StageResult section_result(const PipelineStage& stage, TargetReport report) {
  StageResult result;
  result.artifact.type = ArtifactType::Report;
  result.artifact.bytes = std::move(report.json);
  if (!report.text.empty()) {
    const std::string text_name = std::filesystem::path(stage.output).replace_extension(".txt").string();
    if (text_name != stage.output) result.side_files[text_name] = std::move(report.text);
  }
  return result;
}

}  // namespace

Status check_targets(const Pipeline& pipeline, const ComponentRegistry& registry) {
  QFLOW_ASSIGN_OR_RETURN(QuantConfig quantization, pipeline_quantization(pipeline, registry));
  for (const PipelineStage& stage : pipeline.stages) {
    if (!is_target_stage(stage.kind)) continue;
    Expected<std::shared_ptr<Target>> made = make_stage_target(stage, registry);
    Status status = made ? (*made)->check_quantization(quantization) : made.status();
    if (!status.is_ok()) return status.with_context(stage.use_pos.prefix() + "stage '" + stage.id + "'");
  }
  return Status::ok();
}

Expected<QuantConfig> pipeline_quantization(const Pipeline& pipeline, const ComponentRegistry& registry) {
  const QuantizationTarget& target = pipeline.quantization_target;
  if (target.name.empty()) return pipeline.quantization;
  const std::string where = target.pos.prefix() + "in [quantization]: target '" + target.name + "'";
  const ComponentInfo* info = registry.find(ComponentKind::Target, target.name);
  if (!info) return not_found(where + ": no such target component");
  Expected<Options> options = parse_component_options(*info, target.options, "target-options");
  if (!options) return options.status().with_context(where);
  Expected<std::shared_ptr<Target>> made = registry.make_target(target.name, *options);
  if (!made) return made.status().with_context(where);
  // The table's own keys replace the rule's at each level: the target proposes, the pipeline
  // decides, and the target's lowering checks what it got.
  return merge_quant_config((*made)->quantization_rule(), pipeline.quantization);
}

std::vector<std::string> quantization_rule_lines(const QuantConfig& rule, const QuantConfig& table) {
  std::vector<std::string> lines;
  const auto add = [&](const std::string& prefix, const QuantOverride& from, const QuantOverride* over) {
    const auto taken = over ? quantization_fields(*over) : std::vector<std::pair<std::string, std::string>>{};
    for (const auto& [key, value] : quantization_fields(from))
      if (std::none_of(taken.begin(), taken.end(), [&key = key](const auto& field) { return field.first == key; }))
        lines.push_back(prefix + key + " = " + value);
  };
  add("", rule.model, &table.model);
  for (const auto& [op, entry] : rule.op_types) {
    auto it = table.op_types.find(op);
    add("op-type." + op + ": ", entry, it == table.op_types.end() ? nullptr : &it->second);
  }
  for (const auto& [node, entry] : rule.nodes) {
    auto it = table.nodes.find(node);
    add("node." + node + ": ", entry, it == table.nodes.end() ? nullptr : &it->second);
  }
  return lines;
}

Expected<StageResult> run_target_check(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                       const ComponentRegistry& registry) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, make_stage_target(stage, registry));
  QFLOW_ASSIGN_OR_RETURN(TargetReport report, target->check(model));
  return section_result(stage, std::move(report));
}

Expected<StageResult> run_target_estimate(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                          const ComponentRegistry& registry) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, make_stage_target(stage, registry));
  static const QuantTable kNoTable;  // without a table the estimate counts float32 tensors
  auto qparams = inputs.find("qparams");
  QFLOW_ASSIGN_OR_RETURN(TargetReport report,
                         target->estimate(model, qparams != inputs.end() ? *qparams->second->qparams : kNoTable));
  return section_result(stage, std::move(report));
}

Expected<StageResult> run_target_lower(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                       const ComponentRegistry& registry) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, make_stage_target(stage, registry));
  QFLOW_ASSIGN_OR_RETURN(std::vector<TargetArtifact> files, target->lower(model));
  std::string name = string_option(stage, "name");
  if (name.empty()) name = model.graph->name.empty() ? stage.id : model.graph->name;
  StageResult result;
  result.artifact.type = ArtifactType::Deployable;
  JsonWriter json;
  json.begin_object();
  json.field("target", stage.component);
  json.key("files").begin_array();
  for (const TargetArtifact& file : files) {
    if (file.role.empty() || file.suffix.empty())
      return internal_error("target '" + stage.component + "' emitted a file without a role or suffix");
    const std::string file_name = name + file.suffix;
    if (result.side_files.count(file_name) || file_name == stage.output)
      return internal_error("target '" + stage.component + "' emitted '" + file_name + "' twice");
    json.begin_object(true);
    json.field("role", file.role);
    json.field("file", file_name);
    json.field("bytes", static_cast<int64_t>(file.bytes.size()));
    json.end_object();
    result.side_files[file_name] = file.bytes;
    result.side_file_roles[file_name] = file.role;
  }
  json.end_array();
  json.end_object();
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, json.finish());
  result.artifact.deployables = std::make_shared<const std::vector<TargetArtifact>>(std::move(files));
  return result;
}

}  // namespace qflow
