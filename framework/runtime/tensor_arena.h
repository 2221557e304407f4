// TensorArena: recycles the buffers of intermediate values within one executor run.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Buffers handed out by acquire() are counted while values hold them; when the last value
// holding one is released the buffer goes to a free list keyed by dtype and element count,
// and the next acquire() of that size takes it instead of allocating (and zero-filling) a
// new one. Values are released in the order the graph's liveness dictates, so the reuse
// pattern is the same on every run.
class TensorArena {
 public:
  // An output tensor with unspecified contents.
  Expected<Tensor> acquire(DType dtype, const Shape& shape);
  // A value now holds `tensor` (a no-op for buffers the arena did not hand out).
  void retain(const Tensor& tensor);
  // A value holding `tensor` died.
  void release(const Tensor& tensor);

 private:
  std::unordered_map<const std::byte*, int> holders_;  // buffers from acquire() -> live values
  std::map<std::pair<DType, int64_t>, std::vector<Tensor>> free_;
};

}  // namespace qflow
