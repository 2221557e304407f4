// Internals shared by the lowered-model validator, the executor and its kernels: attribute
// access, shape arithmetic, broadcasting and the two kernel entry points (integer BPU ops,
// float CPU ops). Not part of the runtime's API.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/runtime/lowered_model.h"
#include "fixed_point/fast_kernels.h"
#include "qflow/runtime/fixed_point.h"
#include "qflow/runtime/executor.h"

namespace qflow::lowered::detail {

using Shape = std::vector<int64_t>;

// Shapes of at most 2^40 elements (validate() enforces it for every tensor).
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

// "conv2d 'Conv_3'": how messages name an op.
std::string op_label(const Op& op);
// A name as messages quote it: control characters replaced by '?', at most 200 characters.
std::string quoted_name(const std::string& name);
// A message on one line: control characters replaced by '?', at most 2000 characters.
std::string one_line(const std::string& message);
std::string shape_string(const Shape& shape);
// Product of the dimensions; -1 when a dimension is negative or the product reaches 2^40.
int64_t element_count(const Shape& shape);

const Attribute* find_attribute(const Op& op, std::string_view name);
// The ints of an attribute, or `fallback` when it is absent.
std::vector<int64_t> ints_or(const Op& op, std::string_view name, std::vector<int64_t> fallback);
int64_t int_or(const Op& op, std::string_view name, int64_t fallback);
double float_or(const Op& op, std::string_view name, double fallback);
std::string string_or(const Op& op, std::string_view name, std::string fallback);

// Integer ops of BPU segments (quantize and dequantize included: they run in both kinds).
bool is_integer_op(std::string_view type);
bool is_boundary_op(std::string_view type);  // quantize, dequantize

bool to_qtype(ElemType type, fx::QType& out);

// The parameters of an input_convert op from its attributes and declared tensors (x the u8
// frame, y [N, C, H, W]); false with `error` set when they are inconsistent.
bool input_convert_params(const Model& model, const Op& op, fx::InputConvertParams& p, std::string* error = nullptr);
fx::QParams qparams(const Tensor& t);  // t must be quantized

// numpy broadcasting of two shapes; false when they are incompatible.
bool broadcast_shape(const Shape& a, const Shape& b, Shape& out);
// dst[o] = src[base + sum_i index_i(o) * strides[i]] for every index of `out` (row-major):
// the copy behind broadcasting, transposes and slices.
template <typename T>
void strided_gather(const T* src, int64_t base, const std::vector<int64_t>& strides, const Shape& out, T* dst) {
  const size_t rank = out.size();
  const int64_t total = element_count(out);
  if (total <= 0) return;
  if (rank == 0) {
    dst[0] = src[base];
    return;
  }
  std::vector<int64_t> index(rank, 0);
  const int64_t inner = out[rank - 1], inner_stride = strides[rank - 1];
  int64_t offset = base;
  for (int64_t o = 0; o < total; o += inner) {
    if (inner_stride == 1)
      for (int64_t j = 0; j < inner; ++j) dst[o + j] = src[offset + j];
    else if (inner_stride == 0)  // a broadcast row
      std::fill(dst + o, dst + o + inner, src[offset]);
    else
      for (int64_t j = 0; j < inner; ++j) dst[o + j] = src[offset + j * inner_stride];
    for (size_t axis = rank - 1; axis-- > 0;) {  // advance every axis but the last
      ++index[axis];
      offset += strides[axis];
      if (index[axis] < out[axis]) break;
      offset -= strides[axis] * out[axis];
      index[axis] = 0;
    }
  }
}

// Row-major strides of a shape.
inline std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Copies `src` (shape `in`) into `dst` (shape `out`, which `in` broadcasts to).
template <typename T>
void broadcast_to(const T* src, const Shape& in, const Shape& out, T* dst) {
  std::vector<int64_t> strides(out.size(), 0);
  const std::vector<int64_t> in_strides = strides_of(in);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[in.size() - 1 - i] != 1) strides[out.size() - 1 - i] = in_strides[in.size() - 1 - i];
  strided_gather(src, 0, strides, out, dst);
}

// The transposed shape; false when perm is not a permutation of the axes.
bool transpose_shape(const Shape& in, const std::vector<int64_t>& perm, Shape& out);
template <typename T>
void transpose(const T* src, const Shape& in, const std::vector<int64_t>& perm, T* dst) {
  const std::vector<int64_t> in_strides = strides_of(in);
  Shape out(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out[i] = in[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  strided_gather(src, 0, strides, out, dst);
}

// The fast kernels' state of an op, made when the model is loaded: the instruction set, and
// for conv2d and matmul the packed constant weights.
struct PackedOp {
  fx::fast::Isa isa = fx::fast::Isa::Portable;
  std::optional<fx::fast::PackedConv2D> conv;
  std::optional<fx::fast::PackedMatMul> matmul;
  std::optional<fx::fast::PackedConvTranspose2D> conv_transpose;
};
// Packs `op` when the fast kernels compute it (conv2d and matmul with constant weights and
// bias, add, sub, mul, lut and the pools); `constants[i]` is the value of constant input i,
// null otherwise. Null when it does not apply.
std::shared_ptr<const PackedOp> pack_integer_op(const Model& model, const Op& op,
                                                const std::vector<const Value*>& constants, fx::fast::Isa isa);

// Kernels. `ins[i]` is null for an absent optional input; `outs` are allocated with the
// declared type and shape. They return an error without the op label (the executor adds it).
// `packed`, when given, comes from pack_integer_op for this op.
Status run_integer_op(const Model& model, const Op& op, const std::vector<const Value*>& ins,
                      const std::vector<Value*>& outs, const PackedOp* packed = nullptr);
Status run_cpu_op(const Model& model, const Op& op, const std::vector<const Value*>& ins,
                  const std::vector<Value*>& outs);

}  // namespace qflow::lowered::detail
