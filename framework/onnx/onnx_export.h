// qflow IR -> ONNX export (protobuf). Export of an imported model re-imports to the same graph.
#pragma once

#include <string>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// Serialized ModelProto bytes.
Expected<std::string> export_onnx_bytes(const Model& model);
// Writes atomically (temporary file + rename) so a failed write never leaves a partial file.
Status export_onnx_file(const Model& model, const std::string& path);

}  // namespace qflow
