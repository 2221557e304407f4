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

// One per-element step of an epilogue program; each computes exactly what the node it
// replaces computes, in the same order and type, so fused and separate runs agree bitwise.
struct EpilogueStage {
  enum class Kind {
    Relu,
    Clip,
    Sigmoid,
    HardSigmoid,
    HardSwish,
    BatchNorm,  // (v - mean[c]) * factor[c] + bias[c], factor = scale / sqrt(var + eps)
    Add,        // v + constant
    Mul,        // v * constant
    Sub,        // v - constant
    SubFrom,    // constant - v
    Div,        // v / constant
    DivInto,    // constant / v
    // v * Clip(v + constant, lo, hi) / divisor: the Add/Clip/Mul/Div spelling of HardSwish.
    HardSwishDiamond,
    // v * HardSigmoid(v) (alpha, beta): HardSwish spelt Mul(x, HardSigmoid(x)) before opset 14.
    HardSigmoidProduct,
    // v * FakeQuant(HardSigmoid(v)): the same with a Q/DQ pair on the gate (QDQ models); the
    // pair's scale, lo and hi as FakeQuant's.
    HardSigmoidProductQuantized,
    // QuantizeLinear then DequantizeLinear with one scale (constant) and zero point z:
    // round_half_even(clip(v / constant, lo, hi)) * constant, NaN as 0, where [lo, hi] is the
    // integer type's range minus z (the integer minus its zero point is exact in float).
    FakeQuant,
  };
  Kind kind = Kind::Relu;
  float lo = 0, hi = 0;        // Clip bounds (absent bounds already resolved); FakeQuant's range
  double alpha = 0, beta = 0;  // HardSigmoid, HardSigmoidProduct(Quantized)
  float constant = 0;          // the other operand of a binary stage; the diamond's addend; FakeQuant's scale
  float divisor = 1;           // the diamond's divisor
  std::vector<float> mean, factor, bias;  // BatchNorm, one per output channel
};

// A short program a Conv or Gemm kernel applies to each float32 output row while it is in
// cache, when the executor absorbed the chain of single-consumer nodes after it.
struct Epilogue {
  std::vector<EpilogueStage> stages;
  int64_t channels = 0;      // > 0 when a stage reads per-channel parameters: C of [N, C, ...]
  std::size_t min_rank = 0;  // constant operands broadcast without growing an output of this rank
  // > 0: per-channel constant operands ([C, 1, ..., 1]) meet axis 1 only at this rank.
  std::size_t exact_rank = 0;
  // Whether the program computes the absorbed nodes for an output of `rank` with
  // `out_channels` channels (-1: the producer has no channel axis, e.g. Gemm).
  bool fits(std::size_t rank, int64_t out_channels) const {
    return rank >= min_rank && (exact_rank == 0 || rank == exact_rank) && (channels == 0 || channels == out_channels);
  }
};

// What a kernel sees while computing one node. Inputs are borrowed; the kernel assigns
// outputs[i] for every output the node declares (missing optional outputs stay empty).
struct KernelContext {
  const Node& node;
  int64_t opset = 0;
  std::vector<const Tensor*> inputs;  // nullptr for a missing optional input
  std::vector<Tensor> outputs;
  ThreadPool* threads = nullptr;      // never null inside Executor::run
  // Set on a step the executor fused with the nodes after it; a kernel that applied it to
  // its output sets epilogue_applied (otherwise those nodes run on their own).
  const Epilogue* epilogue = nullptr;
  bool epilogue_applied = false;
  // Buffers of dead values of this run, or null (then allocate() makes fresh tensors).
  TensorArena* arena = nullptr;
  // Values of enclosing graphs the node's subgraphs read (If/Loop/Scan), by name.
  std::vector<std::pair<std::string, const Tensor*>> captured = {};

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
