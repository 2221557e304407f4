// TensorArena: free lists of dead intermediates' buffers, counted by the values holding them.
#include "framework/interpreter/tensor_arena.h"

namespace qflow {

Expected<Tensor> TensorArena::acquire(DType dtype, const Shape& shape) {
  auto it = free_.find({dtype, shape_numel(shape)});
  if (it != free_.end() && !it->second.empty()) {
    Buffer& buffer = buffers_[it->second.back()];
    it->second.pop_back();
    buffer.used = true;
    return buffer.tensor.reshaped(shape);
  }
  // Kernels write every element of what allocate() gives them: no zero fill.
  QFLOW_ASSIGN_OR_RETURN(Tensor made, Tensor::make_uninitialized(dtype, shape));
  if (made.raw_data()) {
    index_.emplace(made.raw_data(), buffers_.size());
    buffers_.push_back(Buffer{made, 0, true});
  }
  return made;
}

void TensorArena::retain(const Tensor& tensor) {
  if (!tensor.raw_data()) return;
  auto it = index_.find(tensor.raw_data());
  if (it != index_.end()) ++buffers_[it->second].holders;
}

void TensorArena::release(const Tensor& tensor) {
  if (!tensor.raw_data()) return;
  auto it = index_.find(tensor.raw_data());
  if (it == index_.end()) return;
  Buffer& buffer = buffers_[it->second];
  if (--buffer.holders > 0) return;
  // Besides the arena's handle and the dying value's, someone kept the tensor (a value hook
  // may): it is not handed out again, and reclaim() gives it up if it is still held then.
  if (buffer.tensor.use_count() > 2) return;
  free_[{buffer.tensor.dtype(), buffer.tensor.numel()}].push_back(it->second);
}

bool TensorArena::handed_out_unheld(const Tensor& tensor) const {
  if (!tensor.raw_data()) return false;
  auto it = index_.find(tensor.raw_data());
  return it != index_.end() && buffers_[it->second].used && buffers_[it->second].holders == 0;
}

void TensorArena::reclaim() {
  std::vector<Buffer> kept;
  kept.reserve(buffers_.size());
  for (Buffer& buffer : buffers_) {
    // use_count 1: only the arena's handle is left.
    if (!buffer.used || buffer.tensor.use_count() != 1) continue;
    kept.push_back(Buffer{std::move(buffer.tensor), 0, false});
  }
  buffers_ = std::move(kept);
  index_.clear();
  free_.clear();
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const Tensor& t = buffers_[i].tensor;
    index_.emplace(t.raw_data(), i);
    free_[{t.dtype(), t.numel()}].push_back(i);
  }
}

}  // namespace qflow
