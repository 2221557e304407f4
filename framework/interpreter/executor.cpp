// Executor: kernel resolution, constant folding, epilogue fusion, dense value slots,
// input checking, execution in topological order, early frees with buffer reuse.
#include "framework/interpreter/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "framework/core/thread_pool.h"
#include "framework/interpreter/half_precision.h"
#include "framework/interpreter/kernels/activation.h"
#include "framework/interpreter/kernels/control_flow.h"
#include "framework/interpreter/kernels/quant_util.h"
#include "framework/interpreter/tensor_arena.h"
#include "qflow/ir/captured_values.h"
#include "qflow/ir/constants.h"

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

// String tensors keep no bytes (Tensor::strings()): an op that moves bytes would silently
// make empty strings, so only the ops written for them take them.
Status check_string_inputs(const KernelContext& context) {
  static const std::unordered_set<std::string> ops = {"Cast", "CastLike", "Identity", "StringNormalizer"};
  const Node& node = context.node;
  const bool takes_strings = (node.domain().empty() || node.domain() == "ai.onnx") && ops.count(node.op_type());
  for (const Tensor* t : context.inputs)
    if (t && t->dtype() == DType::String && !takes_strings)
      return unsupported(node.op_type() + " '" + node.name() +
                         "': string tensors are computed only by Cast, CastLike, Identity and StringNormalizer");
  return Status::ok();
}

// Computes a node with `kernel`; half-precision inputs go through float32 where the op
// computes (`widens_half`, decided once per node: half_precision.h).
Status compute_node(const Kernel& kernel, bool widens_half, KernelContext& context) {
  QFLOW_RETURN_IF_ERROR(check_string_inputs(context));
  const DType half = widens_half ? half_type_of(context.inputs) : DType::Undefined;
  return half == DType::Undefined ? kernel.compute(context) : compute_through_float32(kernel, context, half);
}

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// Ops whose output is not a function of their inputs: never computed ahead of a run.
bool is_random(const Node& node) {
  static const std::unordered_set<std::string> random = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                                         "RandomUniformLike", "Multinomial", "Bernoulli"};
  return random.count(node.op_type()) > 0;
}

// The constant a value holds at every run (an initializer that is not also a graph input,
// or a folded output), or null.
using ConstantOf = std::function<const Tensor*(const Value*)>;

// The plan's constants as a ConstantSource for qflow/ir/constants.h: float32 ones only, the
// type the epilogue computes in.
ConstantSource float32_constants(const ConstantOf& constant_of) {
  return [&constant_of](const Value* v) -> std::optional<Tensor> {
    const Tensor* t = constant_of(v);
    if (!t || t->dtype() != DType::Float32) return std::nullopt;
    return *t;
  };
}

// The stage computing activation `node` on float32 values, or nullopt when it is not one
// the Conv/Gemm epilogue can apply.
std::optional<EpilogueStage> activation_stage(const ConstantOf& constant_of, const Node& node, int64_t opset) {
  using Kind = EpilogueStage::Kind;
  EpilogueStage e;
  const std::string& op = node.op_type();
  if (op == "Relu") {
    e.kind = Kind::Relu;
  } else if (op == "Sigmoid") {
    e.kind = Kind::Sigmoid;
  } else if (op == "HardSwish") {
    e.kind = Kind::HardSwish;
  } else if (op == "HardSigmoid") {
    e.kind = Kind::HardSigmoid;
    e.alpha = node.attr_float("alpha", 0.2f);
    e.beta = node.attr_float("beta", 0.5f);
  } else if (op == "Clip") {
    e.kind = Kind::Clip;
    const auto bounds = clip_bounds(node, opset, float32_constants(constant_of));
    if (!bounds) return std::nullopt;
    e.lo = static_cast<float>(bounds->min);
    e.hi = static_cast<float>(bounds->max);
  } else {
    return std::nullopt;
  }
  return e;
}

