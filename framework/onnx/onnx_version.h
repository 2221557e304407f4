// Opset conversion of qflow models with libonnx's version converter.
#pragma once

#include <cstdint>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// The model's default-domain ("" / "ai.onnx") opset version, or 0 when it imports none.
int64_t default_opset(const Model& model);

// Converts the model to default-domain opset `target` with onnx::version_conversion
// (adapters rewrite ops whose signature changed, e.g. Squeeze axes becoming an input).
// Value names of node outputs are kept. Errors carry libonnx's message.
Expected<Model> convert_opset(const Model& model, int64_t target);

}  // namespace qflow
