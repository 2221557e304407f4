// pass and passes stages: one pass component, or a pass list, run in memory by the PassManager.
#include "framework/pipeline/stage_util.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "framework/pipeline/graph_text.h"
#include "framework/pipeline/pass_list.h"
#include "framework/pipeline/pass_manager.h"
#include "framework/pipeline/pass_samples.h"
#include "framework/plugin/component_registry.h"

namespace qflow {

namespace {

// --print-after: the graph after each pass the names select (a pass name, or the stage id for
// the graph the stage leaves), in the order the passes ran.
class PrintAfter final : public PassInstrumentation {
 public:
  PrintAfter(const PipelineStage& stage, const std::vector<std::string>& names, std::string& text)
      : stage_(stage), names_(names), text_(text) {}
  Status after_pass(const PassRecord& record, const Model& model) override {
    if (std::find(names_.begin(), names_.end(), record.name) == names_.end()) return Status::ok();
    // A one-pass stage prints as it always did: the graph alone.
    if (stage_.kind == StageKind::Passes) text_ += "-- after pass " + record.name + "\n";
    text_ += graph_text(*model.graph);
    return Status::ok();
  }

 private:
  const PipelineStage& stage_;
  const std::vector<std::string>& names_;
  std::string& text_;
};

// --save-intermediate: the model after every pass of a list, "<stage>.<NN>.<pass>.onnx".
class SaveIntermediate final : public PassInstrumentation {
 public:
  SaveIntermediate(const PipelineStage& stage, std::map<std::string, std::string>& files) : stage_(stage), files_(files) {}
  Status after_pass(const PassRecord& record, const Model& model) override {
    char index[16];
    std::snprintf(index, sizeof index, "%02d", ++count_);
    QFLOW_ASSIGN_OR_RETURN(std::string bytes, export_onnx_bytes(model));
    files_[stage_.id + "." + index + "." + record.name + ".onnx"] = std::move(bytes);
    return Status::ok();
  }

 private:
  const PipelineStage& stage_;
  std::map<std::string, std::string>& files_;
  int count_ = 0;
};

}  // namespace

Expected<StageResult> run_pass(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                               const ComponentRegistry& registry, const StageContext& context) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, *inputs.at("model")));
  // The samples of the optional dataset input, fed to the model as each pass finds it.
  std::optional<DatasetPassSamples> samples;
  if (auto it = inputs.find("dataset"); it != inputs.end() && it->second->dataset)
    samples.emplace(*it->second->dataset, model);
  PassContext pass_context;
  pass_context.samples = samples ? &*samples : nullptr;
  pass_context.quantization = context.quantization;
  PassManager manager;
  if (stage.kind == StageKind::Passes) {
    QFLOW_ASSIGN_OR_RETURN(std::vector<PassInvocation> passes,
                           expand_pass_list(string_option(stage, "passes"), ComponentCatalog::from_registry(registry),
                                            "option 'passes'"));
    for (const PassInvocation& pass : passes) {
      QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Pass> made, registry.make_pass(pass.name, pass.options));
      manager.add_pass(pass.name, std::move(made));
    }
  } else {
    QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Pass> made, registry.make_pass(stage.component, options_of(stage)));
    manager.add_pass(stage.component, std::move(made));
  }
  if (context.verify) manager.add_instrumentation(verify_each_instrumentation());
  StageResult result;
  // A one-pass stage prints when named by its id or its pass; a list's passes by their names.
  std::vector<std::string> print_names = context.print_after;
  if (std::find(print_names.begin(), print_names.end(), stage.id) != print_names.end() && stage.kind == StageKind::Pass)
    print_names.push_back(stage.component);
  manager.add_instrumentation(std::make_shared<PrintAfter>(stage, print_names, result.graph_text));
  std::map<std::string, std::string> intermediate;
  if (context.save_intermediate && stage.kind == StageKind::Passes)
    manager.add_instrumentation(std::make_shared<SaveIntermediate>(stage, intermediate));

  QFLOW_ASSIGN_OR_RETURN(result.passes, manager.run(model, pass_context));
  // The stage id names the graph the whole list leaves.
  if (stage.kind == StageKind::Passes &&
      std::find(context.print_after.begin(), context.print_after.end(), stage.id) != context.print_after.end())
    result.graph_text += "-- after stage " + stage.id + "\n" + graph_text(*model.graph);
  QFLOW_ASSIGN_OR_RETURN(result.artifact.bytes, export_onnx_bytes(model));
  result.artifact.type = ArtifactType::Model;
  result.side_files = std::move(intermediate);
  return result;
}

}  // namespace qflow
