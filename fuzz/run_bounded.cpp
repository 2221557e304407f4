#include "fuzz/run_bounded.h"

#include <span>
#include <vector>

#include "qflow/runtime/executor.h"

namespace qflow::fuzz {

namespace {

// Elements of every tensor, or -1 when the total passes `limit` (also guards overflow).
int64_t total_elements(const lowered::Model& model, int64_t limit) {
  int64_t total = 0;
  for (const lowered::Tensor& tensor : model.tensors) {
    int64_t count = 1;
    for (int64_t dim : tensor.shape) {
      if (dim < 0 || dim > limit) return -1;
      count *= dim;
      if (count > limit) return -1;
    }
    total += count;
    if (total > limit) return -1;
  }
  return total;
}

}  // namespace

void run_on_zeros(const lowered::Model& model) {
  if (total_elements(model, kMaxRunTensorElements) < 0) return;
  Expected<lowered::Executor> executor = lowered::Executor::create(model);
  if (!executor) return;
  std::vector<std::vector<float>> buffers;
  for (int32_t input : model.inputs) {
    // validate() has checked the index; the element count is bounded above.
    int64_t count = 1;
    for (int64_t dim : model.tensors[static_cast<size_t>(input)].shape) count *= dim;
    buffers.emplace_back(static_cast<size_t>(count), 0.0f);
  }
  std::vector<std::span<const float>> inputs(buffers.begin(), buffers.end());
  std::vector<std::vector<float>> outputs;
  (void)executor->run(inputs, outputs);
}

}  // namespace qflow::fuzz