// Add/Sub/Mul/Div of `x` and a scalar constant as a stage, raising `min_rank` to the
// constant's rank. Before opset 7 these ops broadcast only on request: not fused.
std::optional<EpilogueStage> binary_stage(const ConstantOf& constant_of, const Node& node, int64_t opset,
                                          const Value* x, std::size_t& min_rank) {
  using Kind = EpilogueStage::Kind;
  const std::string& op = node.op_type();
  if (opset < 7 || node.inputs().size() != 2 || (op != "Add" && op != "Sub" && op != "Mul" && op != "Div"))
    return std::nullopt;
  const bool x_first = node.inputs()[0] == x;
  if (x_first == (node.inputs()[1] == x)) return std::nullopt;
  // Broadcasting a one-element constant never changes x's shape while its rank does not
  // exceed x's: min_rank records that.
  const auto scalar = scalar_constant(node.inputs()[x_first ? 1 : 0], float32_constants(constant_of));
  if (!scalar) return std::nullopt;
  EpilogueStage e;
  // a + b and a * b are commutative in IEEE arithmetic; Sub and Div keep their side.
  if (op == "Add") e.kind = Kind::Add;
  else if (op == "Mul") e.kind = Kind::Mul;
  else if (op == "Sub") e.kind = x_first ? Kind::Sub : Kind::SubFrom;
  else e.kind = x_first ? Kind::Div : Kind::DivInto;
  e.constant = static_cast<float>(scalar->value);
  min_rank = std::max(min_rank, scalar->rank);
  return e;
}

// QuantizeLinear `q` of x (its sole use, input 0) followed by DequantizeLinear `dq` of its
// output with the same one scale and zero point, as one FakeQuant stage: what a QDQ model
// puts after every activation. Block and axis attributes mean nothing for one scale.
std::optional<EpilogueStage> fake_quant_stage(const ConstantOf& constant_of, const Node& q, const Node& dq) {
  if (q.op_type() != "QuantizeLinear" || dq.op_type() != "DequantizeLinear") return std::nullopt;
  if (q.inputs().size() != 3 || dq.inputs().size() != 3 || !q.inputs()[1] || !q.inputs()[2] || !dq.inputs()[1] ||
      !dq.inputs()[2])
    return std::nullopt;
  const Tensor* scale = constant_of(q.inputs()[1]);
  const Tensor* dq_scale = constant_of(dq.inputs()[1]);
  if (!scale || !dq_scale || scale->dtype() != DType::Float32 || dq_scale->dtype() != DType::Float32 ||
      scale->numel() != 1 || dq_scale->numel() != 1)
    return std::nullopt;
  const float s = scale->data<float>()[0];
  if (!(s > 0.0f) || !std::isfinite(s) || dq_scale->data<float>()[0] != s) return std::nullopt;
  const Tensor* zp = constant_of(q.inputs()[2]);
  const Tensor* dq_zp = constant_of(dq.inputs()[2]);
  if (!zp || !dq_zp || zp->numel() != 1 || dq_zp->numel() != 1 || zp->dtype() != dq_zp->dtype()) return std::nullopt;
  // The integer type's range, for the types QuantizeLinear's kernel produces.
  int64_t lo = 0, hi = 0;
  const Status integer = quant_detail::dispatch_quantized(zp->dtype(), [&]<typename T>() {
    lo = std::numeric_limits<T>::lowest();
    hi = std::numeric_limits<T>::max();
    return Status::ok();
  });
  if (!integer.is_ok()) return std::nullopt;
  const int64_t z = zp->to_int64s()[0];
  if (dq_zp->to_int64s()[0] != z) return std::nullopt;
  EpilogueStage e;
  e.kind = EpilogueStage::Kind::FakeQuant;
  e.constant = s;
  e.lo = static_cast<float>(lo - z);
  e.hi = static_cast<float>(hi - z);
  return e;
}

