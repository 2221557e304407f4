// libonnx's checker and shape inference run on the exported proto; results mapped back onto the IR.
#include "framework/onnx/onnx_check.h"

#include <algorithm>
#include <exception>

#include <onnx/shape_inference/implementation.h>

#include "framework/onnx/onnx_schemas.h"
#include "framework/onnx/proto_convert.h"

namespace qflow {

namespace {

// Records inferred types where the IR has none; a declared type wins, except that its
// symbolic dimensions take the inferred static values (same rank and dtype only).
void adopt_inferred(Graph& graph, const onnx::ValueInfoProto& info, bool declare_in_value_info) {
  Value* value = graph.find_value(info.name());
  if (!value || !info.has_type()) return;
  auto type = onnx_proto::value_type_from_proto(info.type());
  if (!type) return;
  if (value->type) {
    ValueType& declared = *value->type;
    if (declared.dtype != type->dtype || !declared.shape || !type->shape || declared.shape->size() != type->shape->size())
      return;
    for (std::size_t axis = 0; axis < declared.shape->size(); ++axis) {
      Dim& dim = (*declared.shape)[axis];
      const Dim& inferred = (*type->shape)[axis];
      if (!dim.value && inferred.value) dim = Dim{inferred.value, "", dim.denotation};
    }
    return;
  }
  value->type = std::move(type).value();
  if (!declare_in_value_info) return;
  auto listed = [&](const std::vector<Value*>& list) {
    return std::find(list.begin(), list.end(), value) != list.end();
  };
  if (!listed(graph.inputs) && !listed(graph.outputs) && !listed(graph.value_info)) graph.value_info.push_back(value);
}

}  // namespace

Status check_model(const Model& model) {
  try {
    onnx::ModelProto proto;
    QFLOW_RETURN_IF_ERROR(onnx_proto::model_to_proto(model, proto));
    check_model_proto(proto);
  } catch (const std::exception& e) {
    return invalid_input(e.what());
  }
  return Status::ok();
}

Status infer_shapes(Model& model) {
  onnx::ModelProto proto;
  try {
    QFLOW_RETURN_IF_ERROR(onnx_proto::model_to_proto(model, proto));
    // Data propagation lets shapes computed by Shape/Gather/Concat chains reach Reshape.
    const onnx::ShapeInferenceOptions options(/*check_type_val=*/false, /*strict_mode_val=*/0, /*data_prop_val=*/true);
    onnx::shape_inference::InferShapes(proto, onnx_schemas(), options);
  } catch (const std::exception& e) {
    return invalid_input(std::string("shape inference failed: ") + e.what());
  }
  Graph& graph = *model.graph;
  for (const auto& info : proto.graph().value_info()) adopt_inferred(graph, info, true);
  for (const auto& info : proto.graph().output()) adopt_inferred(graph, info, false);
  return Status::ok();
}

}  // namespace qflow
