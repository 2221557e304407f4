// Kernel interface and the context a kernel computes in.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

class ThreadPool;

// What a kernel sees while computing one node. Inputs are borrowed; the kernel assigns
// outputs[i] for every output the node declares (missing optional outputs stay empty).
struct KernelContext {
  const Node& node;
  int64_t opset = 0;
  std::vector<const Tensor*> inputs;  // nullptr for a missing optional input
  std::vector<Tensor> outputs;
  ThreadPool* threads = nullptr;      // never null inside Executor::run

  std::size_t input_count() const { return inputs.size(); }
  // Input i or nullptr when absent or out of range.
  const Tensor* input(std::size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  // Input i, or an error naming the node when it is absent.
  Expected<const Tensor*> required_input(std::size_t i) const;
  // Splits [0, n) into chunks run on the pool; serial when the pool has one thread.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body) const;
  // "Conv 'conv1': <message>" with InvalidInput code.
  Status error(const std::string& message) const;
};

// A kernel instance is created once per node (so it may precompute from attributes and
// constant inputs) and then run many times, possibly concurrently: compute is const.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status compute(KernelContext& context) const = 0;
};

// Creates the kernel for a node; `constant_inputs[i]` is the initializer bound to input i,
// or nullptr, so kernels can prepack weights.
using KernelFactory = std::function<Expected<std::unique_ptr<Kernel>>(
    const Node& node, int64_t opset, const std::vector<const Tensor*>& constant_inputs)>;
// Stateless kernels are just functions.
using KernelFunction = std::function<Status(KernelContext& context)>;

}  // namespace qflow