// Inference BatchNormalization with per-channel float32 constants of shape [C] as a stage
// with its factors k = scale / sqrt(var + epsilon) computed once, as the kernel computes
// them (in float). Sets `channels` to C.
std::optional<EpilogueStage> batchnorm_stage(const ConstantOf& constant_of, const Node& node, int64_t opset,
                                             int64_t& channels) {
  if (node.op_type() != "BatchNormalization" || node.inputs().size() != 5) return std::nullopt;
  if (opset >= 14 && node.attr_int("training_mode", 0) != 0) return std::nullopt;
  const Tensor* params[4];
  for (std::size_t i = 0; i < 4; ++i) {
    const Value* v = node.inputs()[i + 1];
    params[i] = v ? constant_of(v) : nullptr;
    if (!params[i] || params[i]->dtype() != DType::Float32 || params[i]->rank() != 1) return std::nullopt;
    if (params[i]->numel() != params[0]->numel()) return std::nullopt;
  }
  const int64_t c = params[0]->numel();
  if (c == 0 || (channels != 0 && channels != c)) return std::nullopt;
  const float epsilon = node.attr_float("epsilon", 1e-5f);
  const float* scale = params[0]->data<float>();
  const float* bias = params[1]->data<float>();
  const float* mean = params[2]->data<float>();
  const float* var = params[3]->data<float>();
  EpilogueStage e;
  e.kind = EpilogueStage::Kind::BatchNorm;
  e.mean.assign(mean, mean + c);
  e.bias.assign(bias, bias + c);
  e.factor.resize(static_cast<std::size_t>(c));
  for (int64_t p = 0; p < c; ++p) e.factor[static_cast<std::size_t>(p)] = scale[p] / std::sqrt(var[p] + epsilon);
  channels = c;
  return e;
}

// The constant operand of a two-input `node` that reads `x` once, when it holds one float32
// value per channel of an [N, C, spatial...] output: shape [C, 1, ..., 1] or
// [1, C, 1, ..., 1] with at least one trailing 1 and C > 1 (C == channels when channels > 0),
// no NaN. `rank` gets the output rank at which C meets axis 1.
const Tensor* channel_operand(const ConstantOf& constant_of, const Node& node, const Value* x, int64_t channels,
                              std::size_t& rank) {
  if (node.inputs().size() != 2 || node.outputs().empty() || !node.outputs()[0]) return nullptr;
  const bool x_first = node.inputs()[0] == x;
  if (x_first == (node.inputs()[1] == x)) return nullptr;
  const Value* other = node.inputs()[x_first ? 1 : 0];
  const Tensor* t = other ? constant_of(other) : nullptr;
  if (!t || t->dtype() != DType::Float32 || t->rank() == 0) return nullptr;
  const Shape& shape = t->shape();
  std::size_t at = 0;
  while (at < shape.size() && shape[at] == 1) ++at;
  if (at + 1 >= shape.size() || at > 1 || shape[at] < 2 || (channels > 0 && shape[at] != channels)) return nullptr;
  for (std::size_t d = at + 1; d < shape.size(); ++d)
    if (shape[d] != 1) return nullptr;
  const float* v = t->data<float>();
  for (int64_t i = 0; i < t->numel(); ++i)
    if (std::isnan(v[i])) return nullptr;
  rank = shape.size() - at + 1;
  return t;
}

// v * factor + bias per channel as a BatchNorm stage (mean 0); no factor: 1.
EpilogueStage channel_affine(const Tensor* factor, const Tensor& bias) {
  EpilogueStage e;
  e.kind = EpilogueStage::Kind::BatchNorm;
  const auto c = static_cast<std::size_t>(bias.numel());
  e.mean.assign(c, 0.0f);
  e.bias.assign(bias.data<float>(), bias.data<float>() + c);
  if (factor) e.factor.assign(factor->data<float>(), factor->data<float>() + c);
  else e.factor.assign(c, 1.0f);
  return e;
}

