// ModelStats: what `qflow inspect` and reports show about a model (I/O, ops, parameters, MACs).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

struct ValueStats {
  std::string name;
  std::optional<ValueType> type;  // nullopt when neither declared nor inferred
};

struct NodeStats {
  std::string name;
  std::string op_type;  // prefixed "domain::" outside the default ONNX domain
  std::vector<ValueStats> outputs;
  // Multiply-accumulates of one run; nullopt for ops that are not counted or whose shapes
  // are unknown (see compute_model_stats).
  std::optional<int64_t> macs;
};

struct ModelStats {
  std::vector<ValueStats> inputs;   // runtime inputs only (initializers excluded)
  std::vector<ValueStats> outputs;
  std::map<std::string, int64_t> op_histogram;  // op type -> node count, sorted by op type
  std::vector<NodeStats> nodes;                 // in topological order
  int64_t initializer_count = 0;
  int64_t parameter_count = 0;  // elements of all initializers, whatever their dtype
  int64_t parameter_bytes = 0;
  int64_t total_macs = 0;           // sum over the nodes whose MACs are known
  int64_t macs_unknown_nodes = 0;   // counted op types whose shapes were not known
  bool symbolic_dims_in_macs = false;  // a symbolic dimension was taken as 1
};

// Op types whose MACs are counted: Conv, ConvTranspose, ConvInteger, QLinearConv, Gemm,
// MatMul, MatMulInteger, QLinearMatMul.
const std::vector<std::string>& mac_counted_ops();

// Computes statistics from the graph as it is; shapes of intermediate values come from
// Value::type, so run infer_shapes first for per-node MACs.
// MACs count one multiply-accumulate per product term of the op's defining sum: for Conv,
// numel(Y) * (C/group) * prod(kernel); for ConvTranspose, numel(X) * (M/group) * prod(kernel);
// for Gemm and MatMul, numel(Y) * K. Bias additions, activations and normalisation are not
// counted. Symbolic dimensions (e.g. a batch "N") count as 1, so the figure is per sample;
// a dimension with neither value nor name makes that node's MACs unknown.
Expected<ModelStats> compute_model_stats(const Model& model);

}  // namespace qflow
