// QDQ model builder: a float model plus a calibration table turned into an ONNX model with
// QuantizeLinear/DequantizeLinear pairs that ONNX Runtime and qflow's interpreter both run.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

// A weight quantized symmetrically: q = clamp(round_half_even(w / scale[c]), -qmax, qmax).
struct QuantizedWeight {
  Tensor values;             // int8 or int16, the weight's shape
  std::vector<float> scale;  // one per channel along `axis`, or one
  int64_t axis = -1;         // -1: per tensor
  double qmax = 127.0;       // the largest |q|: weight_qmax() of the dtype and range
};

// Quantized weights by weight name and grid, shared by builds from copies of one float model
// (whose initializers keep their names and values): a search that builds a PTQ model per
// candidate quantizes each weight once. One build at a time.
struct WeightQuantCache {
  using Key = std::tuple<std::string, int64_t, DType, bool, int>;  // name, axis, dtype, reduce_range, bits
  std::map<Key, QuantizedWeight> weights;
};

struct QdqOptions {
  // false: activations only (the calibrated model); true: also weights (integer initializers
  // + DequantizeLinear) and biases (int32), the PTQ model.
  bool weights = true;
  // Bias correction: per node name, one value per output channel subtracted from the float
  // bias before it is quantized (a zero bias is added when the node has none).
  std::map<std::string, std::vector<double>> bias_shift;
  // Not owned; null: every weight is quantized by this build.
  WeightQuantCache* weight_cache = nullptr;
};

// The axis of a node's weight (input 1) that indexes output channels: Conv 0,
// ConvTranspose 1, Gemm 1 (0 with transB=1), MatMul the last. Fails for other ops.
Expected<int64_t> weight_channel_axis(const Node& node, const Tensor& weight);

// Quantizes a float32 weight to `dtype`, q in [-weight_qmax, weight_qmax] (quant_math.h: the
// grid of `bits` when > 0), per channel along `axis` (or per tensor when axis < 0).
Expected<QuantizedWeight> quantize_weight(const Tensor& weight, int64_t axis, DType dtype, bool reduce_range = false,
                                          int bits = 0);

// The quantized weight dequantized back to float32 (what the DequantizeLinear computes).
Tensor dequantize_weight(const QuantizedWeight& weight);

// The constant float32 weight of a Conv, ConvTranspose, Gemm or MatMul that the PTQ model
// quantizes (null when the node is not one, its spec says quantize = false, or the weight is
// not a float32 initializer that cannot be overridden as a graph input).
const Tensor* quantizable_weight(const Graph& graph, const Node& node, const QuantSpec& spec);

// Whether bias correction can shift the bias of `node`: a Conv or Gemm whose bias is absent
// or a constant float32 1-D tensor with one value per output channel.
bool bias_correction_applies(const Graph& graph, const Node& node, const Tensor& weight);

// Output channels of a Conv, ConvTranspose, Gemm or MatMul with weight `weight`.
int64_t output_channels(const Node& node, const Tensor& weight);

// The spec of a tensor: its producer's, or the whole model's for graph inputs.
QuantSpec tensor_spec(const Value& value, const QuantConfig& config);

// Whether build_qdq_model quantizes `value` (a node output or graph input with table
// parameters) under `config`: its producer quantizes or a quantized node reads it, and
// something reads it or it is a computed graph output.
bool quantizes_activation(const Graph& graph, const Value& value, const QuantConfig& config);

// The spec of every tensor in `statistics`: its producer's; the whole model's for graph
// inputs, for tensors not in the model and when `model` is null. `config` may be null.
std::map<std::string, QuantSpec> tensor_specs(const Model* model, const std::map<std::string, TensorStatistics>& statistics,
                                              const QuantConfig* config);

// The opset the model needs for `table` (13 for per-axis 8-bit, 21 for 16-bit types). When
// the model imports a lower default-domain opset in [13, 21) it is raised by upgrade_opset
// (framework/quant/opset_upgrade.h), whose adapters rewrite the ops that changed meaning in
// between, if every node can be adapted and the interpreter has a kernel for every op at
// the new version; otherwise an error names the nodes and ops in the way. Models below opset
// 13 are refused.
Status ensure_quant_opset(Model& model, bool needs_16_bit);

// Builds the QDQ model in place (docs/quantization.md): the scale alignment rules are
// applied to `table` first; `config` may be null (all defaults). The float model must be
// valid; the result passes Graph::validate() and libonnx's checker.
Status build_qdq_model(Model& model, const QuantTable& table, const QuantConfig* config, const QdqOptions& options);

}  // namespace qflow
