// The lowered model: a quantized network as the integer program a BPU runs, with the CPU
// fallback segments as float ops in between. A backend produces it from the PTQ model; the
// host serializes it as `<name>_quantized_model.bc` (plugins/backends/bpu/bc_codec.h) and the device
// runtime (runtime/lowered) executes it and stores it inside the `.hbm`. Standard library
// only, so the runtime can ship it. docs/lowered-model.md specifies every op; the table
// below is the summary both sides are written against.
//
// Conventions
// * Shapes are static. Every tensor has one; an op's output tensor declares the shape the
//   op must produce (the executor checks it).
// * Quantized tensors (i8, u8, i16, u16) carry per-tensor `quant` (real = scale * (q - zp)).
//   Weights are quantized tensors too (zero point 0; their per-channel scales are folded into
//   the multipliers, so `quant` is informational for them). i32 constants are biases or tables.
// * A multiplier is an attribute of two ints {mantissa, shift} (fx::Multiplier); a list of
//   per-channel multipliers is two attributes `<name>_mantissa` and `<name>_shift` of equal
//   length (1 or the channel count).
// * `clamp` is {min, max} in quantized output units, already intersected with the output
//   type's range (so a plain op has the type's range).
// * Attributes are kept sorted by name; absent optional inputs are -1.
//
// Boundary ops (either segment kind):
//   quantize        [x:f32] -> [y:q]          round half to even, saturate (fx::quantize)
//   dequantize      [x:q] -> [y:f32]
// BPU segment ops (integer; inputs and outputs quantized unless stated):
//   conv2d          [x, w:i8|i16 const, bias:i32 const | -1] -> [y]
//                   ints: group, strides[2], pads[4] (top, left, bottom, right), dilations[2],
//                   multiplier_mantissa[M|1], multiplier_shift[M|1], clamp[2]
//   conv_transpose2d  as conv2d plus output_padding[2]; w is [C, M/group, kH, kW]
//   matmul          [a, b, bias:i32 const | -1] -> [y]; a [..., M, K]; b const [K, N] (or
//                   [N, K] with b_transposed = 1) or an activation [..., K, N] with the same
//                   leading dimensions as a. ints: b_transposed, multiplier_mantissa[N|1],
//                   multiplier_shift[N|1], clamp[2]
//   add, sub        [a, b] -> [y]; numpy broadcasting. ints: left_shift, a_multiplier[2],
//                   b_multiplier[2], output_multiplier[2], clamp[2] (fx::AddParams)
//   mul             [a, b] -> [y]; broadcasting. ints: multiplier[2], clamp[2]
//   requantize      [x] -> [y]: clamp(requantize(x - zx, multiplier) + zy). ints: multiplier[2],
//                   clamp[2]. Standalone Relu / Clip / a type or scale change.
//   concat          [x...] -> [y]; ints: axis (non-negative). Inputs rescaled to y (fx::concat).
//   max_pool, average_pool  [x] -> [y]; ints: kernel[2], strides[2], pads[4], dilations[2]
//                   (max_pool), count_include_pad (average_pool)
//   global_average_pool     [x] -> [y]
//   resize          [x] -> [y] (same quant); strings: mode ("nearest" | "linear"),
//                   coordinate_mode ("asymmetric" | "half_pixel" | "align_corners"),
//                   nearest_mode ("round_prefer_floor" | "round_prefer_ceil" | "floor" | "ceil")
//   lut             [x, table:i32 const] -> [y]; ints: segment_bits (0 for 8-bit inputs)
//   softmax         [x, exp_table:i32 const (4097)] -> [y] over the last axis;
//                   ints: segment_bits, output_multiplier[2]
//   layernorm       [x, gamma:i32 const, beta:i32 const] -> [y] over the last axis;
//                   ints: epsilon, output_multiplier[2]
//   reshape         [x] -> [y]: same data, y's shape (Reshape, Flatten, Squeeze, Unsqueeze)
//   transpose       [x] -> [y]; ints: perm
//   slice           [x] -> [y]; ints: starts, ends, axes, steps (normalized: one entry per
//                   sliced axis, starts/ends clamped into range, non-negative axes)
// CPU segment ops: `cpu.<OnnxOpType>` (e.g. cpu.Gemm) on f32 (and i64 shape) tensors, with
// the ONNX node's attributes (ints, floats, strings) and constant inputs as constant
// tensors. runtime/include/qflow/runtime/cpu_ops.h lists the op types the runtime implements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qflow::lowered {

// Codes 1..6 equal the .hbm DType codes.
enum class ElemType : uint8_t { f32 = 1, i8 = 2, u8 = 3, i16 = 4, u16 = 5, i32 = 6, i64 = 7 };

struct Quant {
  double scale = 1.0;
  int32_t zero_point = 0;

  bool operator==(const Quant&) const = default;
};

struct Tensor {
  std::string name;
  ElemType type = ElemType::f32;
  std::vector<int64_t> shape;
  Quant quant;                // quantized types only
  bool constant = false;
  std::vector<uint8_t> data;  // constants: elements little-endian in `type`, row-major

  bool operator==(const Tensor&) const = default;
};

struct Attribute {
  std::string name;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  bool operator==(const Attribute&) const = default;
};

struct Op {
  std::string type;                 // the table above
  std::string name;                 // the source node(s), for messages
  std::vector<int32_t> inputs;      // tensor indices, -1 for an absent optional input
  std::vector<int32_t> outputs;
  std::vector<Attribute> attributes;  // sorted by name, names unique

  bool operator==(const Op&) const = default;
};

enum class SegmentKind : uint8_t { bpu = 0, cpu = 1 };

struct Segment {
  uint32_t id = 0;
  SegmentKind kind = SegmentKind::bpu;
  std::vector<Op> ops;  // in execution order

  bool operator==(const Segment&) const = default;
};

struct Model {
  std::string name;
  std::string platform;
  std::vector<Tensor> tensors;
  std::vector<int32_t> inputs;   // f32 tensors the caller feeds
  std::vector<int32_t> outputs;  // f32 tensors the caller reads
  std::vector<Segment> segments;  // execution order

  bool operator==(const Model&) const = default;
};

// Bytes per element of `type`.
inline size_t element_size(ElemType type) {
  switch (type) {
    case ElemType::i8: case ElemType::u8: return 1;
    case ElemType::i16: case ElemType::u16: return 2;
    case ElemType::f32: case ElemType::i32: return 4;
    case ElemType::i64: return 8;
  }
  return 0;
}

// "f32", "i8", ...: how messages and profiles name `type`.
inline const char* type_name(ElemType type) {
  switch (type) {
    case ElemType::f32: return "f32";
    case ElemType::i8: return "i8";
    case ElemType::u8: return "u8";
    case ElemType::i16: return "i16";
    case ElemType::u16: return "u16";
    case ElemType::i32: return "i32";
    case ElemType::i64: return "i64";
  }
  return "?";
}

inline bool is_quantized(ElemType type) {
  return type == ElemType::i8 || type == ElemType::u8 || type == ElemType::i16 || type == ElemType::u16;
}

}  // namespace qflow::lowered
