// Executor: runs a Model's graph on named input tensors with the reference kernels.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/runtime/kernel.h"
#include "framework/runtime/kernel_registry.h"
#include "qflow/ir/graph.h"

namespace qflow {

class ThreadPool;

// Called for every value the executor produces (node outputs, not graph inputs or
// initializers), in execution order, with a reference to the live tensor: no copy.
using ValueHook = std::function<Status(const Value& value, const Tensor& tensor)>;

struct ExecutorOptions {
  int threads = 1;
  // Values to keep beyond the graph outputs (e.g. for debugging); others are freed early.
  std::vector<std::string> extra_outputs;
};

class Executor {
 public:
  // Resolves a kernel for every node and plans the run. The model must outlive the
  // executor. Fails naming the first node with no kernel for its op/opset.
  static Expected<std::unique_ptr<Executor>> create(const Model& model,
                                                    const ExecutorOptions& options = {},
                                                    const KernelRegistry& registry = KernelRegistry::builtin());
  ~Executor();

  // Runs once. Inputs are checked against the declared dtype and static dimensions of
  // the graph's inputs. Returns graph outputs (and extra_outputs) by name.
  Expected<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs,
                                              const ValueHook& hook = {}) const;

  const Model& model() const { return model_; }
  const std::vector<Node*>& order() const { return order_; }

 private:
  Executor(const Model& model, const ExecutorOptions& options);
  const Model& model_;
  ExecutorOptions options_;
  std::vector<Node*> order_;
  std::vector<std::unique_ptr<Kernel>> kernels_;    // parallel to order_
  std::vector<int64_t> node_opsets_;                // parallel to order_
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace qflow
