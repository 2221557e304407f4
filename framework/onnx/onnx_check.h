// libonnx's checker and shape inference applied to qflow models.
#pragma once

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// Runs onnx::checker::check_model on the exported proto; the message is libonnx's.
Status check_model(const Model& model);
// Runs onnx::shape_inference::InferShapes and records inferred types on the IR's values
// (declared types are kept; inferred ones fill Value::type where it was empty).
Status infer_shapes(Model& model);

}  // namespace qflow
