// BpuBackend: the constraint checks behind capability(), the placement overrides, and the plan behind compile().
#include "bpu_backend.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "platform_files.h"
#include "plugin_location.h"

namespace qflow {

namespace {

bool is_conv(const Node& node) { return node.op_type() == "Conv" || node.op_type() == "ConvTranspose"; }

// Constant inputs: initializers and outputs of Constant nodes with a tensor value.
const Tensor* constant_tensor(const Graph& graph, const Value* value) {
  if (!value) return nullptr;
  if (const Tensor* t = graph.initializer(value)) return t;
  const Node* producer = value->producer();
  if (producer && producer->op_type() == "Constant" && (producer->domain().empty() || producer->domain() == "ai.onnx"))
    if (const Attribute* a = producer->find_attribute("value"); a && a->type == AttributeType::Tensor) return &a->t;
  return nullptr;
}

bool is_constant(const Graph& graph, const Value* value) { return constant_tensor(graph, value) != nullptr; }

std::optional<Shape> static_shape_of(const Graph& graph, const Value* value) {
  if (!value) return std::nullopt;
  if (const Tensor* t = constant_tensor(graph, value)) return t->shape();
  if (value->type) return value->type->static_shape();
  return std::nullopt;
}

// Declared dims of an activation (some may be symbolic), or nullopt when the rank is unknown.
const std::vector<Dim>* declared_dims(const Value* value) {
  if (!value || !value->type || !value->type->shape) return nullptr;
  return &*value->type->shape;
}

std::string join_dims(const std::vector<int64_t>& dims) {
  std::string out;
  for (int64_t d : dims) {
    if (!out.empty()) out += 'x';
    out += std::to_string(d);
  }
  return out;
}

std::string join_list(const std::vector<int64_t>& items) {
  std::string out;
  for (int64_t d : items) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Shortest text that reads back as the same double.
std::string number_text(double value) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

std::string number_text(float value) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

// "9x9 > 7x7": the actual value and the limit spelled over the same axes.
std::optional<std::string> over(const std::vector<int64_t>& dims, int64_t limit) {
  if (std::none_of(dims.begin(), dims.end(), [limit](int64_t d) { return d > limit; })) return std::nullopt;
  return join_dims(dims) + " > " + join_dims(std::vector<int64_t>(dims.size(), limit));
}

std::optional<std::string> under(const std::vector<int64_t>& dims, int64_t limit) {
  if (std::none_of(dims.begin(), dims.end(), [limit](int64_t d) { return d < limit; })) return std::nullopt;
  return join_dims(dims) + " < " + join_dims(std::vector<int64_t>(dims.size(), limit));
}

std::string value_name(const Value* v) { return v ? v->name() : std::string("<missing>"); }

// Spatial kernel from the attribute, else from the weight's trailing dimensions.
std::optional<std::vector<int64_t>> kernel_of(const Graph& graph, const Node& node) {
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (!kernel.empty()) return kernel;
  if (!is_conv(node)) return std::nullopt;
  const std::optional<Shape> w = static_shape_of(graph, node.input(1));
  if (!w || w->size() < 3) return std::nullopt;
  return std::vector<int64_t>(w->begin() + 2, w->end());
}

struct Failure {
  std::string reason;
  bool unknown = false;
};
using Check = std::optional<Failure>;

Check fail(std::string reason) { return Failure{std::move(reason), false}; }
Check unknown(std::string reason) { return Failure{std::move(reason), true}; }

// Activation inputs: neither initializers nor Constant outputs.
std::vector<const Value*> activation_inputs(const Graph& graph, const Node& node) {
  std::vector<const Value*> out;
  for (const Value* in : node.inputs())
    if (in && !is_constant(graph, in)) out.push_back(in);
  return out;
}

// Ops whose every input is data; the others take data at input 0 and parameters (scales,
// sizes, shapes, pads, bounds) after it.
const std::set<std::string> kAllDataInputs = {"Add", "And", "Concat", "Div", "Equal", "Gemm", "Greater", "Less",
                                              "MatMul", "Max", "Mean", "Min", "Mul", "Or", "Pow", "Sub", "Sum", "Where"};

// Rank and batch of every activation data input whose declared shape says so; a shape that
// is not declared is not checked (the check command runs ONNX shape inference first).
Check check_inputs(const Graph& graph, const Node& node, const std::vector<int64_t>& ranks,
                   std::optional<int64_t> max_batch) {
  std::vector<const Value*> inputs = activation_inputs(graph, node);
  if (!kAllDataInputs.count(node.op_type()))
    inputs.erase(std::remove_if(inputs.begin(), inputs.end(), [&](const Value* v) { return v != node.input(0); }),
                 inputs.end());
  for (const Value* in : inputs) {
    const std::vector<Dim>* dims = declared_dims(in);
    if (!dims) continue;
    const auto rank = static_cast<int64_t>(dims->size());
    if (!ranks.empty() && std::find(ranks.begin(), ranks.end(), rank) == ranks.end())
      return fail(node.op_type() + " input '" + in->name() + "' rank " + std::to_string(rank) + " not in {" +
                  join_list(ranks) + "}");
    if (max_batch && rank > 0 && (*dims)[0].value && *(*dims)[0].value > *max_batch)
      return fail(node.op_type() + " input '" + in->name() + "' batch " + std::to_string(*(*dims)[0].value) + " > " +
                  std::to_string(*max_batch));
  }
  return std::nullopt;
}

Check check_window(const Graph& graph, const Node& node, const BpuOpLimits& limits) {
  const std::string& op = node.op_type();
  const bool needs_kernel = limits.max_kernel || limits.min_kernel || limits.max_stride || !limits.strides.empty() ||
                            limits.max_dilation || limits.dilation_power_of_two;
  if (!needs_kernel) return std::nullopt;
  const auto kernel = kernel_of(graph, node);
  if (!kernel)
    return unknown(op + " kernel size is unknown (no kernel_shape and weight '" + value_name(node.input(1)) +
                   "' has no static shape)");
  if (limits.min_kernel)
    if (auto failed = under(*kernel, *limits.min_kernel)) return fail(op + " kernel " + *failed);
  if (limits.max_kernel)
    if (auto failed = over(*kernel, *limits.max_kernel)) return fail(op + " kernel " + *failed);
  const std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(kernel->size(), 1));
  if (limits.max_stride)
    if (auto failed = over(strides, *limits.max_stride)) return fail(op + " stride " + *failed);
  if (!limits.strides.empty())
    for (int64_t s : strides)
      if (std::find(limits.strides.begin(), limits.strides.end(), s) == limits.strides.end())
        return fail(op + " stride " + join_dims(strides) + " not in {" + join_list(limits.strides) + "}");
  const std::vector<int64_t> dilations = node.attr_ints("dilations", std::vector<int64_t>(kernel->size(), 1));
  if (limits.max_dilation)
    if (auto failed = over(dilations, *limits.max_dilation)) return fail(op + " dilation " + *failed);
  if (limits.dilation_power_of_two)
    for (int64_t d : dilations)
      if (d < 1 || (d & (d - 1)) != 0) return fail(op + " dilation " + join_dims(dilations) + " is not a power of two");
  return std::nullopt;
}

Check check_channels(const Graph& graph, const Node& node, int64_t limit) {
  const std::string& op = node.op_type();
  if (is_conv(node)) {
    const std::optional<Shape> w = static_shape_of(graph, node.input(1));
    if (!w || w->size() < 2)
      return unknown(op + " channels are unknown (weight '" + value_name(node.input(1)) + "' has no static shape)");
    // Conv weights are [M, C/group, k...], ConvTranspose weights [C, M/group, k...].
    const int64_t group = node.attr_int("group", 1);
    const bool transpose = op == "ConvTranspose";
    const int64_t in = transpose ? (*w)[0] : (*w)[1] * group;
    const int64_t out = transpose ? (*w)[1] * group : (*w)[0];
    if (in > limit) return fail(op + " input channels " + std::to_string(in) + " > " + std::to_string(limit));
    if (out > limit) return fail(op + " output channels " + std::to_string(out) + " > " + std::to_string(limit));
    return std::nullopt;
  }
  // Concat: the output's channel axis (1), from its declared shape or the sum of the inputs'.
  std::optional<int64_t> channels;
  if (const std::vector<Dim>* dims = declared_dims(node.output(0)); dims && dims->size() > 1) channels = (*dims)[1].value;
  if (!channels && node.attr_int("axis", 1) == 1) {
    int64_t sum = 0;
    bool known = true;
    for (const Value* in : node.inputs()) {
      const std::optional<Shape> s = static_shape_of(graph, in);
      if (!s || s->size() < 2) {
        known = false;
        break;
      }
      sum += (*s)[1];
    }
    if (known) channels = sum;
  }
  if (channels && *channels > limit)
    return fail(op + " output channels " + std::to_string(*channels) + " > " + std::to_string(limit));
  return std::nullopt;
}

// Scale factors of the spatial axes (2 and beyond): from `scales` (Upsample input 1 or
// attribute, Resize-10 input 1, Resize-11+ input 2), else from constant `sizes` over the
// input's static shape.
std::optional<std::vector<double>> resize_scales(const Graph& graph, const Node& node) {
  const Tensor* scales = nullptr;
  if (node.op_type() == "Upsample") {
    if (const Attribute* a = node.find_attribute("scales")) {
      std::vector<double> out;
      for (std::size_t i = 2; i < a->floats.size(); ++i) out.push_back(a->floats[i]);
      return out;
    }
    scales = constant_tensor(graph, node.input(1));
  } else {
    scales = constant_tensor(graph, node.inputs().size() == 2 ? node.input(1) : node.input(2));
  }
  if (scales && scales->numel() > 0 && scales->dtype() == DType::Float32) {
    std::vector<double> out;
    const auto values = scales->span<float>();
    for (std::size_t i = 2; i < values.size(); ++i) out.push_back(values[i]);
    return out;
  }
  const Tensor* sizes = node.op_type() == "Resize" ? constant_tensor(graph, node.input(3)) : nullptr;
  const std::optional<Shape> in = static_shape_of(graph, node.input(0));
  if (!sizes || sizes->dtype() != DType::Int64 || !in || static_cast<std::size_t>(sizes->numel()) != in->size())
    return std::nullopt;
  std::vector<double> out;
  const auto values = sizes->span<int64_t>();
  for (std::size_t i = 2; i < values.size(); ++i) {
    if ((*in)[i] <= 0) return std::nullopt;
    out.push_back(static_cast<double>(values[i]) / static_cast<double>((*in)[i]));
  }
  return out;
}

Check check_resize(const Graph& graph, const Node& node, const BpuOpLimits& limits) {
  const std::string& op = node.op_type();
  if (!limits.modes.empty()) {
    const std::string mode = node.attr_string("mode", "nearest");
    if (std::find(limits.modes.begin(), limits.modes.end(), mode) == limits.modes.end())
      return fail(op + " mode " + mode + " not in {" + join_list(limits.modes) + "}");
  }
  if (!limits.max_scale && !limits.integer_scales) return std::nullopt;
  const auto scales = resize_scales(graph, node);
  if (!scales) return unknown(op + " scale factors are unknown (no constant scales, no constant sizes over a static input)");
  std::string text;
  for (double s : *scales) text += (text.empty() ? "" : "x") + number_text(s);
  if (limits.max_scale)
    for (double s : *scales)
      if (s > *limits.max_scale) {
        std::string limit;
        for (std::size_t i = 0; i < scales->size(); ++i) limit += (i ? "x" : "") + number_text(*limits.max_scale);
        return fail(op + " scale " + text + " > " + limit);
      }
  if (limits.integer_scales)
    for (double s : *scales)
      if (s != std::floor(s)) return fail(op + " scale " + text + " is not a whole number");
  return std::nullopt;
}

bool is_power_of_two(float scale) {
  int exponent = 0;
  return scale > 0.0f && std::isfinite(scale) && std::frexp(scale, &exponent) == 0.5f;
}

std::string op_key(const Node& node) {
  const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
  return default_domain ? node.op_type() : node.domain() + "::" + node.op_type();
}

}  // namespace

// Also what an empty `platform` names, so a pipeline var left empty gives each target its own default.
constexpr const char* kDefaultPlatform = "nash";

std::vector<OptionSpec> BpuBackend::options() {
  return {
      {"platform", OptionType::String, std::string(kDefaultPlatform),
       "BPU platform: NAME.toml on the platform search path (built in: bernoulli2, bayes, nash); \"\" = nash"},
      {"platform-dir", OptionType::String, std::string(""),
       "folders of platform .toml files (colon-separated), searched before $QFLOW_PLATFORM_PATH and the built-in ones"},
      {"run-on-cpu", OptionType::StringList, std::vector<std::string>{}, "node names to place on the CPU whatever the checks say"},
      {"run-on-bpu", OptionType::StringList, std::vector<std::string>{},
       "node names that must run on the BPU; an error names any the platform cannot run"},
  };
}

Expected<BpuBackend> BpuBackend::from_options(const Options& options) {
  QFLOW_ASSIGN_OR_RETURN(std::string plugin_dir, bpu_plugin_directory());
  std::string name = options.get_string("platform");
  if (name.empty()) name = kDefaultPlatform;
  QFLOW_ASSIGN_OR_RETURN(BpuPlatform platform,
                         find_bpu_platform(plugin_support::platform_search_folders(options.get_string("platform-dir")), plugin_dir + "/bpu-platforms", name));
  return BpuBackend(std::move(platform), BpuPlacementOverrides{options.get_strings("run-on-cpu"), options.get_strings("run-on-bpu")});
}

const BpuOpLimits* BpuBackend::limits_of(const Node& node) const {
  const auto it = platform_.ops.find(op_key(node));
  return it == platform_.ops.end() ? nullptr : &it->second;
}

BpuBackend::Verdict BpuBackend::check_node(const Graph& graph, const Node& node) const {
  const BpuOpLimits* limits = limits_of(node);
  if (!limits) return {"op type " + op_key(node) + " is not supported on " + platform_.name, false};
  const std::vector<int64_t>& ranks = limits->input_ranks.empty() ? platform_.input_ranks : limits->input_ranks;
  const std::optional<int64_t> max_batch = limits->max_batch ? limits->max_batch : platform_.max_batch;
  Check failed = check_inputs(graph, node, ranks, max_batch);
  if (!failed) failed = check_window(graph, node, *limits);
  if (!failed && limits->max_channels) failed = check_channels(graph, node, *limits->max_channels);
  if (!failed) failed = check_resize(graph, node, *limits);
  if (!failed && limits->constant_rhs && !is_constant(graph, node.input(1)))
    failed = fail(node.op_type() + " input '" + value_name(node.input(1)) + "' is not a constant (" + platform_.name +
                  " multiplies only by constant weights)");
  if (!failed) return {};
  return {failed->reason, failed->unknown};
}

Expected<std::vector<NodeCapability>> BpuBackend::capability(const Model& model) const {
  if (!model.graph) return invalid_input("bpu backend: the model has no graph");
  const Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());

