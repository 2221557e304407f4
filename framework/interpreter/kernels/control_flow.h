// Control flow (If, Loop, Scan): kernels that run subgraphs with executors of their own.
#pragma once

#include <memory>
#include <vector>

#include "framework/interpreter/kernel.h"
#include "framework/interpreter/kernel_registry.h"
#include "qflow/ir/graph.h"

namespace qflow {

// Default-domain If, Loop or Scan.
bool is_control_flow(const Node& node);

// The kernel of a control-flow node whose subgraphs resolve their ops with `opsets` (the
// enclosing model's imports) in `registry`. The executor builds these itself, so that
// subgraphs see the model's opsets and the registry it was given; the registry's own
// entries (register_control_flow_kernels) know the default-domain opset only.
Expected<std::unique_ptr<Kernel>> make_control_flow_kernel(const Node& node, const std::vector<OpsetImport>& opsets,
                                                           const KernelRegistry& registry);

}  // namespace qflow
