// Sorting a ModelProto's nodes: exporters write graphs out of order that runtimes accept,
// while libonnx's checker and qflow's passes expect producers before consumers.
#pragma once

#include <onnx/onnx_pb.h>

namespace qflow::onnx_proto {

// Reorders the nodes of `graph` and of every subgraph so that each node comes after the
// producers of its inputs and of the outer values its subgraphs use; nodes already in order
// keep their places (a stable sort). Returns whether any graph's order changed. Nodes on a
// cycle, or reading values nobody produces, are left where they are, after the rest, for
// the structural check to name.
bool sort_nodes_topologically(onnx::GraphProto& graph);

}  // namespace qflow::onnx_proto
