// Interpreter access for plugins: evaluate one node with qflow's built-in reference kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Runs `node` once on `inputs` (one per node input; nullptr for a missing optional input)
// with the built-in kernel for its domain and op at `opset`, the opset the model imports
// for the node's domain. Returns one tensor per node output; a missing optional output
// yields an empty Tensor. Fails with Unsupported when no built-in kernel exists, and with
// the kernel's error when the inputs do not suit it. Single-threaded.
Expected<std::vector<Tensor>> evaluate_node(const Node& node, const std::vector<const Tensor*>& inputs,
                                            int64_t opset);

// Whether evaluate_node has a kernel for `node` at `opset`; cheap, runs nothing.
bool can_evaluate(const Node& node, int64_t opset);

}  // namespace qflow
