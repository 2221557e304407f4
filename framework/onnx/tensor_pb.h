// Loading a serialized TensorProto together with its name (the ONNX backend test data binds
// inputs and outputs by that name).
#pragma once

#include <string>

#include "framework/onnx/onnx_import.h"
#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

struct NamedTensor {
  std::string name;  // TensorProto.name; may be empty
  Tensor tensor;
};

Expected<NamedTensor> load_named_tensor_pb_file(const std::string& path, const ImportOptions& options = {});

}  // namespace qflow
