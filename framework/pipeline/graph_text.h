// Graph text: a compact, line-per-node form of a graph for `qflow run --print-after`.
#pragma once

#include <string>

#include "qflow/ir/graph.h"

namespace qflow {

// One line per node in execution order, `name: op_type(inputs) -> outputs {attrs}`, framed
// by the graph inputs, outputs and the initializer count. Absent optional inputs print as
// "". Long float/int lists are cut after 8 elements ("..., +N") so a line stays readable;
// tensor attributes print as their dtype and shape. A graph with a cycle lists its nodes in
// insertion order (the printer must work on whatever a broken pass left behind).
std::string graph_text(const Graph& graph);

}  // namespace qflow
