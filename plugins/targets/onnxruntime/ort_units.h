// The int8 placement of a QDQ model in ONNX Runtime: per node, whether the QDQ transformer
// fuses it with the DequantizeLinear / QuantizeLinear nodes around it into an integer kernel,
// and why not.
#pragma once

#include <string>
#include <vector>

#include "ort_platform.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

struct OrtNodePlacement {
  std::string node;
  std::string op_type;
  bool int8 = false;
  // The failed constraint when not int8 ("no int8 kernel for Erf", "input 'x' not dequantized
  // from int8", ...).
  std::string reason;
  // ONNX Runtime would fuse the unit, but its kernel computes other numbers than the QDQ graph
  // describes (int8 weights beyond the platform's range): a deployment must not run it.
  bool breaks_numerics = false;
};

// Every node of the model but QuantizeLinear and DequantizeLinear, in topological order.
Expected<std::vector<OrtNodePlacement>> ort_placement(const Model& model, const OrtPlatform& platform);

// QuantizeLinear / DequantizeLinear nodes whose element type the provider has no kernel for
// at the model's opset: "node 'x_QuantizeLinear': QuantizeLinear to int16 needs opset 21, the
// model imports 17". Empty when all run.
Expected<std::vector<std::string>> ort_qdq_type_problems(const Model& model, const OrtPlatform& platform);

}  // namespace qflow
