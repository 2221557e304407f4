// Fixing the shapes of a model's inputs (the import stage's `input-shape` option), so that a
// model with symbolic dimensions gets the static shapes a target's program needs.
#pragma once

#include <string>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// `spec` is "1,3,48,320" (the model must have one runtime input) or
// "name=1,3,48,320;other=1,8" ('x' may separate dimensions too: "1x3x48x320"). Each named
// input gets that shape: its rank must match a declared rank and a static dimension may
// not change. Every other value's inferred type is then dropped and ONNX shape inference
// runs again, so downstream shapes follow; values it cannot follow get the shapes one run of
// the interpreter on zeros gives them.
Status set_input_shapes(Model& model, const std::string& spec);

// Drops every inferred type (graph outputs keep their declaration where inference says no
// more) and infers them again, as set_input_shapes does after fixing the inputs: after a
// pass that made values without types (PassResult::types_stale).
Status reinfer_shapes(Model& model);

}  // namespace qflow