// Runs `program` (Q/DQ pairs) over the float32 output of a kernel that ignores epilogues:
// in place when only this output (and the arena's handle) shares its storage, else on a
// copy, since the kernel may have returned an input or a view of one. Leaves an output of
// another dtype alone: the absorbed nodes then run on their own.
Status run_after_kernel(const Epilogue& program, KernelContext& context) {
  Tensor& out = context.outputs[0];
  if (out.dtype() != DType::Float32 || !program.fits(out.shape().size(), -1)) return Status::ok();
  const long owners = 1 + (context.arena && context.arena->handed_out_unheld(out) ? 1 : 0);
  if (out.use_count() != owners) {
    QFLOW_ASSIGN_OR_RETURN(Tensor copy, context.allocate(DType::Float32, out.shape()));
    if (out.numel() > 0) std::copy_n(out.data<float>(), out.numel(), copy.data<float>());
    out = std::move(copy);
  }
  float* data = out.data<float>();
  context.parallel_for(out.numel(), 4, [&](int64_t begin, int64_t end) {
    activation::finish_rows(&program, data + begin, 1, end - begin, end - begin, -1, nullptr);
  });
  context.epilogue_applied = true;
  return Status::ok();
}

}  // namespace

Executor::Executor(const Model& model, const ExecutorOptions& options) : model_(model), options_(options) {}
Executor::~Executor() = default;

std::size_t Executor::fused_count() const {
  std::size_t n = 0;
  for (const Step& s : steps_)
    if (s.fusion) n += s.fusion->steps.size();
  return n;
}

std::size_t Executor::folded_count() const {
  return static_cast<std::size_t>(std::count_if(steps_.begin(), steps_.end(), [](const Step& s) { return s.folded.has_value(); }));
}