  // Every override must name a node, and no node may be in both lists.
  std::set<std::string> names;
  for (const Node* node : order) names.insert(node->name());
  const std::set<std::string> to_cpu(overrides_.run_on_cpu.begin(), overrides_.run_on_cpu.end());
  const std::set<std::string> to_bpu(overrides_.run_on_bpu.begin(), overrides_.run_on_bpu.end());
  for (const auto& [option, list] : {std::pair{"run-on-cpu", &overrides_.run_on_cpu}, std::pair{"run-on-bpu", &overrides_.run_on_bpu}})
    for (const std::string& name : *list)
      if (!names.count(name)) return invalid_input(std::string(option) + ": the model has no node named '" + name + "'");
  for (const std::string& name : to_cpu)
    if (to_bpu.count(name)) return invalid_input("node '" + name + "' is in both run-on-cpu and run-on-bpu");

  std::vector<NodeCapability> result;
  result.reserve(order.size());
  std::unordered_map<const Node*, std::size_t> position;
  for (const Node* node : order) {
    position.emplace(node, result.size());
    NodeCapability cap;
    cap.node = node->name();
    cap.op_type = node->op_type();
    const Verdict verdict = check_node(graph, *node);
    if (to_cpu.count(node->name())) {
      cap.reason = "placed on the CPU by run-on-cpu";
    } else if (to_bpu.count(node->name())) {
      if (!verdict.reason.empty() && !verdict.unknown)
        return invalid_input("run-on-bpu: node '" + node->name() + "' cannot run on " + platform_.name + ": " + verdict.reason);
      cap.supported = true;
    } else {
      cap.supported = verdict.reason.empty();
      cap.reason = verdict.reason;
    }
    result.push_back(std::move(cap));
  }

