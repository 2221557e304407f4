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
class TensorArena;

// An activation a Conv or Gemm kernel applies to its float32 output while storing it, when
// the executor fused the activation node that was that output's only consumer.
struct Epilogue {
  enum class Kind { None, Relu, Clip, Sigmoid, HardSigmoid, HardSwish };
  Kind kind = Kind::None;
  float lo = 0, hi = 0;        // Clip bounds (absent bounds already resolved)
  double alpha = 0, beta = 0;  // HardSigmoid
};

// What a kernel sees while computing one node. Inputs are borrowed; the kernel assigns
// outputs[i] for every output the node declares (missing optional outputs stay empty).
struct KernelContext {
  const Node& node;
  int64_t opset = 0;
  std::vector<const Tensor*> inputs;  // nullptr for a missing optional input
  std::vector<Tensor> outputs;
  ThreadPool* threads = nullptr;      // never null inside Executor::run
  // Set on a step the executor fused with its activation; a kernel that applied it to its
  // output sets epilogue_applied (otherwise the activation node runs on its own).
  const Epilogue* epilogue = nullptr;
  bool epilogue_applied = false;
  // Buffers of dead values of this run, or null (then allocate() makes fresh tensors).
  TensorArena* arena = nullptr;

  std::size_t input_count() const { return inputs.size(); }
  // Input i or nullptr when absent or out of range.
  const Tensor* input(std::size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  // Input i, or an error naming the node when it is absent.
  Expected<const Tensor*> required_input(std::size_t i) const;
  // Splits [0, n) into chunks run on the pool; serial when the pool has one thread or when
  // n * cost_per_unit (about one arithmetic operation or element copy per cost unit) is
  // too little work to be worth splitting (ThreadPool::kMinParallelCost).
  void parallel_for(int64_t n, int64_t cost_per_unit,
                    const std::function<void(int64_t begin, int64_t end)>& body) const;
  // As above for units that are each substantial work: always split.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body) const;
  // An output tensor whose contents are unspecified: the kernel must write every element.
  // Reuses the buffer of a dead value of the same dtype and size when the run has one.
  Expected<Tensor> allocate(DType dtype, const Shape& shape) const;
  // "Conv 'conv1': <message>" with InvalidInput code.
  Status error(const std::string& message) const;
};

// A kernel instance is created once per node (so it may precompute from attributes and
// constant inputs) and then run many times, possibly concurrently: compute is const.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status compute(KernelContext& context) const = 0;
  // True when compute honours KernelContext::epilogue (the executor may then fuse).
  virtual bool supports_epilogue() const { return false; }
};

// Creates the kernel for a node; `constant_inputs[i]` is the initializer bound to input i,
// or nullptr, so kernels can prepack weights.
using KernelFactory = std::function<Expected<std::unique_ptr<Kernel>>(
    const Node& node, int64_t opset, const std::vector<const Tensor*>& constant_inputs)>;
// Stateless kernels are just functions.
using KernelFunction = std::function<Status(KernelContext& context)>;

}  // namespace qflow
