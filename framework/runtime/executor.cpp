// Executor: kernel resolution, input checking, execution in topological order, early frees.
#include "framework/runtime/executor.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "framework/core/thread_pool.h"

namespace qflow {

namespace {

std::string describe(const ValueType& type) {
  std::string out(dtype_name(type.dtype));
  if (type.shape) {
    out += " [";
    for (std::size_t i = 0; i < type.shape->size(); ++i) {
      const Dim& d = (*type.shape)[i];
      out += (i ? ", " : "") + (d.value ? std::to_string(*d.value) : (d.param.empty() ? "?" : d.param));
    }
    out += "]";
  }
  return out;
}

Status check_input(const Value& value, const Tensor& tensor) {
  if (!value.type) return Status::ok();
  const ValueType& type = *value.type;
  const std::string got = std::string(dtype_name(tensor.dtype())) + " " + shape_to_string(tensor.shape());
  if (type.dtype != DType::Undefined && type.dtype != tensor.dtype())
    return invalid_input("input '" + value.name() + "' expects " + describe(type) + ", got " + got);
  if (type.shape) {
    bool ok = type.shape->size() == tensor.shape().size();
    for (std::size_t i = 0; ok && i < type.shape->size(); ++i) {
      const Dim& d = (*type.shape)[i];
      if (d.value && *d.value >= 0 && *d.value != tensor.shape()[i]) ok = false;
    }
    if (!ok) return invalid_input("input '" + value.name() + "' expects " + describe(type) + ", got " + got);
  }
  return Status::ok();
}

}  // namespace

Executor::Executor(const Model& model, const ExecutorOptions& options) : model_(model), options_(options) {}
Executor::~Executor() = default;

Expected<std::unique_ptr<Executor>> Executor::create(const Model& model, const ExecutorOptions& options,
                                                     const KernelRegistry& registry) {
  std::unique_ptr<Executor> executor(new Executor(model, options));
  const Graph& graph = *model.graph;
  QFLOW_RETURN_IF_ERROR(graph.validate());
  QFLOW_ASSIGN_OR_RETURN(executor->order_, graph.topological_order());
  for (Node* node : executor->order_) {
    const int64_t opset = model.opset(node->domain());
    if (opset == 0)
      return unsupported("node " + node->op_type() + " '" + node->name() + "' uses domain '" + node->domain() +
                         "', which the model does not import");
    const KernelFactory* factory = registry.find(node->domain(), node->op_type(), opset);
    if (!factory) {
      const std::string domain = node->domain().empty() ? "ai.onnx" : node->domain();
      return unsupported("no kernel for op " + domain + "::" + node->op_type() + " at opset " +
                         std::to_string(opset) + " (node '" + node->name() + "')");
    }
    std::vector<const Tensor*> constants;
    for (const Value* in : node->inputs()) constants.push_back(in ? graph.initializer(in) : nullptr);
    auto kernel = (*factory)(*node, opset, constants);
    if (!kernel) return kernel.status();
    executor->kernels_.push_back(std::move(kernel).value());
    executor->node_opsets_.push_back(opset);
  }
  executor->pool_ = std::make_unique<ThreadPool>(std::max(1, options.threads));
  return executor;
}

Expected<std::map<std::string, Tensor>> Executor::run(const std::map<std::string, Tensor>& inputs,
                                                      const ValueHook& hook) const {
  const Graph& graph = *model_.graph;
  std::unordered_map<const Value*, Tensor> env;
  for (const Value* v : graph.initializer_order()) env[v] = *graph.initializer(v);

  std::unordered_set<std::string> known_inputs;
  for (const Value* v : graph.inputs) known_inputs.insert(v->name());
  for (const auto& [name, tensor] : inputs) {
    if (!known_inputs.count(name)) {
      std::string names;
      for (const Value* v : graph.runtime_inputs()) names += (names.empty() ? "" : ", ") + v->name();
      return invalid_input("the model has no input named '" + name + "' (inputs: " + names + ")");
    }
  }
  for (const Value* v : graph.inputs) {
    auto it = inputs.find(v->name());
    if (it == inputs.end()) {
      if (graph.is_initializer(v)) continue;
      return invalid_input("input '" + v->name() + "' was not given");
    }
    QFLOW_RETURN_IF_ERROR(check_input(*v, it->second));
    env[v] = it->second;
  }

  // Values that must survive the run; everything else is freed after its last use.
  std::unordered_set<const Value*> keep(graph.outputs.begin(), graph.outputs.end());
  for (const std::string& name : options_.extra_outputs)
    if (const Value* v = graph.find_value(name)) keep.insert(v);
  std::unordered_map<const Value*, std::size_t> last_use;
  for (std::size_t step = 0; step < order_.size(); ++step)
    for (const Value* in : order_[step]->inputs())
      if (in) last_use[in] = step;

  for (std::size_t step = 0; step < order_.size(); ++step) {
    const Node& node = *order_[step];
    KernelContext context{node, node_opsets_[step], {}, {}, pool_.get()};
    context.inputs.reserve(node.inputs().size());
    for (const Value* in : node.inputs()) {
      if (!in) {
        context.inputs.push_back(nullptr);
        continue;
      }
      auto it = env.find(in);
      if (it == env.end())
        return internal_error("value '" + in->name() + "' needed by node '" + node.name() + "' was not computed");
      context.inputs.push_back(&it->second);
    }
    context.outputs.resize(node.outputs().size());
    QFLOW_RETURN_IF_ERROR(kernels_[step]->compute(context));
    for (std::size_t i = 0; i < node.outputs().size(); ++i) {
      const Value* out = node.outputs()[i];
      if (!out) continue;
      if (context.outputs[i].empty())
        return internal_error(node.op_type() + " '" + node.name() + "' did not produce output " + std::to_string(i));
      if (hook) QFLOW_RETURN_IF_ERROR(hook(*out, context.outputs[i]));
      env[out] = std::move(context.outputs[i]);
    }
    for (const Value* in : node.inputs()) {
      if (in && last_use[in] == step && !keep.count(in) && !graph.is_initializer(in)) env.erase(in);
    }
  }

  std::map<std::string, Tensor> results;
  for (const Value* v : keep) {
    auto it = env.find(v);
    if (it == env.end()) return internal_error("output '" + v->name() + "' was not computed");
    results[v->name()] = it->second;
  }
  return results;
}

}  // namespace qflow
