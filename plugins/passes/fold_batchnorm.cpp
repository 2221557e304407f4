// FoldBatchNorm: per-channel affine of a BatchNormalization moved into weights and bias.
#include "fold_batchnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qflow/ir/constants.h"
#include "qflow/ir/node_order.h"
#include "qflow/ir/pattern.h"

namespace qflow {

namespace {

using pattern::is_default_domain;

bool contains(const std::vector<Value*>& values, const Value* v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// A float32 constant (Tensor copies share storage, so this copies no data).
std::optional<Tensor> constant_float(const Graph& graph, const Value* v) {
  std::optional<Tensor> t = graph_constant(graph, v);
  return t && t->dtype() == DType::Float32 ? t : std::nullopt;
}

// The only consumer of `v` is one node input and it is not a graph output.
bool single_use(const Graph& graph, const Value* v) { return v->uses().size() == 1 && !contains(graph.outputs, v); }

// y = x * scale + shift per channel, in double.
struct ChannelAffine {
  std::vector<double> scale;
  std::vector<double> shift;
  std::size_t channels() const { return scale.size(); }
};

std::optional<ChannelAffine> inference_affine(const Graph& graph, const Node& bn) {
  if (bn.op_type() != "BatchNormalization" || !is_default_domain(bn)) return std::nullopt;
  if (bn.inputs().size() < 5 || !bn.input(0) || !bn.output(0)) return std::nullopt;
  // Training mode and the pre-opset-9 per-element form are different computations.
  if (bn.attr_int("training_mode", 0) != 0 || bn.attr_int("spatial", 1) != 1) return std::nullopt;
  for (std::size_t i = 1; i < bn.outputs().size(); ++i) {
    const Value* extra = bn.output(i);
    if (extra && (!extra->uses().empty() || contains(graph.outputs, extra))) return std::nullopt;
  }
  std::vector<Tensor> params;
  for (std::size_t i = 1; i < 5; ++i) {
    std::optional<Tensor> t = constant_float(graph, bn.input(i));
    if (!t || t->rank() != 1) return std::nullopt;
    params.push_back(*t);
  }
  const int64_t channels = params[0].numel();
  if (channels <= 0) return std::nullopt;
  for (const Tensor& t : params)
    if (t.numel() != channels) return std::nullopt;
  const double eps = static_cast<double>(bn.attr_float("epsilon", 1e-5f));
  const auto gamma = params[0].span<float>();
  const auto beta = params[1].span<float>();
  const auto mean = params[2].span<float>();
  const auto var = params[3].span<float>();
  ChannelAffine affine;
  affine.scale.resize(static_cast<std::size_t>(channels));
  affine.shift.resize(static_cast<std::size_t>(channels));
  for (std::size_t c = 0; c < affine.scale.size(); ++c) {
    const double denom = static_cast<double>(var[c]) + eps;
    if (!(denom > 0.0)) return std::nullopt;
    affine.scale[c] = static_cast<double>(gamma[c]) / std::sqrt(denom);
    affine.shift[c] = static_cast<double>(beta[c]) - static_cast<double>(mean[c]) * affine.scale[c];
  }
  return affine;
}

// Declared rank of a value, when known.
std::optional<std::size_t> declared_rank(const Value* v) {
  if (!v || !v->type || !v->type->shape) return std::nullopt;
  return v->type->shape->size();
}


enum class Target { Conv, ConvTranspose, Gemm, MatMul };

// Folded weight, bias and the node kind that will carry them.
struct Folded {
  Target target;
  Tensor weight;
  Tensor bias;
};

// Output channel of each weight element, or empty when the weight does not fit.
std::vector<std::size_t> weight_channels(const Node& producer, Target target, const Tensor& w, std::size_t channels) {
  std::vector<std::size_t> channel_of;
  const auto n = static_cast<std::size_t>(w.numel());
  if (target == Target::Conv) {
    if (w.rank() < 3 || w.dim(0) != static_cast<int64_t>(channels)) return {};
    const std::size_t inner = n / channels;
    channel_of.resize(n);
    for (std::size_t i = 0; i < n; ++i) channel_of[i] = i / inner;
  } else if (target == Target::ConvTranspose) {
    // Layout [C_in, C_out / group, k...]: output channel = group index * (C_out / group) + dim-1 index.
    const int64_t group = producer.attr_int("group", 1);
    if (w.rank() < 3 || group <= 0 || w.dim(0) % group != 0 || w.dim(1) * group != static_cast<int64_t>(channels))
      return {};
    const auto in_per_group = static_cast<std::size_t>(w.dim(0) / group);
    const auto out_per_group = static_cast<std::size_t>(w.dim(1));
    const std::size_t inner = n / (static_cast<std::size_t>(w.dim(0)) * out_per_group);
    channel_of.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t in_channel = i / (out_per_group * inner);
      const std::size_t j = (i / inner) % out_per_group;
      channel_of[i] = (in_channel / in_per_group) * out_per_group + j;
    }
  } else {
    // Gemm and MatMul: output channels are the columns of the product.
    const bool trans_b = target == Target::Gemm && producer.attr_int("transB", 0) != 0;
    if (w.rank() != 2 || w.dim(trans_b ? 0 : 1) != static_cast<int64_t>(channels)) return {};
    const auto cols = static_cast<std::size_t>(w.dim(1));
    channel_of.resize(n);
    for (std::size_t i = 0; i < n; ++i) channel_of[i] = trans_b ? i / cols : i % cols;
  }
  return channel_of;
}

// The producer's bias as one value per output channel (zeros when absent), or nullopt
// when its shape is not per-channel.
std::optional<std::vector<double>> effective_bias(const Graph& graph, const Node& producer, Target target,
                                                  std::size_t channels) {
  std::vector<double> bias(channels, 0.0);
  if (target == Target::MatMul) return bias;
  const Value* b = producer.input(2);
  if (!b) return bias;
  const std::optional<Tensor> t = constant_float(graph, b);
  if (!t) return std::nullopt;
  const auto values = t->span<float>();
  if (target == Target::Gemm) {
    // Gemm adds beta * C broadcast to [M, N]; only a scalar or a row is per-column.
    const double beta = static_cast<double>(producer.attr_float("beta", 1.0f));
    const Shape& s = t->shape();
    const bool scalar = t->numel() == 1 && s.size() <= 2;
    const bool row = t->numel() == static_cast<int64_t>(channels) && (s.size() == 1 || (s.size() == 2 && s[0] == 1));
    if (!scalar && !row) return std::nullopt;
    for (std::size_t c = 0; c < channels; ++c) bias[c] = beta * static_cast<double>(values[scalar ? 0 : c]);
    return bias;
  }
  if (t->rank() != 1 || t->numel() != static_cast<int64_t>(channels)) return std::nullopt;
  for (std::size_t c = 0; c < channels; ++c) bias[c] = static_cast<double>(values[c]);
  return bias;
}

std::optional<Target> target_of(const Model& model, const Node& producer, const Node& bn) {
  if (!is_default_domain(producer)) return std::nullopt;
  const std::string& op = producer.op_type();
  if (op == "Conv") return Target::Conv;
  if (op == "ConvTranspose") return Target::ConvTranspose;
  // A per-column C needs Gemm's broadcasting, which opset 7 made implicit.
  if (model.opset() < 7) return std::nullopt;
  if (op == "Gemm") return Target::Gemm;
  if (op == "MatMul") {
    // BatchNormalization's channel axis is 1, the product's last axis only for a 2-D [N, C].
    const bool two_d = declared_rank(producer.input(0)) == 2u || declared_rank(bn.input(0)) == 2u ||
                       declared_rank(bn.output(0)) == 2u;
    if (two_d) return Target::MatMul;
  }
  return std::nullopt;
}

std::optional<Folded> fold(const Model& model, const Node& producer, const Node& bn, const ChannelAffine& affine) {
  const Graph& graph = *model.graph;
  const auto target = target_of(model, producer, bn);
  if (!target) return std::nullopt;
  const std::optional<Tensor> w = constant_float(graph, producer.input(1));
  if (!w) return std::nullopt;
  const std::size_t channels = affine.channels();
  const std::vector<std::size_t> channel_of = weight_channels(producer, *target, *w, channels);
  if (channel_of.empty()) return std::nullopt;
  const auto bias = effective_bias(graph, producer, *target, channels);
  if (!bias) return std::nullopt;

  Folded folded{*target, Tensor(DType::Float32, w->shape()), Tensor(DType::Float32, {static_cast<int64_t>(channels)})};
  const auto src = w->span<float>();
  auto dst = folded.weight.span<float>();
  for (std::size_t i = 0; i < dst.size(); ++i)
    dst[i] = static_cast<float>(static_cast<double>(src[i]) * affine.scale[channel_of[i]]);
  auto b = folded.bias.span<float>();
  for (std::size_t c = 0; c < channels; ++c) b[c] = static_cast<float>((*bias)[c] * affine.scale[c] + affine.shift[c]);
  return folded;
}

// Binds `tensor` to `current` when it is an initializer nothing else reads, otherwise to a
// new initializer (a Constant node left without users is dead-code-elimination's to remove).
Value* bind_constant(Graph& graph, Value* current, Tensor tensor, const std::string& hint) {
  if (current && graph.is_initializer(current) && single_use(graph, current)) {
    graph.set_initializer(current, std::move(tensor));
    return current;
  }
  Value* fresh = graph.create_unique_value(hint);
  graph.set_initializer(fresh, std::move(tensor));
  return fresh;
}

const char* counter_of(Target target) {
  switch (target) {
    case Target::Conv: return "folded-into-conv";
    case Target::ConvTranspose: return "folded-into-convtranspose";
    case Target::Gemm: return "folded-into-gemm";
    case Target::MatMul: return "folded-into-matmul";
  }
  return "";
}

std::string base_name(const Node& node, const Value* fallback) {
  return node.name().empty() ? fallback->name() : node.name();
}

// Replaces producer + bn by one node of the folded kind that writes bn's output.
void rewrite_fold(Graph& graph, NodeOrder& order, Node* producer, Node* bn, Folded folded) {
  Value* y = bn->output(0);
  const std::string name = base_name(*producer, y);
  Value* w = bind_constant(graph, producer->input(1), std::move(folded.weight), producer->input(1)->name() + "_bn_folded");
  Value* old_bias = folded.target == Target::MatMul ? nullptr : producer->input(2);
  Value* b = bind_constant(graph, old_bias, std::move(folded.bias), name + "_bias");
  std::vector<Value*> inputs = {producer->input(0), w, b};
  std::vector<Attribute> attributes = producer->attributes();
  const std::string op = folded.target == Target::MatMul ? "Gemm" : producer->op_type();
  const std::string domain = producer->domain();
  const std::string doc = producer->doc_string;
  const std::string overload = folded.target == Target::MatMul ? std::string() : producer->overload;

  order.erase(bn);
  graph.remove_node(bn);
  Node* replaced = producer;
  graph.remove_node(producer);
  Node* node = graph.add_node(op, inputs, {y}, name, domain);
  if (folded.target != Target::MatMul)
    for (Attribute& a : attributes) node->set_attribute(std::move(a));
  // The Gemm bias now holds beta * C already.
  if (folded.target == Target::Gemm) node->set_attribute(Attribute::make_float("beta", 1.0f));
  node->doc_string = doc;
  node->overload = overload;
  order.replace(replaced, {node});
}

// Mul + Add by [C, 1, ...] constants that broadcast over the spatial axes of x.
bool rewrite_mul_add(Graph& graph, NodeOrder& order, Node* bn, const ChannelAffine& affine) {
  Value* x = bn->input(0);
  Value* y = bn->output(0);
  const auto rank = declared_rank(x);
  if (!rank || *rank < 2 || x->type->dtype != DType::Float32) return false;
  const Dim& channel_dim = (*x->type->shape)[1];
  if (channel_dim.value && *channel_dim.value != static_cast<int64_t>(affine.channels())) return false;
  Shape shape(*rank - 1, 1);
  shape[0] = static_cast<int64_t>(affine.channels());
  Tensor scale(DType::Float32, shape);
  Tensor shift(DType::Float32, shape);
  for (std::size_t c = 0; c < affine.channels(); ++c) {
    scale.span<float>()[c] = static_cast<float>(affine.scale[c]);
    shift.span<float>()[c] = static_cast<float>(affine.shift[c]);
  }
  const std::string name = base_name(*bn, y);
  Value* scale_value = graph.create_unique_value(name + "_scale");
  graph.set_initializer(scale_value, std::move(scale));
  Value* shift_value = graph.create_unique_value(name + "_shift");
  graph.set_initializer(shift_value, std::move(shift));
  Value* scaled = graph.create_unique_value(name + "_scaled");
  scaled->type = x->type;
  graph.value_info.push_back(scaled);

  Node* replaced = bn;
  graph.remove_node(bn);
  Node* mul = graph.add_node("Mul", {x, scale_value}, {scaled}, name + "_mul");
  Node* add = graph.add_node("Add", {scaled, shift_value}, {y}, name + "_add");
  order.replace(replaced, {mul, add});
  return true;
}

}  // namespace

ComponentInfo FoldBatchNorm::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "fold-batchnorm";
  info.summary =
      "Fold inference BatchNormalization into the preceding Conv, ConvTranspose, Gemm or MatMul, else into Mul + Add";
  return info;
}

