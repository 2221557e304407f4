// QdqModel: a PTQ (QDQ) model read as float view + quantization: which activation is
// quantized how, which weights and biases are integer initializers with which scales.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/runtime/lowered_model.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

// The quantization of one activation (per tensor), from its QuantizeLinear node.
struct ActivationQuant {
  double scale = 1.0;
  int32_t zero_point = 0;
  lowered::ElemType type = lowered::ElemType::i8;  // from the zero point's dtype
};

// A weight or bias: an integer initializer behind a DequantizeLinear.
struct QuantizedConstant {
  Tensor values;               // int8 / int16 weight, int32 bias
  std::vector<double> scales;  // one, or one per channel along `axis`
  std::vector<int64_t> zero_points;
  int64_t axis = -1;
  std::string dequantized_name;  // the DequantizeLinear output in the PTQ model
};

struct QdqModel {
  // The model with the Q/DQ pairs removed: consumers read the original value names, the
  // quantized weights and biases are the integer initializers (their DQ removed too).
  Model view;
  // Activation scales (and the weights' dtypes and scales) for BpuBackend::plan().
  QuantTable table;
  std::map<std::string, ActivationQuant> activations;  // view value name -> quant
  std::map<std::string, QuantizedConstant> constants;  // view initializer name -> integer data
  // View graph outputs -> the PTQ model's graph output names (they differ when the
  // producer's output was renamed `<name>_float` to put the Q/DQ pair behind it).
  std::map<std::string, std::string> output_names;
};

// Fails, naming the node or value, when the model is not a PTQ model (a Conv / Gemm /
// MatMul weight or bias that is float, a float activation without a Q/DQ pair, a
// per-axis activation quantization) or a value lacks a static shape.
Expected<QdqModel> read_qdq_model(const Model& ptq);

lowered::ElemType elem_type_of(DType dtype);  // f32 for dtypes with no lowered counterpart

}  // namespace qflow
