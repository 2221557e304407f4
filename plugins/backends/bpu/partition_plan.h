// PartitionPlan: node placement and convex BPU subgraphs with their quantize/dequantize boundaries, written as the JSON plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/target.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

// What happens to a tensor where it crosses a subgraph boundary. A BPU subgraph computes
// in integers: a float tensor coming from the CPU or a graph input is quantized on the way
// in; a tensor a CPU node or the graph's caller reads is dequantized on the way out. A
// tensor passed between two BPU subgraphs stays quantized (None).
enum class BoundaryConversion { None, Quantize, Dequantize };

std::string_view boundary_conversion_name(BoundaryConversion conversion);

struct BpuBoundary {
  std::string name;  // the value
  BoundaryConversion conversion = BoundaryConversion::None;
};

struct BpuSubgraph {
  int64_t id = 0;
  std::vector<int64_t> nodes;        // positions in PartitionPlan::nodes (names may be empty or repeat)
  std::vector<BpuBoundary> inputs;   // values read from outside (constants excluded), first use order
  std::vector<BpuBoundary> outputs;  // values read outside or graph outputs, production order
};

struct PartitionPlan {
  std::vector<NodeCapability> nodes;  // topological order
  std::vector<int64_t> subgraph_of;   // parallel to nodes; -1 for CPU nodes
  std::vector<BpuSubgraph> subgraphs;
};

// Partitions the BPU nodes into subgraphs that are connected (by BPU-to-BPU edges) and
// such that the subgraphs and CPU nodes, each contracted to one unit, form a DAG: every
// subgraph is convex (no path leaves it and comes back) and runs as one unit. Greedy
// growth in topological order; the argument is in docs/bpu-checker.md. Ids
// follow the topological position of each subgraph's first node, so they are stable for a
// given model.
Expected<PartitionPlan> build_partition_plan(const Graph& graph, std::vector<NodeCapability> capability);

// The deterministic JSON document described in README.md.
std::string partition_plan_json(const PartitionPlan& plan, const std::string& platform, const std::string& model_name,
                                const QuantTable& qparams);

// JSON helpers shared with the check report.
std::string plan_json_string(const std::string& text);
std::string plan_json_float(float value);
std::string plan_json_quant(const QuantTable& qparams, const std::string& name);

}  // namespace qflow