Expected<std::unique_ptr<Pass>> FoldBatchNorm::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<FoldBatchNorm>());
}

bool FoldBatchNorm::matches(const Model& model) const {
  if (!model.graph) return false;
  return std::any_of(model.graph->nodes().begin(), model.graph->nodes().end(),
                     [](const auto& n) { return n->op_type() == "BatchNormalization"; });
}

Expected<PassResult> FoldBatchNorm::run_impl(Model& model) {
  Graph& graph = *model.graph;
  PassResult result;
  for (const char* name : {"folded-into-conv", "folded-into-convtranspose", "folded-into-gemm", "folded-into-matmul",
                           "converted-to-mul-add"})
    result.counters[name] = 0;

  std::vector<Node*> batch_norms;
  for (const auto& n : graph.nodes())
    if (n->op_type() == "BatchNormalization") batch_norms.push_back(n.get());

  NodeOrder order(graph);
  std::vector<Value*> parameters;  // the folded BatchNormalizations' constants
  for (Node* bn : batch_norms) {
    const auto affine = inference_affine(graph, *bn);
    if (!affine) continue;
    for (std::size_t i = 1; i < 5; ++i)
      if (!contains(parameters, bn->input(i))) parameters.push_back(bn->input(i));
    Value* x = bn->input(0);
    Node* producer = x->producer();
    // A chain BN -> BN finds the first one's replacement here, so both fold.
    if (producer && single_use(graph, x) && producer->output(0) == x && producer->outputs().size() == 1) {
      if (auto folded = fold(model, *producer, *bn, *affine)) {
        ++result.counters[counter_of(folded->target)];
        rewrite_fold(graph, order, producer, bn, std::move(*folded));
        result.changed = true;
        continue;
      }
    }
    if (rewrite_mul_add(graph, order, bn, *affine)) {
      ++result.counters["converted-to-mul-add"];
      result.changed = true;
    }
  }
  if (result.changed) {
    order.apply(graph);
    for (Value* v : parameters)
      if (graph.is_initializer(v) && v->uses().empty() && !contains(graph.outputs, v)) graph.remove_initializer(v);
    // Drops the producers' old outputs and the BatchNormalization's, with their value_info.
    graph.prune_unused_values();
  }
  return result;
}

}  // namespace qflow
