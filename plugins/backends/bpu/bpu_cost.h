// First-order BPU cost: multiply-accumulates of the MAC-bound ops, and the time they take at a platform's rate.
#pragma once

#include <cstdint>
#include <optional>

#include "bpu_platform.h"
#include "qflow/ir/graph.h"

namespace qflow {

// MACs of Conv, ConvTranspose, Gemm and MatMul (one per product term of the op's sum;
// biases excluded) from declared shapes, symbolic dimensions counted as 1 (per sample);
// nullopt for these ops when a rank is not known, 0 for every other op.
std::optional<int64_t> node_macs(const Graph& graph, const Node& node);

// Milliseconds to do `macs` at the platform's macs-per-cycle and clock: a lower bound that
// ignores memory traffic.
double compute_milliseconds(const BpuCost& cost, int64_t macs);

}  // namespace qflow