  // A constant producer (Constant, no runtime input) belongs to its consumers' subgraph;
  // when every consumer is on the CPU it stays there too, instead of forming a BPU
  // subgraph of one constant.
  for (std::size_t i = order.size(); i-- > 0;) {
    const Node* node = order[i];
    if (!result[i].supported || to_bpu.count(node->name()) || !activation_inputs(graph, *node).empty()) continue;
    bool has_consumer = false, all_cpu = true;
    for (const Value* out : node->outputs()) {
      if (!out) continue;
      if (std::find(graph.outputs.begin(), graph.outputs.end(), out) != graph.outputs.end()) all_cpu = false;
      for (const auto& [user, index] : out->uses()) {
        (void)index;
        has_consumer = true;
        all_cpu = all_cpu && !result[position.at(user)].supported;
      }
    }
    if (has_consumer && all_cpu) {
      result[i].supported = false;
      result[i].reason = node->op_type() + " feeds only CPU nodes";
    }
  }
  return result;
}

std::string BpuBackend::check_quantization(const Graph& graph, const Node& node, const QuantTable& qparams) const {
  const BpuOpLimits* limits = limits_of(node);
  if (!limits) return {};
  const std::vector<std::string>& activation =
      limits->dtypes.activation.empty() ? platform_.dtypes.activation : limits->dtypes.activation;
  const std::vector<std::string>& weight = limits->dtypes.weight.empty() ? platform_.dtypes.weight : limits->dtypes.weight;
  auto check = [&](const Value* value, const char* role) -> std::string {
    if (!value) return {};
    const auto it = qparams.find(value->name());
    if (it == qparams.end()) return {};
    const std::vector<std::string>& allowed = graph.is_initializer(value) ? weight : activation;
    const std::string dtype(dtype_name(it->second.dtype));
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), dtype) == allowed.end())
      return node.op_type() + " " + role + " '" + value->name() + "' is " + dtype + " (allowed on " + platform_.name +
             ": " + join_list(allowed) + ")";
    if (platform_.power_of_two_scales)
      for (float s : it->second.scale)
        if (!is_power_of_two(s))
          return node.op_type() + " " + role + " '" + value->name() + "' scale " + number_text(s) +
                 " is not a power of two (" + platform_.name + " needs power-of-two scales)";
    return {};
  };
  for (const Value* in : node.inputs())
    if (std::string reason = check(in, "input"); !reason.empty()) return reason;
  for (const Value* out : node.outputs())
    if (std::string reason = check(out, "output"); !reason.empty()) return reason;
  return {};
}

Expected<PartitionPlan> BpuBackend::plan(const Model& model, const QuantTable& qparams) const {
  QFLOW_ASSIGN_OR_RETURN(std::vector<NodeCapability> caps, capability(model));
  const Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  const std::set<std::string> to_bpu(overrides_.run_on_bpu.begin(), overrides_.run_on_bpu.end());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!caps[i].supported) continue;
    std::string reason = check_quantization(graph, *order[i], qparams);
    if (reason.empty()) continue;
    if (to_bpu.count(order[i]->name()))
      return invalid_input("run-on-bpu: node '" + order[i]->name() + "' cannot run on " + platform_.name + ": " + reason);
    caps[i].supported = false;
    caps[i].reason = std::move(reason);
  }
  return build_partition_plan(graph, std::move(caps));
}

Expected<std::string> BpuBackend::compile(const Model& model, const QuantTable& qparams) const {
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan partition, plan(model, qparams));
  return partition_plan_json(partition, platform_.name, model.graph->name, qparams);
}

}  // namespace qflow
