// The state the lowering rules share: the PTQ model's float view and quantization, the
// placement, the lowered model being built and its tensor bookkeeping. Internal to the
// bpu plugin; lowering.h is the entry point.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bpu_platform.h"
#include "qdq_model.h"
#include "qflow/core/status.h"
#include "qflow/runtime/lowered_model.h"
#include "qflow/runtime/fixed_point.h"

namespace qflow::lowering {

class Lowerer {
 public:
  Lowerer(const QdqModel& qdq, const BpuPlatform& platform) : qdq(qdq), graph(*qdq.view.graph), platform(platform) {}

  const QdqModel& qdq;
  const Graph& graph;  // the float view
  const BpuPlatform& platform;
  lowered::Model model;

  // Placement: BPU subgraph of a node, -1 for the CPU (filled before lowering).
  std::map<const Node*, int64_t> subgraph_of;
  // Relu / Clip nodes fused into the Conv / ConvTranspose / Gemm / MatMul producing their input.
  std::map<const Node*, const Node*> fused_activation;  // producer -> activation node
  std::set<const Node*> fused;                          // the activation nodes

  // Queries on the view ------------------------------------------------------------------
  const ActivationQuant* quant(const Value* v) const;
  Shape shape(const Value* v) const;  // static (checked when the model was read)
  const Tensor* constant(const Value* v) const;  // initializer or Constant node value
  const QuantizedConstant* quantized_constant(const Value* v) const;
  bool on_bpu(const Node* node) const;
  int64_t opset() const { return qdq.view.opset(""); }

  // Tensors ---------------------------------------------------------------------------------
  // Adds a tensor, making its name unique.
  int32_t add_tensor(lowered::Tensor tensor);
  // The quantized tensor of activation `v` as a BPU op reads it: the one a BPU op wrote, or
  // a `quantize` of its float tensor emitted now.
  Expected<int32_t> read_quantized(const Value* v);
  // The quantized tensor a BPU op writes for `v` (with v's quant).
  int32_t write_quantized(const Value* v);
  // The quantized tensor of `v` with a given quant (a fused activation writes its output's).
  int32_t write_quantized(const Value* v, const ActivationQuant& quant);
  int32_t temporary(const std::string& hint, const ActivationQuant& quant, const Shape& shape);
  // The float tensor of activation `v` as a CPU op (or the caller) reads it.
  Expected<int32_t> read_float(const Value* v);
  // The float (or i64) tensor a CPU op writes for `v`.
  int32_t write_float(const Value* v);
  // Integer weight / bias constant (int8, int16, int32) of a BPU op.
  Expected<int32_t> integer_constant(const Value* v);
  // A constant read by a CPU op: float initializers as f32, i64 as i64, DQ'd integer
  // weights and biases dequantized to f32.
  Expected<int32_t> cpu_constant(const Value* v);
  // An i32 table or parameter constant owned by one op.
  int32_t int32_constant(const std::string& hint, const std::vector<int32_t>& values);

  // Ops ---------------------------------------------------------------------------------------
  void emit(lowered::Op op);  // into the current segment; sorts the attributes
  // s_real as a multiplier; on power-of-two platforms it must be 2^-k (error naming the node).
  Expected<fx::Multiplier> multiplier(const Node& node, double real, const std::string& what) const;
  Status node_error(const Node& node, const std::string& message) const;

  // The segment being filled and the segment each tensor was written in.
  std::size_t current_segment = 0;
  std::map<int32_t, std::size_t> written_in;

 private:
  std::set<std::string> names_;
  std::map<std::string, int32_t> quantized_;  // view value -> quantized tensor
  std::map<std::string, int32_t> float_;      // view value -> float tensor
  std::map<std::string, int32_t> constants_;  // view value -> constant tensor
  std::string float_name(const Value* v) const;
};

// Helpers shared by the rules ---------------------------------------------------------------
fx::QType qtype_of(lowered::ElemType type);
fx::QParams qparams_of(const ActivationQuant& quant);
lowered::Quant quant_of(const ActivationQuant& quant);
lowered::Op make_op(const std::string& type, const Node& node, std::vector<int32_t> inputs,
                    std::vector<int32_t> outputs);
void set_ints(lowered::Op& op, const std::string& name, std::vector<int64_t> values);
void set_multiplier(lowered::Op& op, const std::string& name, fx::Multiplier m);
void set_multipliers(lowered::Op& op, const std::string& name, const std::vector<fx::Multiplier>& ms);
void set_strings(lowered::Op& op, const std::string& name, std::vector<std::string> values);
// The output type's range intersected with [lo, hi] (real bounds, quantized with `quant`).
fx::Clamp clamp_of(const ActivationQuant& quant, double lo, double hi);
void set_clamp(lowered::Op& op, const fx::Clamp& clamp, const ActivationQuant& quant);
std::string no_lowering(const Node& node, const std::string& detail);
std::string node_text(const Node& node);  // "Conv 'name'"

// Real bounds of a Relu / Clip node (constant bounds only); false when not constant.
bool activation_bounds(const Lowerer& l, const Node& node, double& lo, double& hi);

// The rules, one concept per file. `gap` returns "" when the node lowers, otherwise the
// reason it does not (the node then runs on the CPU); `lower` emits its ops.
std::string gap_linear(const Lowerer& l, const Node& node);  // lower_linear.cpp
Status lower_linear(Lowerer& l, const Node& node);
std::string gap_eltwise(const Lowerer& l, const Node& node);  // lower_eltwise.cpp
Status lower_eltwise(Lowerer& l, const Node& node);
std::string gap_pool(const Lowerer& l, const Node& node);  // lower_pool.cpp (pools, Resize)
Status lower_pool(Lowerer& l, const Node& node);
std::string gap_table(const Lowerer& l, const Node& node);  // lower_table.cpp (LUTs, Softmax, LayerNorm)
Status lower_table(Lowerer& l, const Node& node);
std::string gap_layout(const Lowerer& l, const Node& node);  // lower_layout.cpp (reshape, transpose, slice)
Status lower_layout(Lowerer& l, const Node& node);
Status lower_cpu(Lowerer& l, const Node& node);  // lower_cpu.cpp

// Requantizes `x` (quant `from`) into `y` (quant `to`) with an optional clamp in real units.
Status emit_requantize(Lowerer& l, const Node& node, int32_t x, const ActivationQuant& from, int32_t y,
                       const ActivationQuant& to, double lo, double hi);

// Emits `op` (its first input set to `x`) computing at node input 0's quantization and writes
// node output 0: directly when both quantizations are equal, else through a temporary and a
// requantize (data movement, max pooling and Resize keep the scale).
Status emit_at_input_quant(Lowerer& l, const Node& node, lowered::Op op, int32_t x);
bool same_quant(const ActivationQuant& a, const ActivationQuant& b);

}  // namespace qflow::lowering
