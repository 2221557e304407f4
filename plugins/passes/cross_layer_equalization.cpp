// CrossLayerEqualization: pair discovery, iterated per-channel rescaling, then fresh weight tensors.
#include "cross_layer_equalization.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qflow {

namespace {

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool is_interface(const Graph& graph, const Value* v) {
  return std::find(graph.inputs.begin(), graph.inputs.end(), v) != graph.inputs.end() ||
         std::find(graph.outputs.begin(), graph.outputs.end(), v) != graph.outputs.end();
}

// A parameter the pass may rewrite: a float32 initializer read by exactly one node input,
// and not a graph input (which a caller could override at run time) or output.
const Tensor* private_parameter(const Graph& graph, const Value* v) {
  if (!v || v->uses().size() != 1 || is_interface(graph, v)) return nullptr;
  const Tensor* t = graph.initializer(v);
  return t && t->dtype() == DType::Float32 ? t : nullptr;
}

// The single node reading `v`, as its input 0, when v is not also a graph output: the
// links of a pair must be invisible outside it.
Node* sole_user(const Graph& graph, const Value* v) {
  if (!v || v->uses().size() != 1 || is_interface(graph, v)) return nullptr;
  const auto& [user, index] = v->uses().front();
  return index == 0 ? user : nullptr;
}

// A working copy of one conv's weights and bias, in double so repeated sweeps over a chain
// do not accumulate float rounding; written back once at the end.
struct ConvParams {
  Node* node = nullptr;
  Shape shape;
  std::vector<double> w;
  std::vector<double> b;  // empty when the conv has no bias
};

std::optional<ConvParams> conv_params(const Graph& graph, Node* node) {
  if (!node || node->op_type() != "Conv" || !is_default_domain(*node) || !node->input(0)) return std::nullopt;
  const Tensor* w = private_parameter(graph, node->input(1));
  if (!w || w->rank() < 3 || w->dim(0) <= 0 || w->numel() <= 0) return std::nullopt;
  ConvParams params;
  params.node = node;
  params.shape = w->shape();
  const auto ws = w->span<float>();
  params.w.assign(ws.begin(), ws.end());
  if (Value* bias = node->input(2)) {
    const Tensor* b = private_parameter(graph, bias);
    if (!b || b->numel() != w->dim(0)) return std::nullopt;
    const auto bs = b->span<float>();
    params.b.assign(bs.begin(), bs.end());
  }
  return params;
}

enum class Activation { Exact, Relu6Like, Unsupported };

// A Clip bound as a number: absent (or an absent input) is nullopt; a bound that is not a
// constant scalar makes the whole Clip unsupported.
bool clip_bound(const Graph& graph, const Node& clip, const std::string& name, std::size_t input,
                std::optional<double>& bound) {
  if (const Attribute* attr = clip.find_attribute(name)) {
    if (attr->type != AttributeType::Float) return false;
    bound = attr->f;
    return true;
  }
  const Value* v = clip.input(input);
  if (!v) return true;
  const Tensor* t = graph.initializer(v);
  if (!t || t->numel() != 1 || !is_float(t->dtype()) || is_interface(graph, v)) return false;
  bound = t->to_doubles().front();
  return true;
}

// Positive per-channel scaling commutes with the activation when its lower bound is 0 or
// -inf and it has no finite upper bound.
Activation classify_activation(const Graph& graph, const Node& node) {
  if (!is_default_domain(node)) return Activation::Unsupported;
  if (node.op_type() == "Relu") return Activation::Exact;
  if (node.op_type() != "Clip") return Activation::Unsupported;
  std::optional<double> lo;
  std::optional<double> hi;
  if (!clip_bound(graph, node, "min", 1, lo) || !clip_bound(graph, node, "max", 2, hi)) return Activation::Unsupported;
  const double lowest = std::numeric_limits<float>::lowest();
  const double highest = std::numeric_limits<float>::max();
  if (lo && *lo != 0.0 && *lo > lowest) return Activation::Unsupported;
  return hi && *hi < highest ? Activation::Relu6Like : Activation::Exact;
}

struct Pair {
  std::size_t first = 0;   // index into the ConvParams list
  std::size_t second = 0;
  std::vector<double> cumulative;  // product of the scales applied per channel
};

// Input-channel layout of a conv's weights: channel i is read by output channels
// [group(i) * per_group_out, +per_group_out) at position i % per_group_in.
struct InputLayout {
  int64_t per_group_in = 0;
  int64_t per_group_out = 0;
  int64_t spatial = 0;
};

std::optional<InputLayout> input_layout(const ConvParams& conv, int64_t channels) {
  const int64_t group = conv.node->attr_int("group", 1);
  const int64_t out = conv.shape[0];
  const int64_t per_group_in = conv.shape[1];
  if (group <= 0 || per_group_in <= 0 || per_group_in * group != channels || out % group != 0) return std::nullopt;
  return InputLayout{per_group_in, out / group, static_cast<int64_t>(conv.w.size()) / (out * per_group_in)};
}

// One equalization step of a pair; returns the largest |s_i - 1|.
double equalize(ConvParams& first, ConvParams& second, const InputLayout& layout, Pair& pair) {
  const int64_t channels = first.shape[0];
  const int64_t block = static_cast<int64_t>(first.w.size()) / channels;
  double worst = 0.0;
  for (int64_t i = 0; i < channels; ++i) {
    double r1 = 0.0;
    for (int64_t k = 0; k < block; ++k) r1 = std::max(r1, std::abs(first.w[static_cast<std::size_t>(i * block + k)]));
    const int64_t group = i / layout.per_group_in;
    const int64_t j = i % layout.per_group_in;
    auto for_each_w2 = [&](auto&& fn) {
      for (int64_t o = group * layout.per_group_out; o < (group + 1) * layout.per_group_out; ++o)
        for (int64_t k = 0; k < layout.spatial; ++k)
          fn(second.w[static_cast<std::size_t>((o * layout.per_group_in + j) * layout.spatial + k)]);
    };
    double r2 = 0.0;
    for_each_w2([&](double w) { r2 = std::max(r2, std::abs(w)); });
    // A dead channel on either side carries no information to balance.
    if (!(r1 > 0.0) || !(r2 > 0.0) || !std::isfinite(r1) || !std::isfinite(r2)) continue;
    const double s = std::sqrt(r1 * r2) / r2;
    for (int64_t k = 0; k < block; ++k) first.w[static_cast<std::size_t>(i * block + k)] /= s;
    if (!first.b.empty()) first.b[static_cast<std::size_t>(i)] /= s;
    for_each_w2([&](double& w) { w *= s; });
    pair.cumulative[static_cast<std::size_t>(i)] *= s;
    worst = std::max(worst, std::abs(s - 1.0));
  }
  return worst;
}

Tensor to_float_tensor(const Shape& shape, const std::vector<double>& values) {
  Tensor t(DType::Float32, shape);
  float* out = t.data<float>();
  for (std::size_t k = 0; k < values.size(); ++k) out[k] = static_cast<float>(values[k]);
  return t;
}

}  // namespace

