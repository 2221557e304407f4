// pass stages: one graph pass over a copy of the model, with optional checks and graph text.
#include "framework/pipeline/stage_util.h"

#include "framework/onnx/onnx_check.h"
#include "framework/pipeline/graph_text.h"
#include "framework/plugin/component_registry.h"

namespace qflow {

namespace {

// Both checks run on the model as the pass left it, before export: the exporter would
// otherwise be the first to trip over a dangling value, with a less pointed message.
Status verify_pass_result(const Model& model) {
  QFLOW_RETURN_IF_ERROR(model.graph->validate().with_context("graph check"));
  return check_model(model).with_context("onnx checker");
}

}  // namespace

Expected<StageResult> run_pass(const PipelineStage& stage, const Artifact& model_artifact, const ComponentRegistry& registry,
                               const StageContext& context) {
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, model_artifact));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Pass> pass, registry.make_pass(stage.component, options_of(stage)));
  const auto nodes_before = static_cast<int64_t>(model.graph->node_count());
  QFLOW_ASSIGN_OR_RETURN(PassResult effect, pass->run(model));
  if (context.verify) QFLOW_RETURN_IF_ERROR(verify_pass_result(model).with_context("--verify-each"));
  std::string text = context.print_graph ? graph_text(*model.graph) : std::string();
  QFLOW_ASSIGN_OR_RETURN(StageResult result, model_result(model));
  result.counters = effect.counters;
  result.nodes_before = nodes_before;
  result.nodes_after = static_cast<int64_t>(model.graph->node_count());
  result.pass_seconds = effect.seconds;
  result.graph_text = std::move(text);
  return result;
}


}  // namespace qflow
