// Conversions between ONNX protobuf messages and qflow IR, shared by import, export and checks.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "framework/onnx/onnx_import.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow::onnx_proto {

// `what` names the tensor in messages ("initializer 'w'", "tensor 'x'").
Expected<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& what, int64_t max_bytes);
Expected<ValueType> value_type_from_proto(const onnx::TypeProto& proto);
// Whole model; does not run the checker or Graph::validate().
Expected<Model> model_from_proto(const onnx::ModelProto& proto, const ImportOptions& options);

// Always little-endian raw_data, so re-import yields identical bytes; strings in string_data.
void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto);
Status value_type_to_proto(const ValueType& type, onnx::TypeProto& proto);
Status model_to_proto(const Model& model, onnx::ModelProto& proto);

}  // namespace qflow::onnx_proto