ComponentInfo CrossLayerEqualization::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "cross-layer-equalization";
  info.summary = "Balance per-channel weight ranges of consecutive convolutions (Nagel et al. 2019)";
  info.options = {
      {"tolerance", OptionType::Float, 1e-4, "stop when the largest per-channel scale change of a sweep, |s - 1|, is below this",
       {.min = 0.0, .min_exclusive = true}},
      {"max-iterations", OptionType::Int, int64_t{20}, "most sweeps over all pairs", {.min = 1.0}},
      {"through-relu6", OptionType::Bool, false,
       "also equalize across Clip with an upper bound (Relu6); not exact: channel i then clips at max * s_i"},
  };
  return info;
}

Expected<std::unique_ptr<Pass>> CrossLayerEqualization::create(const Options& options) {
  const double tolerance = options.get_float("tolerance");
  const int64_t max_iterations = options.get_int("max-iterations");
  if (!(tolerance > 0.0) || !std::isfinite(tolerance))
    return invalid_input("cross-layer-equalization: tolerance must be a positive number, got " + std::to_string(tolerance));
  if (max_iterations < 1)
    return invalid_input("cross-layer-equalization: max-iterations must be at least 1, got " +
                         std::to_string(max_iterations));
  return std::unique_ptr<Pass>(
      std::make_unique<CrossLayerEqualization>(tolerance, max_iterations, options.get_bool("through-relu6")));
}

