// Opset conversion through the exported proto and libonnx's version converter.
#include "framework/onnx/onnx_version.h"

#include <exception>

#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include "framework/onnx/proto_convert.h"

namespace qflow {

int64_t default_opset(const Model& model) {
  for (const OpsetImport& opset : model.opset_imports)
    if (opset.domain.empty() || opset.domain == "ai.onnx") return opset.version;
  return 0;
}

Expected<Model> convert_opset(const Model& model, int64_t target) {
  onnx::ModelProto proto;
  try {
    QFLOW_RETURN_IF_ERROR(onnx_proto::model_to_proto(model, proto));
    // One version at a time with shapes re-inferred in between: some adapters (Softmax
    // 12 -> 13) need the rank of their input, which earlier adapters' new nodes lack.
    const onnx::ShapeInferenceOptions options(/*check_type_val=*/false, /*strict_mode_val=*/0, /*data_prop_val=*/true);
    for (int64_t version = default_opset(model) + 1; version <= target; ++version) {
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
      proto = onnx::version_conversion::ConvertVersion(proto, static_cast<int>(version));
    }
  } catch (const std::exception& e) {
    return unsupported("cannot convert the model from opset " + std::to_string(default_opset(model)) + " to " +
                       std::to_string(target) + ": " + e.what());
  }
  return onnx_proto::model_from_proto(proto, ImportOptions{});
}

}  // namespace qflow
