// PartitionPlan: node placement and maximal BPU subgraphs, written as the JSON plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/backend.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

struct BpuSubgraph {
  int64_t id = 0;
  std::vector<int64_t> nodes;        // positions in PartitionPlan::nodes (names may be empty or repeat)
  std::vector<std::string> inputs;   // values read from outside (initializers excluded)
  std::vector<std::string> outputs;  // values read outside or graph outputs
  // False when a path leaves the subgraph through a CPU node and re-enters it: such a
  // subgraph cannot run as one unit and must be split before lowering.
  bool convex = true;
};

struct PartitionPlan {
  std::vector<NodeCapability> nodes;  // topological order
  std::vector<int64_t> subgraph_of;   // parallel to nodes; -1 for CPU nodes
  std::vector<BpuSubgraph> subgraphs;
};

// Unions BPU nodes joined by a BPU-to-BPU edge; ids follow the topological position of
// each subgraph's first node, so they are stable for a given model.
Expected<PartitionPlan> build_partition_plan(const Graph& graph, std::vector<NodeCapability> capability);

// The deterministic JSON document described in README.md.
std::string partition_plan_json(const PartitionPlan& plan, const std::string& platform, const std::string& model_name,
                                const QuantTable& qparams);

}  // namespace qflow