bool CrossLayerEqualization::matches(const Model& model) const {
  if (!model.graph) return false;
  std::size_t convs = 0;
  for (const auto& node : model.graph->nodes())
    if (node->op_type() == "Conv" && ++convs >= 2) return true;
  return false;
}

Expected<PassResult> CrossLayerEqualization::run_impl(Model& model) {
  Graph& graph = *model.graph;
  auto order = graph.topological_order();
  if (!order) return order.status().with_context("cross-layer-equalization");

  std::vector<ConvParams> convs;
  std::map<const Node*, std::size_t> conv_index;
  auto index_of = [&](Node* node) -> std::optional<std::size_t> {
    if (auto it = conv_index.find(node); it != conv_index.end()) return it->second;
    std::optional<ConvParams> params = conv_params(graph, node);
    if (!params) return std::nullopt;
    convs.push_back(std::move(*params));
    conv_index[node] = convs.size() - 1;
    return convs.size() - 1;
  };

  std::vector<Pair> pairs;
  std::vector<InputLayout> layouts;
  for (Node* node : *order) {
    if (node->op_type() != "Conv") continue;
    Node* next = sole_user(graph, node->output(0));
    if (!next || node->outputs().size() != 1) continue;
    if (next->op_type() != "Conv") {
      const Activation act = classify_activation(graph, *next);
      if (act == Activation::Unsupported || (act == Activation::Relu6Like && !through_relu6_)) continue;
      if (next->outputs().size() != 1) continue;
      next = sole_user(graph, next->output(0));
      if (!next || next->op_type() != "Conv") continue;
    }
    const std::optional<std::size_t> first = index_of(node);
    if (!first) continue;
    const std::optional<std::size_t> second = index_of(next);
    if (!second) continue;
    const std::optional<InputLayout> layout = input_layout(convs[*second], convs[*first].shape[0]);
    if (!layout) continue;
    pairs.push_back(Pair{*first, *second, std::vector<double>(static_cast<std::size_t>(convs[*first].shape[0]), 1.0)});
    layouts.push_back(*layout);
  }

  PassResult result;
  int64_t sweeps = 0;
  for (int64_t it = 0; it < max_iterations_ && !pairs.empty(); ++it) {
    double worst = 0.0;
    for (std::size_t p = 0; p < pairs.size(); ++p)
      worst = std::max(worst, equalize(convs[pairs[p].first], convs[pairs[p].second], layouts[p], pairs[p]));
    ++sweeps;
    if (worst < tolerance_) break;
  }

  // A pair counts as equalized when its net scaling moved some channel beyond the tolerance;
  // a model already balanced is left alone. Otherwise every paired conv is written back,
  // since a conv shared by a moved and an unmoved pair carries scales from both.
  int64_t equalized = 0;
  for (const Pair& pair : pairs)
    if (std::any_of(pair.cumulative.begin(), pair.cumulative.end(),
                    [&](double s) { return std::abs(s - 1.0) >= tolerance_; }))
      ++equalized;
  if (equalized > 0) {
    for (const Pair& pair : pairs)
      for (std::size_t c : {pair.first, pair.second}) {
        const ConvParams& conv = convs[c];
        graph.set_initializer(conv.node->input(1), to_float_tensor(conv.shape, conv.w));
        if (!conv.b.empty()) graph.set_initializer(conv.node->input(2), to_float_tensor({conv.shape[0]}, conv.b));
      }
  }

  result.changed = equalized > 0;
  result.counters["pairs-equalized"] = equalized;
  result.counters["iterations"] = sweeps;
  return result;
}

}  // namespace qflow
