// First-order BPU cost: multiply-accumulates of the MAC-bound ops, and the time they take at a platform's rate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bpu_platform.h"
#include "qflow/ir/graph.h"

namespace qflow {

// MACs of Conv, ConvTranspose, Gemm and MatMul (one per product term of the op's sum;
// biases excluded) from declared shapes, symbolic dimensions counted as 1 (per sample);
// nullopt for these ops when a rank is not known, 0 for every other op.
std::optional<int64_t> node_macs(const Graph& graph, const Node& node);

// Elements of a value from its initializer or declared shape, symbolic dimensions counted
// as 1 (their names, or "?" when unnamed, are appended to `symbolic` when given); nullopt
// when the rank is not known.
std::optional<int64_t> value_elements(const Graph& graph, const Value* value, std::vector<std::string>* symbolic = nullptr);

// Milliseconds to do `macs` at the platform's macs-per-cycle and clock: a lower bound that
// ignores memory traffic.
double compute_milliseconds(const BpuCost& cost, int64_t macs);

// Roofline cycles of one BPU layer: compute = macs / macs-per-cycle, memory = bytes /
// (bandwidth-gbps * 1e9 / (frequency-mhz * 1e6)), the layer takes the larger of the two
// (compute and memory traffic overlap perfectly; neither the on-chip buffers nor the
// pipeline fill are modelled).
// Bytes the platform moves per cycle: bandwidth-gbps * 1e9 / (frequency-mhz * 1e6).
double bytes_per_cycle(const BpuCost& cost);

struct LayerCycles {
  double compute = 0.0;
  double memory = 0.0;
  double total() const { return compute > memory ? compute : memory; }
};
LayerCycles layer_cycles(const BpuCost& cost, int64_t macs, int64_t bytes);

}  // namespace qflow
