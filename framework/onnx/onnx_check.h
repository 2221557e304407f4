// libonnx's checker and shape inference applied to qflow models.
#pragma once

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// Runs libonnx's checker on the exported proto (with onnx_schemas(), so the opset-18 forms
// qflow's opset upgrade writes are known); the message is libonnx's.
Status check_model(const Model& model);
// Runs onnx::shape_inference::InferShapes (with onnx_schemas()) and records inferred types on the IR's values
// (declared types are kept; inferred ones fill Value::type where it was empty).
Status infer_shapes(Model& model);

}  // namespace qflow
