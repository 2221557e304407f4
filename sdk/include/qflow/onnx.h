// ONNX files for plugins: a model as the bytes qflow writes for it (a target that deploys an
// ONNX model emits these).
#pragma once

#include <string>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// The serialized ModelProto, exactly what a pipeline stage writes for `model`: importing the
// bytes gives the same graph back. Fails naming what ONNX cannot express.
Expected<std::string> serialize_onnx(const Model& model);

}  // namespace qflow