Expected<std::unique_ptr<Executor>> Executor::create(const Model& model, const ExecutorOptions& options,
                                                     const KernelRegistry& registry) {
  std::unique_ptr<Executor> executor(new Executor(model, options));
  Executor& ex = *executor;
  const Graph& graph = *model.graph;
  // A subgraph reads values no node of its own makes: its enclosing graph checked them.
  if (!options.subgraph) QFLOW_RETURN_IF_ERROR(graph.validate());
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
  // Outer values get slots like inputs; one read only by a nested subgraph has no Value here.
  for (const std::string& name : options.outer_values) {
    if (const Value* v = graph.find_value(name)) {
      ex.outer_slots_[name] = slot_of(v);
    } else {
      ex.outer_slots_[name] = static_cast<int>(ex.slot_values_.size());
      ex.slot_values_.push_back(nullptr);
      ex.constants_.push_back(nullptr);
    }
  }
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
    bool all_constant = true;
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
    for (const std::string& name : captured_value_names(*node)) {
      int slot = -1;
      if (const Value* v = graph.find_value(name); v && defined_in(graph, *v)) {
        slot = slot_of(v);
      } else if (auto it = ex.outer_slots_.find(name); it != ex.outer_slots_.end()) {
        slot = it->second;
      } else {
        return invalid_input("a subgraph of " + node->op_type() + " '" + node->name() + "' reads '" + name +
                             "', which no enclosing graph defines");
      }
      step.captured.emplace_back(name, slot);
      all_constant = false;
    }
    // A kernel that computes half-precision values through float32 is built on float32
    // copies of its half constants (prepacked weights).
    step.widens_half = computes_half_in_float32(*node);
    std::vector<Tensor> widened;
    const std::vector<const Tensor*> factory_constants = step.widens_half ? widen_half(constants, widened) : constants;
    // Control flow builds its subgraphs' executors with this model's opsets and registry.
    auto kernel = is_control_flow(*node) ? make_control_flow_kernel(*node, model.opset_imports, registry)
                                         : (*factory)(*node, opset, factory_constants);
    if (!kernel) return kernel.status();
    step.kernel = std::move(kernel).value();

    // A node of constants gives the same outputs on every run (DequantizeLinear of weights,
    // shape arithmetic, Constant): compute it once here, so later kernels can prepack it and
    // the fusion plan can read it. A failure is left for run() to report.
    const bool fixed = any_input || node->op_type() == "Constant";
    if (all_constant && fixed && is_default_domain(*node) && !is_random(*node)) {
      KernelContext context{*node, opset, constants, {}, ex.pool_.get()};
      context.outputs.resize(node->outputs().size());
      bool complete = compute_node(*step.kernel, step.widens_half, context).is_ok();
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
    for (const auto& [name, slot] : ex.steps_[s].captured) last_use[static_cast<std::size_t>(slot)] = static_cast<int>(s);
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
  if (!options_.keep_buffers) return;
  std::lock_guard<std::mutex> lock(arenas_mutex_);
  arenas_.push_back(std::move(arena));
}

void Executor::plan_fusions(const KernelRegistry& registry) {
  std::unordered_map<const Node*, std::size_t> step_of;
  for (std::size_t s = 0; s < order_.size(); ++s) step_of[order_[s]] = s;
  std::unordered_map<const Value*, int> slot_of;
  for (std::size_t slot = 0; slot < slot_values_.size(); ++slot)
    if (slot_values_[slot]) slot_of.emplace(slot_values_[slot], static_cast<int>(slot));
  const std::unordered_set<int> keep(keep_.begin(), keep_.end());
  const std::unordered_set<int> overridable(overridable_.begin(), overridable_.end());
  const ConstantOf constant_of = [&](const Value* v) -> const Tensor* {
    auto it = slot_of.find(v);
    if (it == slot_of.end() || overridable.count(it->second)) return nullptr;
    return constants_[static_cast<std::size_t>(it->second)];
  };
  auto kept = [&](const Value* v) {
    auto it = slot_of.find(v);
    return it != slot_of.end() && keep.count(it->second) > 0;
  };
  // The step of a node the epilogue may compute: one output, the built-in kernel (only it
  // is known to compute what the stage computes), not folded.
  auto absorbable = [&](const Node& node) -> std::optional<std::size_t> {
    if (!is_default_domain(node) || node.outputs().empty() || !node.outputs()[0]) return std::nullopt;
    for (std::size_t i = 1; i < node.outputs().size(); ++i)
      if (node.outputs()[i]) return std::nullopt;
    const int64_t opset = model_.opset(node.domain());
    const KernelFactory* factory = registry.find(node.domain(), node.op_type(), opset);
    if (!factory || factory != KernelRegistry::builtin().find(node.domain(), node.op_type(), opset)) return std::nullopt;
    auto at = step_of.find(&node);
    if (at == step_of.end() || steps_[at->second].folded) return std::nullopt;
    return at->second;
  };
  // The only use of `v` when it has exactly one and that is as input `input`.
  auto sole_use = [](const Value* v, int input) -> const Node* {
    if (v->uses().size() != 1 || v->uses()[0].second != input) return nullptr;
    return v->uses()[0].first;
  };

  // The Q/DQ pair `v` feeds as its only use, as one FakeQuant stage (the QuantizeLinear's
  // integer output going to the DequantizeLinear only): the stage, both steps and the
  // DequantizeLinear's output.
  struct QdqPair {
    EpilogueStage stage;
    std::size_t q_step, dq_step;
    const Value* out;
  };
  auto qdq_pair = [&](const Value* v) -> std::optional<QdqPair> {
    const Node* q = sole_use(v, 0);
    if (!q || q->op_type() != "QuantizeLinear") return std::nullopt;
    const auto q_at = absorbable(*q);
    const Node* dq = q_at && !kept(q->outputs()[0]) ? sole_use(q->outputs()[0], 0) : nullptr;
    const auto dq_at = dq ? absorbable(*dq) : std::nullopt;
    const auto stage = dq_at ? fake_quant_stage(constant_of, *q, *dq) : std::nullopt;
    if (!stage) return std::nullopt;
    return QdqPair{*stage, *q_at, *dq_at, dq->outputs()[0]};
  };

  // Mul(x, HardSigmoid(x)) as one stage and the steps of the HardSigmoid and the Mul; with
  // a Q/DQ pair between the gate and the Mul (QDQ models), also the pair's steps.
  auto hard_sigmoid_product = [&](const Value* x) -> std::optional<std::pair<EpilogueStage, std::vector<std::size_t>>> {
    const Node* gate_node = nullptr;
    const Node* mul = nullptr;
    for (const auto& [user, input] : x->uses()) {
      if (user->op_type() == "HardSigmoid" && input == 0) gate_node = user;
      else if (user->op_type() == "Mul") mul = user;
    }
    if (!gate_node || !mul || mul->inputs().size() != 2 || mul->outputs().empty() || !mul->outputs()[0])
      return std::nullopt;
    const Value* gate = gate_node->outputs().empty() ? nullptr : gate_node->outputs()[0];
    if (!gate || kept(gate) || gate->uses().size() != 1) return std::nullopt;
    const auto gate_step = absorbable(*gate_node), mul_step = absorbable(*mul);
    if (!gate_step || !mul_step || model_.opset(mul->domain()) < 7) return std::nullopt;
    EpilogueStage stage;
    stage.kind = EpilogueStage::Kind::HardSigmoidProduct;
    std::vector<std::size_t> steps{*gate_step};
    if (gate->uses()[0].first != mul) {
      const auto pair = qdq_pair(gate);
      if (!pair || kept(pair->out) || pair->out->uses().size() != 1 || pair->out->uses()[0].first != mul)
        return std::nullopt;
      stage = pair->stage;
      stage.kind = EpilogueStage::Kind::HardSigmoidProductQuantized;
      steps.push_back(pair->q_step);
      steps.push_back(pair->dq_step);
    }
    stage.alpha = gate_node->attr_float("alpha", 0.2f);
    stage.beta = gate_node->attr_float("beta", 0.5f);
    steps.push_back(*mul_step);
    return std::make_pair(stage, steps);
  };

  // `node` (reading x) with one value per channel: an Add is a BatchNorm stage with mean 0
  // and factor 1, since (v - 0) * 1 + b is v + b for every v; a Mul only with such an Add
  // after it ((v - 0) * k + b = v * k + b; alone, v * k + 0 would turn -0 into +0). The
  // stage, the Add's step after a Mul, the value it ends at and the output rank it needs.
  struct ChannelStage {
    EpilogueStage stage;
    std::optional<std::size_t> add_step;
    const Value* out;
    std::size_t rank;
  };
  auto channel_stage = [&](const Node& node, const Value* x, int64_t channels) -> std::optional<ChannelStage> {
    std::size_t rank = 0;
    if (node.op_type() == "Add") {
      const Tensor* b = channel_operand(constant_of, node, x, channels, rank);
      if (!b) return std::nullopt;
      return ChannelStage{channel_affine(nullptr, *b), std::nullopt, node.outputs()[0], rank};
    }
    const Tensor* k = node.op_type() == "Mul" ? channel_operand(constant_of, node, x, channels, rank) : nullptr;
    if (!k) return std::nullopt;
    const Value* product = node.outputs()[0];
    const Node* add = !kept(product) && product->uses().size() == 1 ? product->uses()[0].first : nullptr;
    if (!add || add->op_type() != "Add" || model_.opset(add->domain()) < 7) return std::nullopt;
    std::size_t add_rank = 0;
    const Tensor* b = channel_operand(constant_of, *add, product, channels, add_rank);
    const auto add_at = b && add_rank == rank && b->numel() == k->numel() ? absorbable(*add) : std::nullopt;
    if (!add_at) return std::nullopt;
    return ChannelStage{channel_affine(k, *b), add_at, add->outputs()[0], rank};
  };

  std::vector<char> absorbed(steps_.size(), 0);
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    Step& step = steps_[s];
    if (step.folded || step.outputs.size() != 1 || step.outputs[0] < 0) continue;
    // Any other producer still sheds the integer tensor of a Q/DQ pair after it, unless an
    // earlier program already computes it.
    const bool after_kernel = !step.kernel->supports_epilogue();
    if (after_kernel && absorbed[s]) continue;
    // Per-channel stages need the producer's rows to be channels: Conv's and ConvTranspose's
    // are, Gemm's are not.
    const std::string& producer_op = order_[s]->op_type();
    const bool per_channel = producer_op == "Conv" || producer_op == "ConvTranspose";
    // With a constant weight the channel count is known now: per-position parameters of
    // the same length never pass as per-channel ones. ConvTranspose's weight is
    // [C_in, C_out / group, ...].
    const std::vector<Value*>& producer_inputs = order_[s]->inputs();
    const Tensor* weight = producer_inputs.size() > 1 && producer_inputs[1] ? constant_of(producer_inputs[1]) : nullptr;
    int64_t conv_channels = 0;
    if (per_channel && weight && weight->rank() > 1)
      conv_channels = producer_op == "Conv" ? weight->dim(0) : weight->dim(1) * order_[s]->attr_int("group", 1);
    Fusion fusion;
    fusion.after_kernel = after_kernel;
    Epilogue& program = fusion.epilogue;
    const Value* x = slot_values_[static_cast<std::size_t>(step.outputs[0])];
    // Extend the chain while the current value is needed by nothing but its next node.
    while (!kept(x)) {
      if (x->uses().size() == 2 && !after_kernel) {
        // x * HardSigmoid(x), with x feeding exactly the HardSigmoid and the Mul.
        if (const auto product = hard_sigmoid_product(x)) {
          program.stages.push_back(product->first);
          for (const std::size_t at : product->second) fusion.steps.push_back(at);
          x = order_[product->second.back()]->outputs()[0];
          continue;
        }
        // x * Clip(x + a, lo, hi) / d, with x feeding exactly the Add and the Mul.
        const Node* add = nullptr;
        const Node* mul = nullptr;
        for (const auto& [user, input] : x->uses()) {
          (void)input;
          if (user->op_type() == "Add") add = user;
          else if (user->op_type() == "Mul") mul = user;
        }
        if (!add || !mul) break;
        std::size_t min_rank = program.min_rank;
        const auto add_stage = binary_stage(constant_of, *add, model_.opset(add->domain()), x, min_rank);
        const Value* sum = add->outputs().empty() ? nullptr : add->outputs()[0];
        const Node* clip = sum && !kept(sum) ? sole_use(sum, 0) : nullptr;
        if (!add_stage || !clip || clip->op_type() != "Clip" || clip->outputs().empty()) break;
        const auto bounds = clip_bounds(*clip, model_.opset(clip->domain()), float32_constants(constant_of));
        const Value* gate = clip->outputs()[0];
        if (!bounds || !gate || kept(gate) || gate->uses().size() != 1 || gate->uses()[0].first != mul) break;
        if (mul->inputs().size() != 2 || mul->outputs().empty() || !mul->outputs()[0]) break;
        const Value* product = mul->outputs()[0];
        const Node* div = !kept(product) ? sole_use(product, 0) : nullptr;
        if (!div || div->op_type() != "Div" || model_.opset(div->domain()) < 7 || div->inputs().size() != 2) break;
        const auto divisor = scalar_constant(div->inputs()[1], float32_constants(constant_of));
        if (!divisor) break;
        const auto steps = {absorbable(*add), absorbable(*clip), absorbable(*mul), absorbable(*div)};
        if (std::any_of(steps.begin(), steps.end(), [](const auto& at) { return !at; })) break;
        EpilogueStage diamond;
        diamond.kind = EpilogueStage::Kind::HardSwishDiamond;
        diamond.constant = add_stage->constant;
        diamond.lo = static_cast<float>(bounds->min);
        diamond.hi = static_cast<float>(bounds->max);
        diamond.divisor = static_cast<float>(divisor->value);
        program.stages.push_back(std::move(diamond));
        program.min_rank = std::max(min_rank, divisor->rank);
        for (const auto& at : steps) fusion.steps.push_back(*at);
        x = div->outputs()[0];
        continue;
      }
      if (x->uses().size() != 1) break;
      const Node& next = *x->uses()[0].first;
      const auto at = absorbable(next);
      if (!at) break;
      const int64_t opset = model_.opset(next.domain());
      const bool first_input = x->uses()[0].second == 0;
      if (first_input && next.op_type() == "QuantizeLinear") {
        const auto pair = qdq_pair(x);
        if (!pair) break;
        program.stages.push_back(pair->stage);
        fusion.steps.push_back(pair->q_step);
        fusion.steps.push_back(pair->dq_step);
        x = pair->out;
        continue;
      }
      if (after_kernel) break;
      std::optional<EpilogueStage> stage;
      if (first_input) stage = activation_stage(constant_of, next, opset);
      if (!stage) stage = binary_stage(constant_of, next, opset, x, program.min_rank);
      if (!stage && first_input && per_channel) {
        int64_t channels = program.channels ? program.channels : conv_channels;
        stage = batchnorm_stage(constant_of, next, opset, channels);
        if (stage) program.channels = channels;
      }
      if (!stage && per_channel && opset >= 7) {
        const auto affine = channel_stage(next, x, program.channels ? program.channels : conv_channels);
        if (affine && (program.exact_rank == 0 || program.exact_rank == affine->rank)) {
          program.channels = static_cast<int64_t>(affine->stage.bias.size());
          program.exact_rank = affine->rank;
          program.stages.push_back(affine->stage);
          fusion.steps.push_back(*at);
          if (affine->add_step) fusion.steps.push_back(*affine->add_step);
          x = affine->out;
          continue;
        }
      }
      if (!stage) break;
      program.stages.push_back(std::move(*stage));
      fusion.steps.push_back(*at);
      x = next.outputs()[0];
    }
    for (const std::size_t at : fusion.steps) absorbed[at] = 1;
    if (!fusion.steps.empty()) step.fusion = std::move(fusion);
  }
}

