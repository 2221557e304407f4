// Opset upgrade 13..20 -> 21: the changelog of every default-domain op in between and the
// adapters that keep a raised model computing what it computed before.
#include "framework/quant/opset_upgrade.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "framework/onnx/onnx_version.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

using enum OpChangeKind;

// From the ONNX operator changelog (docs/Changelog.md, "Version N of the default ONNX operator
// set"), opsets 14 to 21. SameMeaning entries were read for their defaults: every attribute or
// input they add is optional and its default is what older nodes did.
constexpr std::array kChanges = {
    OpChange{"Add", 14, SameMeaning, "8- and 16-bit integer and bfloat16 types"},
    OpChange{"BatchNormalization", 14, Adapted,
             "training_mode attribute; a training node outputs Y, running mean and running variance only"},
    OpChange{"CumSum", 14, SameMeaning, "more numeric types"},
    OpChange{"Div", 14, SameMeaning, "8- and 16-bit integer and bfloat16 types"},
    OpChange{"GRU", 14, SameMeaning, "layout attribute (default 0: the older layout)"},
    OpChange{"HardSwish", 14, Introduced, "new op"},
    OpChange{"Identity", 14, SameMeaning, "sequence types"},
    OpChange{"LSTM", 14, SameMeaning, "layout attribute (default 0: the older layout)"},
    OpChange{"Mul", 14, SameMeaning, "8- and 16-bit integer and bfloat16 types"},
    OpChange{"RNN", 14, SameMeaning, "layout attribute (default 0: the older layout)"},
    OpChange{"Relu", 14, SameMeaning, "signed integer types"},
    OpChange{"Reshape", 14, SameMeaning, "allowzero attribute (default 0: a 0 copies the input dimension, as before)"},
    OpChange{"Sub", 14, SameMeaning, "8- and 16-bit integer and bfloat16 types"},
    OpChange{"Trilu", 14, Introduced, "new op"},

    OpChange{"BatchNormalization", 15, SameMeaning, "separate types for scale/bias and mean/variance"},
    OpChange{"Bernoulli", 15, Introduced, "new op"},
    OpChange{"CastLike", 15, Introduced, "new op"},
    OpChange{"Optional", 15, Introduced, "new op"},
    OpChange{"OptionalGetElement", 15, Introduced, "new op"},
    OpChange{"OptionalHasElement", 15, Introduced, "new op"},
    OpChange{"Pow", 15, SameMeaning, "bfloat16 type"},
    OpChange{"Shape", 15, SameMeaning, "start and end attributes (defaults: the whole shape)"},

    OpChange{"GreaterOrEqual", 16, SameMeaning, "bfloat16 type"},
    OpChange{"GridSample", 16, Introduced, "new op"},
    OpChange{"Identity", 16, SameMeaning, "optional types"},
    OpChange{"If", 16, SameMeaning, "optional types"},
    OpChange{"LeakyRelu", 16, SameMeaning, "bfloat16 type"},
    OpChange{"LessOrEqual", 16, SameMeaning, "bfloat16 type"},
    OpChange{"Loop", 16, SameMeaning, "optional types"},
    OpChange{"PRelu", 16, SameMeaning, "bfloat16 type"},
    OpChange{"RoiAlign", 16, Adapted,
             "coordinate_transformation_mode attribute whose default, half_pixel, shifts input coordinates by "
             "-0.5; older nodes meant output_half_pixel"},
    OpChange{"Scan", 16, SameMeaning, "optional types"},
    OpChange{"ScatterElements", 16, SameMeaning, "reduction attribute (default none: as before)"},
    OpChange{"ScatterND", 16, SameMeaning, "reduction attribute (default none: as before)"},
    OpChange{"Where", 16, SameMeaning, "bfloat16 type"},

    OpChange{"BlackmanWindow", 17, Introduced, "new op"},
    OpChange{"DFT", 17, Introduced, "new op"},
    OpChange{"HammingWindow", 17, Introduced, "new op"},
    OpChange{"HannWindow", 17, Introduced, "new op"},
    OpChange{"LayerNormalization", 17, Introduced, "new op"},
    OpChange{"MelWeightMatrix", 17, Introduced, "new op"},
    OpChange{"STFT", 17, Introduced, "new op"},
    OpChange{"SequenceMap", 17, Introduced, "new op"},

    OpChange{"BitwiseAnd", 18, Introduced, "new op"},
    OpChange{"BitwiseNot", 18, Introduced, "new op"},
    OpChange{"BitwiseOr", 18, Introduced, "new op"},
    OpChange{"BitwiseXor", 18, Introduced, "new op"},
    OpChange{"CenterCropPad", 18, Introduced, "new op"},
    OpChange{"Col2Im", 18, Introduced, "new op"},
    OpChange{"GroupNormalization", 18, Introduced, "new op"},
    OpChange{"LpPool", 18, SameMeaning, "ceil_mode and dilations attributes (defaults: as before)"},
    OpChange{"Mish", 18, Introduced, "new op"},
    OpChange{"OptionalGetElement", 18, SameMeaning, "accepts plain tensors"},
    OpChange{"OptionalHasElement", 18, SameMeaning, "accepts plain tensors"},
    OpChange{"Pad", 18, SameMeaning, "optional axes input (absent: every axis, as before)"},
    OpChange{"ReduceL1", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceL2", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceLogSum", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceLogSumExp", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceMax", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceMean", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceMin", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceProd", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"ReduceSumSquare", 18, Adapted, "axes moved from an attribute to an input"},
    OpChange{"Resize", 18, SameMeaning, "antialias, axes and keep_aspect_ratio_policy attributes (defaults: as before)"},
    OpChange{"ScatterElements", 18, SameMeaning, "max and min reductions"},
    OpChange{"ScatterND", 18, SameMeaning, "max and min reductions"},
    OpChange{"Split", 18, Adapted, "num_outputs attribute, required when there is no split input"},

    OpChange{"AveragePool", 19, SameMeaning, "dilations attribute (default 1)"},
    OpChange{"Cast", 19, SameMeaning, "float8 types; saturate attribute (affects float8 results only)"},
    OpChange{"CastLike", 19, SameMeaning, "float8 types; saturate attribute (affects float8 results only)"},
    OpChange{"Constant", 19, SameMeaning, "float8 types"},
    OpChange{"DeformConv", 19, Introduced, "new op"},
    OpChange{"DequantizeLinear", 19, SameMeaning, "float8 types"},
    OpChange{"Equal", 19, SameMeaning, "string type"},
    OpChange{"Identity", 19, SameMeaning, "float8 types"},
    OpChange{"If", 19, SameMeaning, "float8 types"},
    OpChange{"Loop", 19, SameMeaning, "float8 types"},
    OpChange{"Pad", 19, SameMeaning, "wrap mode"},
    OpChange{"QuantizeLinear", 19, SameMeaning, "float8 types; saturate attribute (affects float8 results only)"},
    OpChange{"Reshape", 19, SameMeaning, "float8 types"},
    OpChange{"Resize", 19, SameMeaning, "half_pixel_symmetric coordinate mode"},
    OpChange{"Scan", 19, SameMeaning, "float8 types"},
    OpChange{"Shape", 19, SameMeaning, "float8 types"},
    OpChange{"Size", 19, SameMeaning, "float8 types"},

    OpChange{"AffineGrid", 20, Introduced, "new op"},
    OpChange{"ConstantOfShape", 20, SameMeaning, "float8 types"},
    OpChange{"DFT", 20, Adapted, "axis moved from an attribute (default 1) to an input (default -2)"},
    OpChange{"Gelu", 20, Introduced, "new op"},
    OpChange{"GridSample", 20, Adapted, "modes bilinear and bicubic renamed linear and cubic; N-D inputs"},
    OpChange{"ImageDecoder", 20, Introduced, "new op"},
    OpChange{"IsInf", 20, SameMeaning, "float8 types"},
    OpChange{"IsNaN", 20, SameMeaning, "float8 types"},
    OpChange{"ReduceMax", 20, SameMeaning, "bool type"},
    OpChange{"ReduceMin", 20, SameMeaning, "bool type"},
    OpChange{"RegexFullMatch", 20, Introduced, "new op"},
    OpChange{"StringConcat", 20, Introduced, "new op"},
    OpChange{"StringSplit", 20, Introduced, "new op"},

    OpChange{"Cast", 21, SameMeaning, "4-bit integer types"},
    OpChange{"CastLike", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Constant", 21, SameMeaning, "4-bit integer types"},
    OpChange{"ConstantOfShape", 21, SameMeaning, "4-bit integer types"},
    OpChange{"DequantizeLinear", 21, SameMeaning,
             "4-bit types; block_size attribute (default 0: per tensor or per axis, as before)"},
    OpChange{"Flatten", 21, SameMeaning, "4-bit integer types"},
    OpChange{"GroupNormalization", 21, Adapted, "scale and bias per channel instead of per group; stash_type attribute"},
    OpChange{"Identity", 21, SameMeaning, "4-bit integer types"},
    OpChange{"If", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Loop", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Pad", 21, SameMeaning, "4-bit integer types"},
    OpChange{"QLinearMatMul", 21, SameMeaning, "float8 types"},
    OpChange{"QuantizeLinear", 21, SameMeaning,
             "4-bit types; block_size and output_dtype attributes (defaults: the zero point's type, as before)"},
    OpChange{"Reshape", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Scan", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Shape", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Size", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Squeeze", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Transpose", 21, SameMeaning, "4-bit integer types"},
    OpChange{"Unsqueeze", 21, SameMeaning, "4-bit integer types"},
};

// --- adapters ---------------------------------------------------------------------------------

// Why a node cannot be adapted (empty: it can).
using CheckFn = std::string (*)(const Graph&, const Node&);
// Rewrites a node that passed its check into the newer form.
using ApplyFn = void (*)(Graph&, Node&);

std::string node_label(const Node& node) {
  return node.op_type() + (node.name().empty() ? std::string() : " '" + node.name() + "'");
}

std::string value_hint(const Node& node, const std::string& what) {
  std::string base = node.name().empty() ? node.op_type() : node.name();
  return base + "_" + what;
}

Value* add_constant(Graph& graph, const Node& node, const std::string& what, Tensor tensor) {
  Value* value = graph.create_unique_value(value_hint(node, what));
  graph.set_initializer(value, std::move(tensor));
  return value;
}

Value* add_node_output(Graph& graph, const Node& node, const std::string& what, const std::string& op,
                       const std::vector<Value*>& inputs) {
  Value* out = graph.create_unique_value(value_hint(node, what));
  graph.add_node(op, inputs, {out}, out->name());
  return out;
}

// BatchNormalization 14: training is an attribute, and the outputs saved_mean/saved_var are
// gone. A node with only Y is inference, which did not change.
std::string check_batch_normalization(const Graph&, const Node& node) {
  const auto& outs = node.outputs();
  if (std::any_of(outs.begin() + std::min<std::ptrdiff_t>(1, static_cast<std::ptrdiff_t>(outs.size())), outs.end(),
                  [](const Value* v) { return v != nullptr; }))
    return "it has training-mode outputs (mean, variance, saved mean and variance), which opset 14 defines differently";
  return {};
}

// RoiAlign 16: the default coordinate mode became half_pixel; older nodes did not shift.
void adapt_roi_align(Graph&, Node& node) {
  node.set_attribute(Attribute::make_string("coordinate_transformation_mode", "output_half_pixel"));
}

// Reduce* 18: the axes attribute becomes input 1 (absent or empty: every axis, as before,
// since noop_with_empty_axes defaults to 0).
void adapt_reduce(Graph& graph, Node& node) {
  const Attribute* axes = node.find_attribute("axes");
  if (!axes) return;
  const std::vector<int64_t> values = axes->ints;
  node.remove_attribute("axes");
  if (values.empty()) return;
  Tensor tensor = Tensor::from_vector<int64_t>({static_cast<int64_t>(values.size())}, values);
  node.set_input(1, add_constant(graph, node, "axes", std::move(tensor)));
}

// Split 18: without a split input the number of parts is the num_outputs attribute.
void adapt_split(Graph&, Node& node) {
  if (node.input(1)) return;
  node.set_attribute(Attribute::make_int("num_outputs", static_cast<int64_t>(node.outputs().size())));
}

// DFT 20: the axis attribute (default 1) becomes input 2 (whose default is -2).
void adapt_dft(Graph& graph, Node& node) {
  const int64_t axis = node.attr_int("axis", 1);
  node.remove_attribute("axis");
  node.set_input(2, add_constant(graph, node, "axis", Tensor::scalar<int64_t>(axis)));
}

// GridSample 20: the interpolation modes were renamed (default bilinear -> linear).
void adapt_grid_sample(Graph&, Node& node) {
  const Attribute* mode = node.find_attribute("mode");
  if (!mode || mode->type != AttributeType::String) return;
  if (mode->s == "bilinear") node.set_attribute(Attribute::make_string("mode", "linear"));
  if (mode->s == "bicubic") node.set_attribute(Attribute::make_string("mode", "cubic"));
}

std::optional<int64_t> static_channels(const Node& node) {
  const Value* x = node.input(0);
  if (!x || !x->type || !x->type->shape || x->type->shape->size() < 2) return std::nullopt;
  return (*x->type->shape)[1].value;
}

// GroupNormalization 21: scale and bias hold one value per channel, not per group.
std::string check_group_normalization(const Graph& graph, const Node& node) {
  const int64_t groups = node.attr_int("num_groups", 0);
  if (groups <= 0) return "its num_groups attribute is missing or not positive";
  for (std::size_t i = 1; i <= 2; ++i) {
    const Value* v = node.input(i);
    if (!v) return "it has no " + std::string(i == 1 ? "scale" : "bias") + " input";
    const Tensor* t = graph.initializer(v);
    if (t && (t->dtype() != DType::Float32 || t->numel() != groups))
      return "its " + std::string(i == 1 ? "scale" : "bias") + " is not " + std::to_string(groups) + " float32 values";
  }
  if (const auto channels = static_channels(node); channels && *channels % groups != 0)
    return std::to_string(*channels) + " channels do not split into " + std::to_string(groups) + " groups";
  return {};
}

// Each of the G values of `values` repeated over the C / G channels of its group: a constant
// when both are known, else Unsqueeze -> Expand([G, C / G]) -> Reshape([-1]) with C read
// from the input's shape at run time.
Value* per_channel(Graph& graph, const Node& node, Value* values, int64_t groups, Value*& group_shape) {
  const Tensor* constant = graph.initializer(values);
  const std::optional<int64_t> channels = static_channels(node);
  if (constant && channels) {
    const int64_t per_group = *channels / groups;
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(*channels));
    for (float v : constant->span<float>()) out.insert(out.end(), static_cast<std::size_t>(per_group), v);
    return add_constant(graph, node, values->name() + "_per_channel", Tensor::from_vector<float>({*channels}, out));
  }
  if (!group_shape) {
    Value* shape = graph.create_unique_value(value_hint(node, "channels"));
    Node* shape_node = graph.add_node("Shape", {node.input(0)}, {shape}, shape->name());
    shape_node->set_attribute(Attribute::make_int("start", 1));
    shape_node->set_attribute(Attribute::make_int("end", 2));
    Value* g = add_constant(graph, node, "groups", Tensor::from_vector<int64_t>({1}, {groups}));
    Value* per_group = add_node_output(graph, node, "channels_per_group", "Div", {shape, g});
    group_shape = graph.create_unique_value(value_hint(node, "group_shape"));
    graph.add_node("Concat", {g, per_group}, {group_shape}, group_shape->name())
        ->set_attribute(Attribute::make_int("axis", 0));
  }
  Value* axis = add_constant(graph, node, "unsqueeze_axes", Tensor::from_vector<int64_t>({1}, {1}));
  Value* column = add_node_output(graph, node, values->name() + "_column", "Unsqueeze", {values, axis});
  Value* grid = add_node_output(graph, node, values->name() + "_expanded", "Expand", {column, group_shape});
  Value* flat = add_constant(graph, node, "flat_shape", Tensor::from_vector<int64_t>({1}, {-1}));
  return add_node_output(graph, node, values->name() + "_per_channel", "Reshape", {grid, flat});
}

void adapt_group_normalization(Graph& graph, Node& node) {
  const int64_t groups = node.attr_int("num_groups", 1);
  Value* group_shape = nullptr;
  Value* scale = per_channel(graph, node, node.input(1), groups, group_shape);
  Value* bias = per_channel(graph, node, node.input(2), groups, group_shape);
  node.set_input(1, scale);
  node.set_input(2, bias);
  // Opset 18 normalized in the input's type; 21 in stash_type, float32 by default.
  const Value* x = node.input(0);
  if (x->type && x->type->dtype != DType::Undefined && x->type->dtype != DType::Float32)
    node.set_attribute(Attribute::make_int("stash_type", static_cast<int64_t>(x->type->dtype)));
}

struct Adapter {
  std::string_view op;
  int64_t version;
  CheckFn check;  // null: every node can be adapted
  ApplyFn apply;  // null: nothing to rewrite once the check passed
};

constexpr std::array kAdapters = {
    Adapter{"BatchNormalization", 14, check_batch_normalization, nullptr},
    Adapter{"RoiAlign", 16, nullptr, adapt_roi_align},
    Adapter{"ReduceL1", 18, nullptr, adapt_reduce},
    Adapter{"ReduceL2", 18, nullptr, adapt_reduce},
    Adapter{"ReduceLogSum", 18, nullptr, adapt_reduce},
    Adapter{"ReduceLogSumExp", 18, nullptr, adapt_reduce},
    Adapter{"ReduceMax", 18, nullptr, adapt_reduce},
    Adapter{"ReduceMean", 18, nullptr, adapt_reduce},
    Adapter{"ReduceMin", 18, nullptr, adapt_reduce},
    Adapter{"ReduceProd", 18, nullptr, adapt_reduce},
    Adapter{"ReduceSumSquare", 18, nullptr, adapt_reduce},
    Adapter{"Split", 18, nullptr, adapt_split},
    Adapter{"DFT", 20, nullptr, adapt_dft},
    Adapter{"GridSample", 20, nullptr, adapt_grid_sample},
    Adapter{"GroupNormalization", 21, check_group_normalization, adapt_group_normalization},
};

const Adapter* find_adapter(std::string_view op, int64_t version) {
  for (const Adapter& a : kAdapters)
    if (a.op == op && a.version == version) return &a;
  return nullptr;
}

bool default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// The changes of `node`'s op that need an adapter between `from` (excluded) and `to`.
std::vector<const OpChange*> adapted_changes(const Node& node, int64_t from, int64_t to) {
  std::vector<const OpChange*> out;
  if (!default_domain(node)) return out;
  for (const OpChange& c : kChanges)
    if (c.kind == Adapted && c.op == node.op_type() && c.version > from && c.version <= to) out.push_back(&c);
  return out;
}

template <typename GraphT, typename Fn>
void for_each_graph(GraphT& graph, const Fn& fn) {
  fn(graph);
  for (const auto& node : graph.nodes())
    for (const Attribute& a : node->attributes()) {
      if (a.g) for_each_graph(static_cast<GraphT&>(*a.g), fn);
      for (const auto& g : a.graphs)
        if (g) for_each_graph(static_cast<GraphT&>(*g), fn);
    }
}

Status check_versions(int64_t current, int64_t target) {
  if (target > kOpsetUpgradeTo)
    return unsupported("cannot raise the default-domain opset to " + std::to_string(target) + ": qflow adapts ops up to opset " +
                       std::to_string(kOpsetUpgradeTo));
  if (current < kOpsetUpgradeFrom)
    return unsupported("cannot raise the default-domain opset " + std::to_string(current) + ": qflow's adapters start at opset " +
                       std::to_string(kOpsetUpgradeFrom) + " (import with min-opset = 13 first)");
  return Status::ok();
}

// libonnx's opset adapters need the rank of some inputs (Softmax 12 -> 13 does) that
// shape inference cannot derive when a Reshape target is computed at run time. One run of
// the interpreter on zeros (dynamic dimensions: 1 for the first axis, 64 for the others)
// gives every value's rank; they are declared rank-only for the conversion and removed
// again afterwards. Returns the names it declared; a failing probe declares nothing.
std::set<std::string> declare_probed_ranks(Model& model) {
  std::map<std::string, Tensor> feeds;
  for (const Value* input : model.graph->runtime_inputs()) {
    if (!input->type || !input->type->shape) return {};
    Shape shape;
    for (std::size_t axis = 0; axis < input->type->shape->size(); ++axis) {
      const Dim& dim = (*input->type->shape)[axis];
      shape.push_back(dim.value ? *dim.value : (axis == 0 ? 1 : 64));
    }
    feeds.emplace(input->name(), Tensor(input->type->dtype, shape));
  }
  Expected<std::unique_ptr<Executor>> executor = Executor::create(model);
  if (!executor) return {};
  std::map<std::string, std::pair<DType, std::size_t>> probed;
  auto outputs = (*executor)->run(feeds, [&](const Value& value, const Tensor& tensor) {
    probed[value.name()] = {tensor.dtype(), tensor.rank()};
    return Status::ok();
  });
  if (!outputs) return {};
  std::set<std::string> declared;
  Graph& graph = *model.graph;
  for (const auto& [name, type] : probed) {
    Value* value = graph.find_value(name);
    if (!value || value->type) continue;
    value->type = ValueType{type.first, std::vector<Dim>(type.second), "", ""};
    graph.value_info.push_back(value);
    declared.insert(name);
  }
  return declared;
}

void forget_declared(Model& model, const std::set<std::string>& declared) {
  Graph& graph = *model.graph;
  auto& info = graph.value_info;
  info.erase(std::remove_if(info.begin(), info.end(), [&](Value* value) { return declared.count(value->name()) > 0; }),
             info.end());
  for (const std::string& name : declared)
    if (Value* value = graph.find_value(name)) value->type.reset();
}

}  // namespace

std::span<const OpChange> opset_changes() { return kChanges; }

std::vector<std::string> opset_upgrade_blockers(const Model& model, int64_t target) {
  const int64_t current = model.opset("");
  if (Status versions = check_versions(current, target); !versions) return {versions.message()};
  std::vector<std::string> out;
  for_each_graph(static_cast<const Graph&>(*model.graph), [&](const Graph& graph) {
    for (const auto& node : graph.nodes())
      for (const OpChange* change : adapted_changes(*node, current, target)) {
        const Adapter* adapter = find_adapter(change->op, change->version);
        std::string why = adapter ? (adapter->check ? adapter->check(graph, *node) : std::string())
                                  : "qflow has no adapter for it";
        if (!why.empty())
          out.push_back(node_label(*node) + " (changed at opset " + std::to_string(change->version) + ": " +
                        std::string(change->what) + "): " + why);
      }
  });
  return out;
}

Status upgrade_opset(Model& model, int64_t target) {
  const int64_t current = model.opset("");
  if (current >= target) return Status::ok();
  QFLOW_RETURN_IF_ERROR(check_versions(current, target));
  const std::vector<std::string> blockers = opset_upgrade_blockers(model, target);
  if (!blockers.empty()) {
    std::string message;
    for (const std::string& b : blockers) message += (message.empty() ? "" : "; ") + b;
    return unsupported("cannot raise the model from opset " + std::to_string(current) + " to " + std::to_string(target) +
                       ": " + message);
  }
  for_each_graph(*model.graph, [&](Graph& graph) {
    std::vector<Node*> nodes;
    for (const auto& node : graph.nodes()) nodes.push_back(node.get());
    for (Node* node : nodes)
      for (const OpChange* change : adapted_changes(*node, current, target))
        if (const Adapter* adapter = find_adapter(change->op, change->version); adapter && adapter->apply)
          adapter->apply(graph, *node);
    // Adapters append the nodes they add; ONNX wants execution order.
    if (graph.node_count() != nodes.size())
      if (auto order = graph.topological_order())
        graph.move_nodes_to_end(*order);
  });
  for (OpsetImport& import : model.opset_imports)
    if (import.domain.empty() || import.domain == "ai.onnx") import.version = target;
  return Status::ok();
}

Status convert_opset_with_ranks(Model& model, int64_t target) {
  const std::set<std::string> declared = declare_probed_ranks(model);
  Expected<Model> converted = convert_opset(model, target);
  if (converted) model = std::move(converted).value();
  forget_declared(model, declared);
  return converted ? Status::ok() : converted.status();
}

Status raise_opset(Model& model, int64_t target) {
  const int64_t current = model.opset("");
  if (target <= current) return Status::ok();
  if (target > kOpsetUpgradeTo) return check_versions(current, target);
  if (current < kOpsetUpgradeFrom) {
    QFLOW_RETURN_IF_ERROR(convert_opset_with_ranks(model, std::min(target, kOpsetUpgradeFrom)));
  }
  return upgrade_opset(model, target);
}

}  // namespace qflow
