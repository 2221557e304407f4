// Executor: kernel resolution, constant folding, activation fusion, dense value slots,
// input checking, execution in topological order, early frees with buffer reuse.
#include "framework/runtime/executor.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "framework/core/thread_pool.h"
#include "framework/runtime/tensor_arena.h"

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

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// Ops whose output is not a function of their inputs: never computed ahead of a run.
bool is_random(const Node& node) {
  static const std::unordered_set<std::string> random = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                                         "RandomUniformLike", "Multinomial", "Bernoulli"};
  return random.count(node.op_type()) > 0;
}

// Clip's bound i (opset >= 11) as a constant float, or `fallback` when absent; nullopt when
// the bound is not a float32 constant the plan can read.
std::optional<float> clip_bound(const Graph& graph, const Node& node, std::size_t i, float fallback) {
  if (i >= node.inputs().size() || !node.inputs()[i]) return fallback;
  const Value* bound = node.inputs()[i];
  const Tensor* t = graph.initializer(bound);
  if (!t || t->dtype() != DType::Float32) return std::nullopt;
  if (std::find(graph.inputs.begin(), graph.inputs.end(), bound) != graph.inputs.end()) return std::nullopt;
  return t->numel() > 0 ? t->data<float>()[0] : fallback;
}

// The epilogue computing activation `node` on float32 values, or nullopt when it is not
// one the Conv/Gemm kernels can apply.
std::optional<Epilogue> activation_epilogue(const Graph& graph, const Node& node, int64_t opset) {
  if (!is_default_domain(node) || node.outputs().size() != 1 || !node.outputs()[0]) return std::nullopt;
  Epilogue e;
  const std::string& op = node.op_type();
  if (op == "Relu") {
    e.kind = Epilogue::Kind::Relu;
  } else if (op == "Sigmoid") {
    e.kind = Epilogue::Kind::Sigmoid;
  } else if (op == "HardSwish") {
    e.kind = Epilogue::Kind::HardSwish;
  } else if (op == "HardSigmoid") {
    e.kind = Epilogue::Kind::HardSigmoid;
    e.alpha = node.attr_float("alpha", 0.2f);
    e.beta = node.attr_float("beta", 0.5f);
  } else if (op == "Clip") {
    e.kind = Epilogue::Kind::Clip;
    const float lowest = std::numeric_limits<float>::lowest(), highest = std::numeric_limits<float>::max();
    if (opset < 11) {
      e.lo = node.attr_float("min", lowest);
      e.hi = node.attr_float("max", highest);
    } else {
      const auto lo = clip_bound(graph, node, 1, lowest), hi = clip_bound(graph, node, 2, highest);
      if (!lo || !hi) return std::nullopt;
      e.lo = *lo;
      e.hi = *hi;
    }
  } else {
    return std::nullopt;
  }
  return e;
}

}  // namespace

Executor::Executor(const Model& model, const ExecutorOptions& options) : model_(model), options_(options) {}
Executor::~Executor() = default;

std::size_t Executor::fused_count() const {
  return static_cast<std::size_t>(std::count_if(steps_.begin(), steps_.end(), [](const Step& s) { return s.fusion.has_value(); }));
}

std::size_t Executor::folded_count() const {
  return static_cast<std::size_t>(std::count_if(steps_.begin(), steps_.end(), [](const Step& s) { return s.folded.has_value(); }));
}