Expected<std::map<std::string, Tensor>> Executor::run(const std::map<std::string, Tensor>& inputs,
                                                      const ValueHook& hook, RunProfile* profile) const {
  const Graph& graph = *model_.graph;
  if (profile) {
    profile->seconds.resize(steps_.size(), 0.0);
    profile->computed.assign(steps_.size(), 0);
    profile->fused_into.assign(steps_.size(), -1);
    ++profile->runs;
  }
  std::vector<Tensor> env(slot_values_.size());

  for (const auto& [name, tensor] : inputs) {
    const bool known = outer_slots_.count(name) ||
                       std::any_of(input_slots_.begin(), input_slots_.end(),
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
    if (!options_.subgraph) QFLOW_RETURN_IF_ERROR(check_input(*v, it->second));
    if (slot >= 0) env[static_cast<std::size_t>(slot)] = it->second;
  }
  for (const auto& [name, slot] : outer_slots_) {
    auto it = inputs.find(name);
    if (it == inputs.end()) return invalid_input("outer value '" + name + "' was not given");
    env[static_cast<std::size_t>(slot)] = it->second;
  }

  // The run borrows an arena; on every way out, after the results were taken, the run's own
  // tensors are dropped and the arena takes back what nobody else holds. With a hook every
  // value is handed out, so nothing is fused, and a value the hook kept is never reused.
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
  } lease{*this, env, take_arena()};
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
    for (const auto& [name, slot] : step.captured) {
      const std::size_t at = static_cast<std::size_t>(slot);
      const Tensor* t = !env[at].empty() ? &env[at] : constants_[at];
      if (!t) return internal_error("value '" + name + "' captured by node '" + node.name() + "' was not computed");
      context.captured.emplace_back(name, t);
    }
    context.outputs.resize(step.outputs.size());
    const bool fuse = step.fusion && !hook;
    if (fuse) context.epilogue = &step.fusion->epilogue;
    const auto started = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    QFLOW_RETURN_IF_ERROR(compute_node(*step.kernel, step.widens_half, context));
    // Element-wise kernels run the pairs themselves, block by block as they write.
    if (fuse && step.fusion->after_kernel && !context.epilogue_applied && !context.outputs[0].empty())
      QFLOW_RETURN_IF_ERROR(run_after_kernel(step.fusion->epilogue, context));
    if (profile) {
      profile->seconds[s] += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      profile->computed[s] = 1;
    }
    for (std::size_t i = 0; i < step.outputs.size(); ++i)
      if (step.outputs[i] >= 0 && context.outputs[i].empty())
        return internal_error(node.op_type() + " '" + node.name() + "' did not produce output " + std::to_string(i));
    if (fuse && context.epilogue_applied) {
      // The output already went through the absorbed nodes: it is the last one's value.
      store(steps_[step.fusion->steps.back()].outputs[0], std::move(context.outputs[0]));
      for (std::size_t absorbed : step.fusion->steps) {
        skipped[absorbed] = 1;
        if (profile) profile->fused_into[absorbed] = static_cast<int>(s);
      }
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
