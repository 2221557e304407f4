// pass stages: one graph pass over a copy of the model, with optional checks and graph text.
#include "framework/pipeline/stage_util.h"

#include "framework/onnx/onnx_check.h"
#include "framework/pipeline/graph_text.h"
#include "framework/pipeline/input_shapes.h"
#include "framework/plugin/component_registry.h"

namespace qflow {

namespace {

// Rounds of pass, type inference, pass for a pass that keeps asking (nested Ifs inlined one
// level per round).
constexpr int kMaxTypeRounds = 8;

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
  // A pass that made values without types runs again on freshly inferred ones; counters add
  // up. Where ONNX inference fails the types stay unknown, for later stages to report.
  for (int round = 1; effect.types_stale && round < kMaxTypeRounds; ++round) {
    if (!reinfer_shapes(model).is_ok()) break;
    QFLOW_ASSIGN_OR_RETURN(PassResult again, pass->run(model));
    for (const auto& [name, count] : again.counters) effect.counters[name] += count;
    effect.changed = effect.changed || again.changed;
    effect.seconds += again.seconds;
    effect.types_stale = again.types_stale;
  }
  if (effect.types_stale) (void)reinfer_shapes(model);
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
