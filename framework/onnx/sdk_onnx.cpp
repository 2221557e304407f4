// serialize_onnx: the SDK's entry into the ONNX exporter.
#include "qflow/onnx.h"

#include "framework/onnx/onnx_export.h"

namespace qflow {

Expected<std::string> serialize_onnx(const Model& model) { return export_onnx_bytes(model); }

}  // namespace qflow
