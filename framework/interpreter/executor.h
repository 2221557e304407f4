// Executor: runs a Model's graph on named input tensors with the reference kernels.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "framework/interpreter/kernel.h"
#include "framework/interpreter/kernel_registry.h"
#include "qflow/ir/graph.h"

namespace qflow {

class ThreadPool;

// Called for every value the executor produces (node outputs, not graph inputs or
// initializers), in execution order, with a reference to the live tensor: no copy.
using ValueHook = std::function<Status(const Value& value, const Tensor& tensor)>;

// Where the time of runs goes, node by node (`qflow bench --profile`). Runs add to it, so it
// sums over as many runs as are given it; the vectors are parallel to Executor::order().
struct RunProfile {
  std::vector<double> seconds;  // wall time of each node's kernel, its fused chain included
  std::vector<char> computed;   // whether the node's kernel ran (not folded at create, not fused)
  std::vector<int> fused_into;  // the step that computed a node inside its epilogue, else -1
  int runs = 0;
};

struct ExecutorOptions {
  int threads = 1;
  // Values to keep beyond the graph outputs (e.g. for debugging); others are freed early.
  std::vector<std::string> extra_outputs;
  // Set for a subgraph (an If branch, a Loop or Scan body). Its inputs are not checked
  // against declared types (bodies often declare other shapes than the spec feeds them: a
  // [1] iteration count for the scalar), and `outer_values`, the values it reads from
  // enclosing graphs (captured_value_names), are given to run() among the inputs.
  bool subgraph = false;
  std::vector<std::string> outer_values;
  // The buffers of a run stay for the next run (false for executors that run rarely and
  // are many, e.g. one small model per node: each would keep its activations' buffers).
  bool keep_buffers = true;
};

class Executor {
 public:
  // Resolves a kernel for every node and plans the run: nodes whose inputs are all
  // constant (e.g. DequantizeLinear of weights) are computed here once, chains of
  // element-wise nodes after a Conv/ConvTranspose/Gemm (activations, BatchNormalization,
  // arithmetic with a scalar constant or one value per channel, the Add/Clip/Mul/Div
  // HardSwish) become that kernel's epilogue
  // program, values get dense slots and free
  // points. The model must outlive the executor. Fails naming the first node with no
  // kernel for its op/opset.
  static Expected<std::unique_ptr<Executor>> create(const Model& model,
                                                    const ExecutorOptions& options = {},
                                                    const KernelRegistry& registry = KernelRegistry::builtin());
  ~Executor();

  // Runs once. Inputs are checked against the declared dtype and static dimensions of
  // the graph's inputs. Returns graph outputs (and extra_outputs) by name. With a hook,
  // every node runs on its own (no fusion) so the hook sees every value; a value the hook
  // keeps is never handed to a later node. With a profile, each node's time is added to it.
  Expected<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs,
                                              const ValueHook& hook = {}, RunProfile* profile = nullptr) const;

  const Model& model() const { return model_; }
  const std::vector<Node*>& order() const { return order_; }
  // Number of nodes a hook-less run computes inside an earlier step (a Conv/ConvTranspose/Gemm's epilogue,
  // a Q/DQ pair after any kernel).
  std::size_t fused_count() const;
  // Number of nodes computed once by create() instead of on every run.
  std::size_t folded_count() const;

 private:
  // A chain of nodes computed by the kernel of an earlier step: their steps in chain order
  // (the kernel's output becomes the last one's value) and the program computing them.
  struct Fusion {
    std::vector<std::size_t> steps;
    Epilogue epilogue;
    // The producer's kernel ignores epilogues: the executor runs the program over its
    // float32 output after it (only Q/DQ pairs, which then skip the integer tensor).
    bool after_kernel = false;
  };
  struct Step {
    std::unique_ptr<Kernel> kernel;
    int64_t opset = 0;
    std::vector<int> inputs;   // slot per node input, -1 when absent
    std::vector<int> outputs;  // slot per node output, -1 when absent
    std::vector<int> frees;    // slots whose last use is this step
    // Values of this graph the node's subgraphs read: name and slot, handed to the kernel.
    std::vector<std::pair<std::string, int>> captured;
    bool widens_half = false;  // half-precision inputs computed through float32
    std::optional<std::vector<Tensor>> folded;  // outputs computed by create()
    std::optional<Fusion> fusion;
  };

  Executor(const Model& model, const ExecutorOptions& options);
  void plan_fusions(const KernelRegistry& registry);
  // An arena of an earlier run (or a new one) for a run to use alone, and its return.
  std::unique_ptr<TensorArena> take_arena() const;
  void return_arena(std::unique_ptr<TensorArena> arena) const;
  const Model& model_;
  ExecutorOptions options_;
  std::vector<Node*> order_;
  std::vector<Step> steps_;                  // parallel to order_
  std::vector<const Value*> slot_values_;    // slot -> value
  std::vector<const Tensor*> constants_;     // slot -> initializer or folded output, or null
  std::vector<int> overridable_;             // slots of initializers that are also graph inputs
  std::vector<int> keep_;                    // slots returned by run()
  std::vector<std::pair<const Value*, int>> input_slots_;  // graph input -> slot, -1 when unread
  std::map<std::string, int> outer_slots_;                 // outer value -> slot (subgraphs)
  std::unique_ptr<ThreadPool> pool_;
  // Arenas of finished runs: concurrent runs each take their own, so buffers survive
  // from one run to the next without being shared by two.
  mutable std::mutex arenas_mutex_;
  mutable std::vector<std::unique_ptr<TensorArena>> arenas_;
};

}  // namespace qflow
