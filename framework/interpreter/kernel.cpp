// KernelContext helpers.
#include "framework/interpreter/kernel.h"

#include "framework/core/thread_pool.h"
#include "framework/interpreter/tensor_arena.h"

namespace qflow {

Expected<const Tensor*> KernelContext::required_input(std::size_t i) const {
  const Tensor* t = input(i);
  if (!t) return error("required input " + std::to_string(i) + " is missing");
  return t;
}

void KernelContext::parallel_for(int64_t n, int64_t cost_per_unit,
                                 const std::function<void(int64_t, int64_t)>& body) const {
  if (threads) {
    threads->parallel_for(n, cost_per_unit, body);
  } else if (n > 0) {
    body(0, n);
  }
}

void KernelContext::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) const {
  if (threads) {
    threads->parallel_for(n, body);
  } else if (n > 0) {
    body(0, n);
  }
}

Expected<Tensor> KernelContext::allocate(DType dtype, const Shape& shape) const {
  Expected<Tensor> made = arena ? arena->acquire(dtype, shape) : Tensor::make(dtype, shape);
  if (!made) return error(made.status().message());
  return made;
}

Status KernelContext::error(const std::string& message) const {
  return invalid_input(node.op_type() + " '" + node.name() + "': " + message);
}

}  // namespace qflow
