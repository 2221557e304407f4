// import-onnx: reads a float ONNX model through qflow's importer and checks, optionally
// raising its opset (QDQ with per-channel weights needs opset 13) and recording inferred shapes.
#include <algorithm>
#include <set>

#include "framework/pipeline/input_shapes.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_version.h"
#include "framework/pipeline/stage_util.h"
#include "framework/runtime/executor.h"

namespace qflow {

namespace {

// libonnx's opset adapters need the rank of some inputs (Softmax 12 -> 13 does) that
// shape inference cannot derive when a Reshape target is computed at run time. One run of
// the interpreter on zeros (dynamic dimensions: 1 for the first axis, 64 for the others)
// gives every value's rank; they are declared rank-only for the conversion and removed
// again afterwards. Returns the names it declared; a failing probe declares nothing.
std::set<std::string> declare_probed_ranks(Model& model) {
  std::map<std::string, Tensor> feeds;
  for (const Value* input : model.graph->runtime_inputs()) {
    if (!input->type || !input->type->shape) return {};
    Shape shape;
    for (std::size_t axis = 0; axis < input->type->shape->size(); ++axis) {
      const Dim& dim = (*input->type->shape)[axis];
      shape.push_back(dim.value ? *dim.value : (axis == 0 ? 1 : 64));
    }
    feeds.emplace(input->name(), Tensor(input->type->dtype, shape));
  }
  Expected<std::unique_ptr<Executor>> executor = Executor::create(model);
  if (!executor) return {};
  std::map<std::string, std::pair<DType, std::size_t>> probed;
  auto outputs = (*executor)->run(feeds, [&](const Value& value, const Tensor& tensor) {
    probed[value.name()] = {tensor.dtype(), tensor.rank()};
    return Status::ok();
  });
  if (!outputs) return {};
  std::set<std::string> declared;
  Graph& graph = *model.graph;
  for (const auto& [name, type] : probed) {
    Value* value = graph.find_value(name);
    if (!value || value->type) continue;
    value->type = ValueType{type.first, std::vector<Dim>(type.second), "", ""};
    graph.value_info.push_back(value);
    declared.insert(name);
  }
  return declared;
}

void forget_declared(Model& model, const std::set<std::string>& declared) {
  Graph& graph = *model.graph;
  auto& info = graph.value_info;
  info.erase(std::remove_if(info.begin(), info.end(), [&](Value* value) { return declared.count(value->name()) > 0; }),
             info.end());
  for (const std::string& name : declared)
    if (Value* value = graph.find_value(name)) value->type.reset();
}

}  // namespace

Expected<StageResult> run_import(const PipelineStage& stage) {
  const std::string path = string_option(stage, "path");
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(path));
  const int64_t min_opset = std::get<int64_t>(stage.options.at("min-opset").value);
  if (min_opset > 0 && default_opset(model) < min_opset) {
    const std::set<std::string> declared = declare_probed_ranks(model);
    Expected<Model> converted = convert_opset(model, min_opset);
    if (!converted) return converted.status().with_context(path);
    model = std::move(converted).value();
    forget_declared(model, declared);
  }
  const std::string input_shape = string_option(stage, "input-shape");
  if (!input_shape.empty()) QFLOW_RETURN_IF_ERROR(set_input_shapes(model, input_shape).with_context(path));
  if (std::get<bool>(stage.options.at("infer-shapes").value))
    QFLOW_RETURN_IF_ERROR(infer_shapes(model).with_context(path));
  return model_result(model);
}

}  // namespace qflow