Expected<std::unique_ptr<Executor>> Executor::create(const Model& model, const ExecutorOptions& options,
                                                     const KernelRegistry& registry) {
  std::unique_ptr<Executor> executor(new Executor(model, options));
  Executor& ex = *executor;
  const Graph& graph = *model.graph;
  QFLOW_RETURN_IF_ERROR(graph.validate());
  QFLOW_ASSIGN_OR_RETURN(ex.order_, graph.topological_order());
  ex.pool_ = std::make_unique<ThreadPool>(std::max(1, options.threads));

  std::unordered_map<const Value*, int> slots;
  auto slot_of = [&](const Value* v) {
    auto [it, added] = slots.emplace(v, static_cast<int>(ex.slot_values_.size()));
    if (added) {
      ex.slot_values_.push_back(v);
      ex.constants_.push_back(graph.initializer(v));
    }
    return it->second;
  };
  for (const Value* v : graph.initializer_order()) slot_of(v);
  std::unordered_set<int> overridable;
  for (const Value* v : graph.inputs)
    if (graph.is_initializer(v)) overridable.insert(slot_of(v));
  ex.overridable_.assign(overridable.begin(), overridable.end());

  ex.steps_.reserve(ex.order_.size());  // folded outputs are pointed to: no reallocation
  for (Node* node : ex.order_) {
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
    Step step;
    step.opset = opset;
    std::vector<const Tensor*> constants;
    bool all_constant = !node->inputs().empty();
    bool any_input = false;
    for (const Value* in : node->inputs()) {
      const int slot = in ? slot_of(in) : -1;
      step.inputs.push_back(slot);
      const Tensor* constant = slot >= 0 ? ex.constants_[static_cast<std::size_t>(slot)] : nullptr;
      constants.push_back(constant);
      if (slot >= 0) any_input = true;
      if (slot >= 0 && (!constant || overridable.count(slot))) all_constant = false;
    }
    for (const Value* out : node->outputs()) step.outputs.push_back(out ? slot_of(out) : -1);
    auto kernel = (*factory)(*node, opset, constants);
    if (!kernel) return kernel.status();
    step.kernel = std::move(kernel).value();

    // A node of constants gives the same outputs on every run (DequantizeLinear of weights,
    // shape arithmetic): compute it once here. A failure is left for run() to report.
    if (all_constant && any_input && is_default_domain(*node) && !is_random(*node)) {
      KernelContext context{*node, opset, constants, {}, ex.pool_.get()};
      context.outputs.resize(node->outputs().size());
      bool complete = step.kernel->compute(context).is_ok();
      for (std::size_t i = 0; complete && i < step.outputs.size(); ++i)
        if (step.outputs[i] >= 0 && context.outputs[i].empty()) complete = false;
      if (complete) step.folded = std::move(context.outputs);
    }
    ex.steps_.push_back(std::move(step));
    Step& placed = ex.steps_.back();
    if (placed.folded)
      for (std::size_t i = 0; i < placed.outputs.size(); ++i)
        if (placed.outputs[i] >= 0) ex.constants_[static_cast<std::size_t>(placed.outputs[i])] = &(*placed.folded)[i];
  }

  // Values that must survive the run; everything else is freed after its last use.
  std::unordered_set<int> keep;
  for (const Value* v : graph.outputs) keep.insert(slot_of(v));
  for (const std::string& name : options.extra_outputs)
    if (const Value* v = graph.find_value(name)) keep.insert(slot_of(v));
  ex.keep_.assign(keep.begin(), keep.end());
  std::sort(ex.keep_.begin(), ex.keep_.end());
  std::vector<int> last_use(ex.slot_values_.size(), -1);
  for (std::size_t s = 0; s < ex.steps_.size(); ++s) {
    for (int slot : ex.steps_[s].inputs)
      if (slot >= 0) last_use[static_cast<std::size_t>(slot)] = static_cast<int>(s);
    // Outputs nobody reads die at the end of the step that made them.
    for (int slot : ex.steps_[s].outputs)
      if (slot >= 0 && last_use[static_cast<std::size_t>(slot)] < 0) last_use[static_cast<std::size_t>(slot)] = static_cast<int>(s);
  }
  for (std::size_t slot = 0; slot < last_use.size(); ++slot) {
    if (last_use[slot] < 0 || keep.count(static_cast<int>(slot)) || ex.constants_[slot]) continue;
    if (overridable.count(static_cast<int>(slot))) continue;
    ex.steps_[static_cast<std::size_t>(last_use[slot])].frees.push_back(static_cast<int>(slot));
  }
  for (const Value* v : graph.inputs) {
    auto it = slots.find(v);
    ex.input_slots_.emplace_back(v, it == slots.end() ? -1 : it->second);
  }
  ex.plan_fusions(registry);
  return executor;
}

std::unique_ptr<TensorArena> Executor::take_arena() const {
  std::lock_guard<std::mutex> lock(arenas_mutex_);
  if (arenas_.empty()) return std::make_unique<TensorArena>();
  std::unique_ptr<TensorArena> arena = std::move(arenas_.back());
  arenas_.pop_back();
  return arena;
}

void Executor::return_arena(std::unique_ptr<TensorArena> arena) const {
  std::lock_guard<std::mutex> lock(arenas_mutex_);
  arenas_.push_back(std::move(arena));
}

void Executor::plan_fusions(const KernelRegistry& registry) {
  const Graph& graph = *model_.graph;
  std::unordered_map<const Node*, std::size_t> step_of;
  for (std::size_t s = 0; s < order_.size(); ++s) step_of[order_[s]] = s;
  const std::unordered_set<int> keep(keep_.begin(), keep_.end());
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    Step& step = steps_[s];
    if (step.folded || !step.kernel->supports_epilogue() || step.outputs.size() != 1 || step.outputs[0] < 0) continue;
    const Value* out = slot_values_[static_cast<std::size_t>(step.outputs[0])];
    if (keep.count(step.outputs[0]) || out->uses().size() != 1) continue;
    const Node& consumer = *out->uses()[0].first;
    if (out->uses()[0].second != 0) continue;
    // Only the built-in activation kernel is known to compute what the epilogue computes.
    const int64_t opset = model_.opset(consumer.domain());
    const KernelFactory* factory = registry.find(consumer.domain(), consumer.op_type(), opset);
    if (!factory || factory != KernelRegistry::builtin().find(consumer.domain(), consumer.op_type(), opset)) continue;
    auto epilogue = activation_epilogue(graph, consumer, opset);
    auto at = step_of.find(&consumer);
    if (!epilogue || at == step_of.end() || steps_[at->second].folded) continue;
    step.fusion = Fusion{at->second, *epilogue};
  }
}

