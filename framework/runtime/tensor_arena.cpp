// TensorArena: free lists of dead intermediates' buffers, counted by the values holding them.
#include "framework/runtime/tensor_arena.h"

namespace qflow {

Expected<Tensor> TensorArena::acquire(DType dtype, const Shape& shape) {
  const int64_t numel = shape_numel(shape);
  auto it = free_.find({dtype, numel});
  if (it != free_.end() && !it->second.empty()) {
    Tensor reused = it->second.back().reshaped(shape);
    it->second.pop_back();
    return reused;
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor made, Tensor::make(dtype, shape));
  if (made.raw_data()) holders_.emplace(made.raw_data(), 0);
  return made;
}

void TensorArena::retain(const Tensor& tensor) {
  if (!tensor.raw_data()) return;
  auto it = holders_.find(tensor.raw_data());
  if (it != holders_.end()) ++it->second;
}

void TensorArena::release(const Tensor& tensor) {
  if (!tensor.raw_data()) return;
  auto it = holders_.find(tensor.raw_data());
  if (it == holders_.end() || --it->second > 0) return;
  free_[{tensor.dtype(), tensor.numel()}].push_back(tensor);
}

}  // namespace qflow
