// A small lowered model built by hand for the codec and C API tests: quantize -> conv2d in a
// BPU segment, dequantize in a CPU segment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/runtime/lowered_model.h"
#include "qflow/runtime/fixed_point.h"

namespace qflow::lowered::testing {

inline Attribute ints(std::string name, std::vector<int64_t> values) {
  Attribute a;
  a.name = std::move(name);
  a.ints = std::move(values);
  return a;
}

inline Tensor tensor(std::string name, ElemType type, std::vector<int64_t> shape, Quant quant = {}) {
  Tensor t;
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  t.quant = quant;
  return t;
}

// x f32 [1,1,4,4] -> quantize (i8, 1/32) -> conv2d 3x3 pad 1, 2 channels (i8, 0.1) -> dequantize -> y.
inline Model sample_model() {
  Model m;
  m.name = "tiny_conv";
  m.platform = "bayes";
  m.tensors.push_back(tensor("x", ElemType::f32, {1, 1, 4, 4}));
  m.tensors.push_back(tensor("x_q", ElemType::i8, {1, 1, 4, 4}, {1.0 / 32, 0}));
  Tensor w = tensor("w", ElemType::i8, {2, 1, 3, 3}, {0.01, 0});
  w.constant = true;
  for (int i = 0; i < 18; ++i) w.data.push_back(static_cast<uint8_t>(static_cast<int8_t>(i * 7 % 23 - 11)));
  m.tensors.push_back(w);
  Tensor b = tensor("b", ElemType::i32, {2});
  b.constant = true;
  for (int32_t v : {100, -250}) {
    const auto u = static_cast<uint32_t>(v);
    for (int k = 0; k < 4; ++k) b.data.push_back(static_cast<uint8_t>(u >> (8 * k)));
  }
  m.tensors.push_back(b);
  m.tensors.push_back(tensor("y_q", ElemType::i8, {1, 2, 4, 4}, {0.1, 3}));
  m.tensors.push_back(tensor("y", ElemType::f32, {1, 2, 4, 4}));
  m.inputs = {0};
  m.outputs = {5};

  fx::Multiplier mult;
  (void)fx::make_multiplier(1.0 / 32 * 0.01 / 0.1, mult);
  Segment bpu;
  bpu.id = 0;
  bpu.kind = SegmentKind::bpu;
  bpu.ops.push_back({"quantize", "x_quant", {0}, {1}, {}});
  bpu.ops.push_back({"conv2d",
                     "conv0",
                     {1, 2, 3},
                     {4},
                     {ints("clamp", {-128, 127}), ints("dilations", {1, 1}), ints("group", {1}),
                      ints("multiplier_mantissa", {mult.mantissa}), ints("multiplier_shift", {mult.shift}),
                      ints("pads", {1, 1, 1, 1}), ints("strides", {1, 1})}});
  Segment cpu;
  cpu.id = 1;
  cpu.kind = SegmentKind::cpu;
  cpu.ops.push_back({"dequantize", "y_dequant", {4}, {5}, {}});
  m.segments = {bpu, cpu};
  return m;
}

// The sample with a CPU op that lacks an optional output: y -> cpu.MaxPool 2x2 -> pooled, its
// Indices output absent (-1).
inline Model sample_model_with_absent_output() {
  Model m = sample_model();
  m.tensors.push_back(tensor("pooled", ElemType::f32, {1, 2, 3, 3}));
  m.outputs.push_back(6);
  m.segments[1].ops.push_back({"cpu.MaxPool", "pool", {5}, {6, -1}, {ints("kernel_shape", {2, 2})}});
  return m;
}

}  // namespace qflow::lowered::testing
