// Executor: runs a lowered model with the fixed-point arithmetic (runtime/fixed_point: the
// reference, or the bit-identical fast kernels) for the BPU segments and float kernels
// (cpu_ops.h) for the CPU segments. It is both the `.bc`
// simulator and the `.hbm` runtime, so the two give bit-identical results by construction.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qflow/runtime/lowered_model.h"
#include "qflow/core/status.h"

namespace qflow::lowered {

// Integer storage whose growth leaves new elements uninitialized: the executor sizes an op's
// output buffer just before the op overwrites all of it, and a zero fill there showed up as
// a few percent of a run.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using IntBuffer = std::vector<int32_t, UninitializedAllocator<int32_t>>;

// A tensor's value at run time. Quantized and i32 tensors hold their integers in `ints`
// (inside the type's range), f32 tensors in `floats`, i64 tensors in `longs`.
struct Value {
  ElemType type = ElemType::f32;
  std::vector<int64_t> shape;
  IntBuffer ints;
  std::vector<float> floats;
  std::vector<int64_t> longs;
  // The ints are known to lie inside the type's range: set by the integer op that wrote them
  // when its results are clamped to the type (or copied from such a tensor of the same type),
  // so the ops reading them skip the range scan; constants get it when the executor is made.
  // False for model inputs.
  bool in_range = false;
};

// Checks that do not need data: tensor indices in range, every op known with its required
// inputs and attributes, constant data sizes matching shapes and types, each tensor written
// once and before it is read, model inputs f32 or u8 (a frame input_convert reads), outputs
// f32. The executor and the codecs run it.
Status validate(const Model& model);

namespace detail {
struct PackedOp;
struct FusedOp;
}

// Which kernels compute the integer ops. `reference` is the scalar qflow::fx code; the others
// are the fast kernels of conv2d and matmul (runtime/fixed_point/fast_kernels.h, bit-identical
// to the reference) on one instruction set. `automatic` reads the environment variable
// QFLOW_RT_KERNELS (one of the names below) and otherwise takes the best this CPU runs under
// the instruction-set cap (QFLOW_ISA, qflow/runtime/isa_cap.h), which QFLOW_RT_KERNELS may not
// exceed; the explicit sets are exact requests the cap does not touch.
enum class Kernels { automatic, reference, portable, avx2, avxvnni, avx512vnni };

// Storage a run reuses for its intermediate tensors. Runs without one use their thread's
// own; a caller that runs one model from a pool of threads (a runtime context) gives each
// of its contexts one, so memory follows the contexts rather than the threads. A Scratch
// serves one run at a time.
struct Scratch {
  std::vector<Value> buffers;
};

// Optional extras of a run; the defaults give exactly run()/run_values().
struct RunOptions {
  Scratch* scratch = nullptr;  // null: the calling thread's buffers
  // Per model output, non-zero: also hand back the integers the output dequantizes (see
  // raw_output); empty: none.
  std::span<const char> raw;
  // Non-null: seconds spent in each segment (model().segments order) are added to it; it is
  // resized to the segment count. Null costs nothing (no clock is read).
  std::vector<double>* segment_seconds = nullptr;
  // Non-null: seconds spent in each op (the segments' ops in execution order, releases of
  // the buffers it read last included) are added to it; it is resized to the op count. Null
  // costs nothing.
  std::vector<double>* op_seconds = nullptr;
};

class Executor {
 public:
  // Validates the model, prepares the constants and packs the weights for the chosen kernels
  // (an instruction set this CPU lacks is an error); the model is copied.
  static Expected<Executor> create(Model model, Kernels kernels = Kernels::automatic);

  // "reference", or the instruction set of the fast kernels ("avx2", ...).
  const std::string& kernels() const { return kernels_; }

  const Model& model() const { return model_; }

  // Float inputs, one per model input in order (element count must match the shape; a u8
  // frame input as floats holding integers in [0, 255]);
  // fills one float vector per model output. Messages name the op and its source node.
  // run and run_values keep no state: one Executor may run in several threads at once.
  Status run(const std::vector<std::span<const float>>& inputs, std::vector<std::vector<float>>& outputs) const;

  // The same, but an input whose only consumers are `quantize` ops may be given already
  // quantized (type and range of that op's output; those quantize ops are skipped). A
  // float input is given as f32. Outputs are the model's f32 outputs.
  Status run_values(const std::vector<Value>& inputs, std::vector<std::vector<float>>& outputs) const;

  // The quantized type and parameters an input takes when given quantized; false when the
  // input is not consumed only by quantize ops with one common output type and quant. A u8
  // frame input: u8 with its (1, 0) quant.
  bool quantized_input(size_t index, ElemType& type, Quant& quant) const;

  // Output `index` as the device computes it before its float conversion: true, with the
  // quantized type and parameters, when a `dequantize` op writes it (its input is the raw
  // result); false when the output is computed in float (a CPU op).
  bool raw_output(size_t index, ElemType& type, Quant& quant) const;

  // run_values with options; `raw` receives one Value per model output (ints filled for the
  // outputs options.raw asks for, empty otherwise) when options.raw is not empty.
  Status run_values(const std::vector<Value>& inputs, std::vector<std::vector<float>>& outputs,
                    const RunOptions& options, std::vector<Value>* raw = nullptr) const;

 private:
  explicit Executor(Model model) : model_(std::move(model)) {}
  // An input as execute reads it: its type and a view of its values (executor.cpp).
  struct Input;
  // Runs the model on input values (f32, or quantized for quantized_input ones).
  Status execute(const std::vector<Input>& inputs, std::vector<std::vector<float>>& outputs, const RunOptions& options,
                 std::vector<Value>* raw) const;
  // The tensors op `index` reads and writes as the executor runs it (fused_ may change both).
  std::vector<int32_t> inputs_of(size_t index, const Op& op) const;
  std::vector<int32_t> outputs_of(size_t index, const Op& op) const;

  Model model_;
  std::string kernels_;
  std::vector<std::shared_ptr<const detail::PackedOp>> packed_;  // per op in execution order, may be null
  // Per op in execution order with the fast kernels (elementwise chains as tables); null
  // with the reference kernels, which run every op as written.
  std::shared_ptr<const std::vector<detail::FusedOp>> fused_;
  std::vector<Value> constants_;             // decoded constants, indexed by tensor (empty otherwise)
  std::vector<std::vector<int32_t>> release_;  // per op in execution order: tensors last read there
  std::vector<int32_t> buffer_;  // per tensor: the reused buffer an op output's storage comes from, or -1
  int32_t buffers_ = 0;
  // Per model output: the op (execution order) of the dequantize that writes it, or -1.
  std::vector<int64_t> raw_op_;
};

}  // namespace qflow::lowered
