// If inlining: an If whose condition is a constant is replaced by the nodes of the branch it
// always takes, so the passes, observers, calibrators and backends see them as plain nodes
// (a streaming model's branch per sample rate, once the rate is a constant input).
#pragma once

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow::folding {

// Inlines `node` (an If) when its condition is an initializer that is not also a graph input:
// the branch's initializers and nodes are copied into `graph` (names kept unless taken, then
// made unique), and each If output is written by an Identity of the branch output, so its
// name and readers stay. Returns false, changing nothing, when the condition is not constant
// or when a renamed value would be read by name from a subgraph nested in the branch.
Expected<bool> inline_constant_if(Graph& graph, Node* node);

}  // namespace qflow::folding
