// Quantization configuration: how each tensor is quantized, with overrides by node name >
// op type > whole model (the pipeline's [quantization] table, docs/quantization.md).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "qflow/ir/dtype.h"

namespace qflow {

// The settings that apply to one node: its output activations and its weights.
struct QuantSpec {
  DType activation_dtype = DType::Int8;  // Int8, UInt8, Int16 or UInt16
  // 2..16: activations on the grid [-2^(b-1), 2^(b-1)-1] (signed) or [0, 2^b-1] (unsigned)
  // inside the activation_dtype container (8-bit up to 8 bits, 16-bit above, the signedness
  // of the dtype); 0: the container's full range.
  int activation_bits = 0;
  bool symmetric = true;                 // activations: zero point 0 (signed types only)
  bool power_of_two = false;             // scales rounded up to a power of two
  DType weight_dtype = DType::Int8;      // Int8 or Int16, always symmetric
  // 2..16: weights on the symmetric grid [-(2^(b-1)-1), 2^(b-1)-1] inside the weight_dtype
  // container (Int8 up to 8 bits, Int16 above); 0: the container's full symmetric range.
  int weight_bits = 0;
  bool per_channel = true;               // weights: one scale per output channel
  // int8 weights in [-64, 64] instead of [-127, 127]: ONNX Runtime's x86 int8 kernels without
  // VNNI add pairs of u8 x s8 products in 16 bits, and 2 * 255 * 64 still fits
  // (docs/quantization.md, "QDQ models in ONNX Runtime"). int16 weights are not affected.
  bool reduce_range = false;
  bool quantize = true;                  // false: the node's outputs and weights stay float
};

// One override entry: only the fields it sets replace the inherited ones.
struct QuantOverride {
  std::optional<DType> activation_dtype;
  std::optional<int> activation_bits;
  std::optional<bool> symmetric;
  std::optional<bool> power_of_two;
  std::optional<DType> weight_dtype;
  std::optional<int> weight_bits;
  std::optional<bool> per_channel;
  std::optional<bool> reduce_range;
  std::optional<bool> quantize;

  void apply_to(QuantSpec& spec) const {
    // An activation dtype alone means its full range; activation bits choose the container's
    // width and keep the signedness of the dtype in force.
    if (activation_dtype) {
      spec.activation_dtype = *activation_dtype;
      spec.activation_bits = 0;
    }
    if (activation_bits) {
      spec.activation_bits = *activation_bits;
      const bool is_signed = spec.activation_dtype == DType::Int8 || spec.activation_dtype == DType::Int16;
      if (*activation_bits <= 8) spec.activation_dtype = is_signed ? DType::Int8 : DType::UInt8;
      else spec.activation_dtype = is_signed ? DType::Int16 : DType::UInt16;
    }
    if (symmetric) spec.symmetric = *symmetric;
    if (power_of_two) spec.power_of_two = *power_of_two;
    // A weight dtype alone means its full range; weight bits choose their container.
    if (weight_dtype) {
      spec.weight_dtype = *weight_dtype;
      spec.weight_bits = 0;
    }
    if (weight_bits) {
      spec.weight_bits = *weight_bits;
      spec.weight_dtype = *weight_bits <= 8 ? DType::Int8 : DType::Int16;
    }
    if (per_channel) spec.per_channel = *per_channel;
    if (reduce_range) spec.reduce_range = *reduce_range;
    if (quantize) spec.quantize = *quantize;
  }
  // The keys `other` sets replace this entry's (an entry over another, as a node's over its op
  // type's). A dtype `other` sets without bits means that dtype's full range, as in apply_to:
  // precision search raising a node with a narrowed grid to int16 drops the grid.
  void merge_from(const QuantOverride& other) {
    if (other.activation_dtype) {
      activation_dtype = other.activation_dtype;
      if (!other.activation_bits) activation_bits.reset();
    }
    if (other.activation_bits) activation_bits = other.activation_bits;
    if (other.symmetric) symmetric = other.symmetric;
    if (other.power_of_two) power_of_two = other.power_of_two;
    if (other.weight_dtype) {
      weight_dtype = other.weight_dtype;
      if (!other.weight_bits) weight_bits.reset();
    }
    if (other.weight_bits) weight_bits = other.weight_bits;
    if (other.per_channel) per_channel = other.per_channel;
    if (other.reduce_range) reduce_range = other.reduce_range;
    if (other.quantize) quantize = other.quantize;
  }
  bool empty() const {
    return !activation_dtype && !activation_bits && !symmetric && !power_of_two && !weight_dtype && !weight_bits && !per_channel && !reduce_range &&
           !quantize;
  }
};

struct QuantConfig {
  QuantOverride model;                          // whole model
  std::map<std::string, QuantOverride> op_types;  // by ONNX op type
  std::map<std::string, QuantOverride> nodes;     // by node name

  // The spec of a node: defaults, then model, then op type, then node name.
  QuantSpec resolve(const std::string& node_name, const std::string& op_type) const {
    QuantSpec spec;
    model.apply_to(spec);
    if (auto it = op_types.find(op_type); it != op_types.end()) it->second.apply_to(spec);
    if (auto it = nodes.find(node_name); it != nodes.end()) it->second.apply_to(spec);
    return spec;
  }
  bool empty() const { return model.empty() && op_types.empty() && nodes.empty(); }
};

// "int8" -> Int8 for the quantized types qflow supports; nullopt otherwise.
inline std::optional<DType> quant_dtype_from_name(std::string_view name) {
  if (name == "int8") return DType::Int8;
  if (name == "uint8") return DType::UInt8;
  if (name == "int16") return DType::Int16;
  if (name == "uint16") return DType::UInt16;
  return std::nullopt;
}

}  // namespace qflow
