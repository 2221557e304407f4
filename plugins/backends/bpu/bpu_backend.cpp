// BpuBackend: the constraint checks behind capability() and the plan behind compile().
#include "bpu_backend.h"

#include <algorithm>
#include <optional>
#include <string>

#include "partition_plan.h"
#include "plugin_location.h"

namespace qflow {

namespace {

std::optional<Shape> static_shape_of(const Graph& graph, const Value* value) {
  if (!value) return std::nullopt;
  if (const Tensor* t = graph.initializer(value)) return t->shape();
  if (value->type) return value->type->static_shape();
  return std::nullopt;
}

bool is_conv(const Node& node) { return node.op_type() == "Conv" || node.op_type() == "ConvTranspose"; }

std::string join_dims(const std::vector<int64_t>& dims) {
  std::string out;
  for (int64_t d : dims) {
    if (!out.empty()) out += 'x';
    out += std::to_string(d);
  }
  return out;
}

// "9x9 > 7x7": the actual value and the limit spelled over the same axes.
std::optional<std::string> check_each_axis(const std::vector<int64_t>& dims, int64_t limit) {
  if (std::none_of(dims.begin(), dims.end(), [limit](int64_t d) { return d > limit; })) return std::nullopt;
  return join_dims(dims) + " > " + join_dims(std::vector<int64_t>(dims.size(), limit));
}

std::string weight_name(const Node& node) { return node.input(1) ? node.input(1)->name() : std::string("<missing>"); }

// Spatial kernel from the attribute, else from the weight's trailing dimensions.
std::optional<std::vector<int64_t>> kernel_of(const Graph& graph, const Node& node) {
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (!kernel.empty()) return kernel;
  if (!is_conv(node)) return std::nullopt;
  const std::optional<Shape> w = static_shape_of(graph, node.input(1));
  if (!w || w->size() < 3) return std::nullopt;
  return std::vector<int64_t>(w->begin() + 2, w->end());
}

std::optional<std::string> check_limits(const Graph& graph, const Node& node, const BpuOpLimits& limits) {
  const std::string& op = node.op_type();
  if (limits.max_kernel) {
    const auto kernel = kernel_of(graph, node);
    if (!kernel) return op + " kernel size is unknown (no kernel_shape and weight '" + weight_name(node) + "' has no static shape)";
    if (auto failed = check_each_axis(*kernel, *limits.max_kernel)) return op + " kernel " + *failed;
  }
  if (limits.max_stride) {
    const std::vector<int64_t> strides = node.attr_ints("strides");
    if (auto failed = check_each_axis(strides, *limits.max_stride)) return op + " stride " + *failed;
  }
  if (limits.max_channels && is_conv(node)) {
    const std::optional<Shape> w = static_shape_of(graph, node.input(1));
    if (!w || w->size() < 2) return op + " channels are unknown (weight '" + weight_name(node) + "' has no static shape)";
    // Conv weights are [M, C/group, k...], ConvTranspose weights [C, M/group, k...].
    const int64_t group = node.attr_int("group", 1);
    const bool transpose = op == "ConvTranspose";
    const int64_t in = transpose ? (*w)[0] : (*w)[1] * group;
    const int64_t out = transpose ? (*w)[1] * group : (*w)[0];
    if (in > *limits.max_channels)
      return op + " input channels " + std::to_string(in) + " > " + std::to_string(*limits.max_channels);
    if (out > *limits.max_channels)
      return op + " output channels " + std::to_string(out) + " > " + std::to_string(*limits.max_channels);
  }
  return std::nullopt;
}

}  // namespace

ComponentInfo BpuBackend::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Backend;
  info.name = "bpu";
  info.summary = "BPU capability check against a platform description and the CPU/BPU partition plan";
  info.options = {
      {"platform", OptionType::String, std::string("nash"), "BPU generation: a file name in the platform folder (bernoulli2, bayes, nash)"},
      {"platform-dir", OptionType::String, std::string(""), "folder of platform .toml files; empty: bpu-platforms next to the plugin"},
  };
  return info;
}

Expected<std::unique_ptr<Backend>> BpuBackend::create(const Options& options) {
  std::string directory = options.get_string("platform-dir");
  if (directory.empty()) {
    QFLOW_ASSIGN_OR_RETURN(std::string plugin_dir, bpu_plugin_directory());
    directory = plugin_dir + "/bpu-platforms";
  }
  QFLOW_ASSIGN_OR_RETURN(BpuPlatform platform, load_bpu_platform(directory, options.get_string("platform")));
  return std::unique_ptr<Backend>(std::make_unique<BpuBackend>(std::move(platform)));
}

NodeCapability BpuBackend::check_node(const Graph& graph, const Node& node) const {
  NodeCapability cap;
  cap.node = node.name();
  cap.op_type = node.op_type();
  const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
  const auto it = default_domain ? platform_.ops.find(node.op_type()) : platform_.ops.end();
  if (it == platform_.ops.end()) {
    const std::string op = default_domain ? node.op_type() : node.domain() + "::" + node.op_type();
    cap.reason = "op type " + op + " is not supported on " + platform_.name;
    return cap;
  }
  if (auto failed = check_limits(graph, node, it->second)) {
    cap.reason = *failed;
    return cap;
  }
  cap.supported = true;
  return cap;
}

Expected<std::vector<NodeCapability>> BpuBackend::capability(const Model& model) const {
  if (!model.graph) return invalid_input("bpu backend: the model has no graph");
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, model.graph->topological_order());
  std::vector<NodeCapability> result;
  result.reserve(order.size());
  for (const Node* node : order) result.push_back(check_node(*model.graph, *node));
  return result;
}

Expected<std::string> BpuBackend::compile(const Model& model, const QuantTable& qparams) const {
  QFLOW_ASSIGN_OR_RETURN(std::vector<NodeCapability> caps, capability(model));
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, build_partition_plan(*model.graph, std::move(caps)));
  return partition_plan_json(plan, platform_.name, model.graph->name, qparams);
}

}  // namespace qflow
