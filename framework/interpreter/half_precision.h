// Half-precision (float16, bfloat16) nodes computed in float32, as ONNX Runtime's CPU
// provider does for ops without half kernels: inputs widened, outputs rounded back.
#pragma once

#include <vector>

#include "framework/interpreter/kernel.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Whether `node` computes half-precision values through float32: every op but those that
// only move or select elements (Reshape, Concat, Slice, Gather, Cast, Shape, ...), whose
// kernels take any dtype and must not round what they move.
bool computes_half_in_float32(const Node& node);

// The half type among `tensors` (Float16 or BFloat16), or Undefined.
DType half_type_of(const std::vector<const Tensor*>& tensors);

// Float32 copies of the half tensors among `tensors` (others as they are), written to
// `widened`, which owns them; returns the pointers to use instead.
std::vector<const Tensor*> widen_half(const std::vector<const Tensor*>& tensors, std::vector<Tensor>& widened);

// Runs `kernel` on `context` with its half inputs widened to float32, then rounds each
// float32 output back to `half`.
Status compute_through_float32(const Kernel& kernel, KernelContext& context, DType half);

}  // namespace qflow
