// BoundKernel: a function kernel that read what it needs of its node when it was created.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "framework/interpreter/kernel.h"

namespace qflow {

// Runs a function made for one node; attributes are read once at creation instead of
// on every run.
class BoundKernel final : public Kernel {
 public:
  explicit BoundKernel(KernelFunction function) : function_(std::move(function)) {}
  Status compute(KernelContext& context) const override { return function_(context); }

 private:
  KernelFunction function_;
};

// A factory calling bind(node, opset) -> KernelFunction for each node.
template <typename Bind>
KernelFactory bound_kernel(Bind bind) {
  return [bind](const Node& node, int64_t opset, const std::vector<const Tensor*>&) -> Expected<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new BoundKernel(bind(node, opset)));
  };
}

}  // namespace qflow