Expected<std::map<std::string, Tensor>> Executor::run(const std::map<std::string, Tensor>& inputs,
                                                      const ValueHook& hook) const {
  const Graph& graph = *model_.graph;
  std::vector<Tensor> env(slot_values_.size());

  for (const auto& [name, tensor] : inputs) {
    const bool known = std::any_of(input_slots_.begin(), input_slots_.end(),
                                   [&name](const auto& in) { return in.first->name() == name; });
    if (!known) {
      std::string names;
      for (const Value* v : graph.runtime_inputs()) names += (names.empty() ? "" : ", ") + v->name();
      return invalid_input("the model has no input named '" + name + "' (inputs: " + names + ")");
    }
  }
  for (const auto& [v, slot] : input_slots_) {
    auto it = inputs.find(v->name());
    if (it == inputs.end()) {
      if (graph.is_initializer(v)) continue;
      return invalid_input("input '" + v->name() + "' was not given");
    }
    QFLOW_RETURN_IF_ERROR(check_input(*v, it->second));
    if (slot >= 0) env[static_cast<std::size_t>(slot)] = it->second;
  }

  // With a hook every value is handed out, and the hook may keep it: no fusion, no reuse.
  // Otherwise the run borrows an arena; on every way out, after the results were taken,
  // the run's own tensors are dropped and the arena takes back what nobody else holds.
  struct ArenaLease {
    const Executor& executor;
    std::vector<Tensor>& env;
    std::unique_ptr<TensorArena> arena;
    ~ArenaLease() {
      if (!arena) return;
      env.clear();
      arena->reclaim();
      executor.return_arena(std::move(arena));
    }
  } lease{*this, env, hook ? nullptr : take_arena()};
  TensorArena* const recycler = lease.arena.get();
  std::vector<char> skipped(steps_.size(), 0);
  auto store = [&](int slot, Tensor tensor) {
    Tensor& held = env[static_cast<std::size_t>(slot)];
    held = std::move(tensor);
    if (recycler) recycler->retain(held);
  };

  auto free_dead = [&](const Step& step) {
    for (int slot : step.frees) {
      Tensor& held = env[static_cast<std::size_t>(slot)];
      if (held.empty()) continue;
      if (recycler) recycler->release(held);
      held = Tensor();
    }
  };

  for (std::size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    if (skipped[s]) {
      free_dead(step);
      continue;
    }
    const Node& node = *order_[s];
    if (step.folded) {
      for (std::size_t i = 0; i < step.outputs.size(); ++i)
        if (step.outputs[i] >= 0 && hook) QFLOW_RETURN_IF_ERROR(hook(*node.outputs()[i], (*step.folded)[i]));
      continue;
    }
    KernelContext context{node, step.opset, {}, {}, pool_.get()};
    context.arena = recycler;
    context.inputs.reserve(step.inputs.size());
    for (std::size_t i = 0; i < step.inputs.size(); ++i) {
      const int slot = step.inputs[i];
      if (slot < 0) {
        context.inputs.push_back(nullptr);
        continue;
      }
      const std::size_t at = static_cast<std::size_t>(slot);
      if (!env[at].empty()) context.inputs.push_back(&env[at]);
      else if (constants_[at]) context.inputs.push_back(constants_[at]);
      else
        return internal_error("value '" + slot_values_[at]->name() + "' needed by node '" + node.name() +
                              "' was not computed");
    }
    context.outputs.resize(step.outputs.size());
    const bool fuse = step.fusion && !hook;
    if (fuse) context.epilogue = &step.fusion->epilogue;
    QFLOW_RETURN_IF_ERROR(step.kernel->compute(context));
    for (std::size_t i = 0; i < step.outputs.size(); ++i)
      if (step.outputs[i] >= 0 && context.outputs[i].empty())
        return internal_error(node.op_type() + " '" + node.name() + "' did not produce output " + std::to_string(i));
    if (fuse && context.epilogue_applied) {
      // The output already went through the activation: it is the activation's value.
      const std::size_t activation = step.fusion->activation_step;
      store(steps_[activation].outputs[0], std::move(context.outputs[0]));
      skipped[activation] = 1;
    } else {
      for (std::size_t i = 0; i < step.outputs.size(); ++i) {
        if (step.outputs[i] < 0) continue;
        if (hook) QFLOW_RETURN_IF_ERROR(hook(*node.outputs()[i], context.outputs[i]));
        store(step.outputs[i], std::move(context.outputs[i]));
      }
    }
    free_dead(step);
  }

  std::map<std::string, Tensor> results;
  for (int slot : keep_) {
    const std::size_t at = static_cast<std::size_t>(slot);
    const Value* v = slot_values_[at];
    if (!env[at].empty()) results[v->name()] = env[at];
    else if (constants_[at]) results[v->name()] = *constants_[at];
    else return internal_error("output '" + v->name() + "' was not computed");
  }
  return results;
}

}  // namespace qflow
