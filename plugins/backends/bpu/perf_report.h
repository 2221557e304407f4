// The BPU performance estimate: per-layer MACs, bytes and roofline cycles, totals per subgraph and for the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bpu_platform.h"
#include "partition_plan.h"
#include "qflow/core/json.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

// One node. Bytes and MACs are nullopt when a shape they need is not known. Cycles are
// set for BPU nodes whose MACs and bytes are known; CPU nodes have none (the cost figures
// describe the BPU only).
struct LayerPerf {
  int64_t index = 0;  // position in topological order
  std::string name;
  std::string op_type;
  bool bpu = false;
  int64_t subgraph = -1;
  std::optional<int64_t> macs;
  std::optional<int64_t> weight_bytes;      // initializers read
  std::optional<int64_t> activation_read_bytes;
  std::optional<int64_t> activation_write_bytes;
  std::optional<double> compute_cycles;     // macs / macs-per-cycle
  std::optional<double> memory_cycles;      // bytes / bytes-per-cycle
  std::optional<double> cycles;             // max(compute, memory)
};

struct PerfTotals {
  int64_t macs = 0;
  int64_t weight_bytes = 0;
  int64_t activation_read_bytes = 0;
  int64_t activation_write_bytes = 0;
  double cycles = 0.0;
  int64_t unknown_nodes = 0;  // nodes left out of the sums for lack of shapes
};

struct SubgraphPerf {
  int64_t id = 0;
  std::vector<int64_t> nodes;
  PerfTotals totals;
};

struct PerfEstimate {
  std::string model;
  BpuPlatform platform;
  bool quantized = false;                        // a quantization table was given
  std::vector<std::string> symbolic_dimensions;  // names (or "?") counted as 1, sorted, unique
  std::vector<LayerPerf> layers;                 // topological order
  std::vector<SubgraphPerf> subgraphs;
  PerfTotals bpu;  // all BPU nodes: the sum of the subgraphs
  PerfTotals cpu;  // CPU nodes: MACs and bytes, no cycles
};

// Bytes per element of platform memory traffic: the table's dtype for tensors of BPU nodes
// that it lists (int8 1, int16 2), otherwise the tensor's own dtype (float32 4).
// `plan` must come from the same graph (its nodes in topological order).
Expected<PerfEstimate> estimate_perf(const Graph& graph, const PartitionPlan& plan, const BpuPlatform& platform,
                                     const QuantTable& qparams);

std::string perf_report_text(const PerfEstimate& estimate);
// The JSON document (layout in docs/bpu-checker.md); keys sorted, deterministic bytes.
std::string perf_report_json(const PerfEstimate& estimate);
Json perf_report_value(const PerfEstimate& estimate);
// Writes any JSON value the way perf_report_json does: objects and arrays holding only
// scalars on one line, others one member per line; numbers that parsed as integers as
// integers, other numbers with three decimals. parse_json then json_dump gives the same bytes.
std::string perf_json_dump(const Json& value);

}  // namespace qflow
