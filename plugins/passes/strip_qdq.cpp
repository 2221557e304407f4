// StripQdq: bypassing activation QDQ pairs and dequantizing constant tensors.
#include "strip_qdq.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "constant_folding.h"
#include "qflow/ir/constants.h"
#include "qflow/ir/node_order.h"
#include "qflow/ir/pattern.h"

namespace qflow {

namespace {

using pattern::is_default_domain;

bool contains(const std::vector<Value*>& values, const Value* v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

bool is_quantized_integer(DType dtype) {
  return dtype == DType::Int8 || dtype == DType::UInt8 || dtype == DType::Int16 || dtype == DType::UInt16 ||
         dtype == DType::Int32;
}

// Scale and zero point of a QuantizeLinear/DequantizeLinear node for a tensor of `shape`,
// expanded to one entry per element's channel; nullopt when they are not usable constants.
struct Affine {
  std::vector<float> scale;
  std::vector<int64_t> zero_point;
  DType zero_point_dtype = DType::UInt8;
  int64_t inner = 1;  // elements per channel step (product of the dims after the axis)
};

std::optional<Affine> affine_of(const Graph& graph, const Node& node, const Shape& shape) {
  if (node.attr_int("block_size", 0) != 0) return std::nullopt;
  const std::optional<Tensor> scale = graph_constant(graph, node.input(1));
  if (!scale || scale->dtype() != DType::Float32 || scale->numel() < 1) return std::nullopt;
  const std::optional<Tensor> zero_point = node.input(2) ? graph_constant(graph, node.input(2)) : std::nullopt;
  if (node.input(2) && (!zero_point || zero_point->numel() != scale->numel())) return std::nullopt;
  Affine a;
  a.scale.assign(scale->span<float>().begin(), scale->span<float>().end());
  a.zero_point = zero_point ? zero_point->to_int64s() : std::vector<int64_t>(a.scale.size(), 0);
  a.zero_point_dtype = zero_point ? zero_point->dtype() : DType::UInt8;
  if (a.scale.size() > 1) {
    const auto rank = static_cast<int64_t>(shape.size());
    int64_t axis = node.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (scale->rank() != 1 || axis < 0 || axis >= rank || shape[static_cast<std::size_t>(axis)] != scale->numel())
      return std::nullopt;
    for (int64_t d = axis + 1; d < rank; ++d) a.inner *= shape[static_cast<std::size_t>(d)];
  }
  return a;
}

std::size_t channel(const Affine& a, int64_t i) {
  return a.scale.size() == 1 ? 0 : static_cast<std::size_t>((i / a.inner) % static_cast<int64_t>(a.scale.size()));
}

// DequantizeLinear: (q - zero_point) exact, converted to float32, times the float32 scale.
Tensor dequantize(const std::vector<int64_t>& q, const Shape& shape, const Affine& a) {
  Tensor out(DType::Float32, shape);
  float* y = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const std::size_t c = channel(a, i);
    y[i] = static_cast<float>(q[static_cast<std::size_t>(i)] - a.zero_point[c]) * a.scale[c];
  }
  return out;
}

// QuantizeLinear: saturate(round_half_even(x / scale) + zero_point), the division in float32.
std::optional<std::vector<int64_t>> quantize(const Tensor& x, const Affine& a) {
  int64_t lo = 0, hi = 0;
  switch (a.zero_point_dtype) {
    case DType::Int8: lo = -128, hi = 127; break;
    case DType::UInt8: lo = 0, hi = 255; break;
    case DType::Int16: lo = -32768, hi = 32767; break;
    case DType::UInt16: lo = 0, hi = 65535; break;
    default: return std::nullopt;
  }
  std::vector<int64_t> q(static_cast<std::size_t>(x.numel()));
  const float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::size_t c = channel(a, i);
    const float r = std::nearbyint(v[i] / a.scale[c]);
    const double shifted = static_cast<double>(r) + static_cast<double>(a.zero_point[c]);
    q[static_cast<std::size_t>(i)] =
        std::isnan(shifted) ? 0 : static_cast<int64_t>(std::clamp(shifted, static_cast<double>(lo), static_cast<double>(hi)));
  }
  return q;
}

class Stripper {
 public:
  explicit Stripper(Graph& graph)
      : graph_(graph), order_(graph), by_name_(folding::subgraph_referenced_names(graph)) {}

  // DequantizeLinear of a constant: the output becomes an initializer.
  bool constant(Node* dq) {
    Value* x = dq->input(0);
    Value* y = dq->output(0);
    const std::optional<Tensor> q_tensor = graph_constant(graph_, x);
    std::optional<Tensor> result;
    if (q_tensor && is_quantized_integer(q_tensor->dtype())) {
      const auto a = affine_of(graph_, *dq, q_tensor->shape());
      if (!a) return false;
      result = dequantize(q_tensor->to_int64s(), q_tensor->shape(), *a);
    } else if (Node* q = x ? x->producer() : nullptr; q && q->op_type() == "QuantizeLinear" && is_default_domain(*q)) {
      const std::optional<Tensor> w = graph_constant(graph_, q->input(0));
      if (!w || w->dtype() != DType::Float32) return false;
      const auto qa = affine_of(graph_, *q, w->shape());
      const auto da = affine_of(graph_, *dq, w->shape());
      if (!qa || !da) return false;
      const auto quantized = quantize(*w, *qa);
      if (!quantized) return false;
      result = dequantize(*quantized, w->shape(), *da);
    } else {
      return false;
    }
    remember_inputs(*dq);
    Node* q = x->producer();
    erase(dq);
    graph_.set_initializer(y, std::move(*result));
    if (q && q->op_type() == "QuantizeLinear") drop_if_unused(q);
    return true;
  }

  // An activation QuantizeLinear -> DequantizeLinear pair: readers of the DequantizeLinear
  // output read the QuantizeLinear input.
  bool activation(Node* dq) {
    Value* x = dq->input(0);
    Value* y = dq->output(0);
    Node* q = x ? x->producer() : nullptr;
    if (!q || q->op_type() != "QuantizeLinear" || !is_default_domain(*q) || !q->input(0) || !y) return false;
    Value* a = q->input(0);
    if (graph_constant(graph_, a) || by_name_.count(y->name())) return false;
    remember_inputs(*dq);
    if (!contains(graph_.outputs, y)) {
      erase(dq);
      graph_.replace_all_uses(y, a);
    } else if (Node* producer = a->producer();
               producer && producer->op_type() != "DequantizeLinear" && !contains(graph_.outputs, a) &&
               !contains(graph_.inputs, a) && !graph_.is_initializer(a) && !by_name_.count(a->name())) {
      // (A DequantizeLinear producer is still to be visited, so it is not rebuilt.)
      // `y` names the model's interface: `a` disappears under that name instead.
      erase(dq);
      std::vector<Value*> outputs = producer->outputs();
      std::replace(outputs.begin(), outputs.end(), a, y);
      Node* rebuilt = graph_.add_node(producer->op_type(), producer->inputs(), outputs, producer->name(), producer->domain());
      for (const Attribute& attr : producer->attributes()) rebuilt->set_attribute(attr);
      rebuilt->doc_string = producer->doc_string;
      rebuilt->overload = producer->overload;
      order_.replace(producer, {rebuilt});
      graph_.replace_all_uses(a, y);
      graph_.remove_node(producer);
    } else {
      // Nothing to rename: an Identity keeps the output name. The old node's address is
      // only a key to NodeOrder, which unmaps it before mapping the replacement.
      const std::string name = dq->name();
      graph_.remove_node(dq);
      Node* identity = graph_.add_node("Identity", {a}, {y}, name);
      order_.replace(dq, {identity});
    }
    drop_if_unused(q);
    return true;
  }

  void finish(PassResult& result) {
    result.counters["initializers-removed"] = folding::remove_orphaned_initializers(graph_, candidates_);
    // Constant nodes that fed only the removed nodes.
    for (Value* v : candidates_) {
      Node* producer = v->producer();
      if (producer && producer->op_type() == "Constant" && v->uses().empty() && !contains(graph_.outputs, v) &&
          !by_name_.count(v->name()) && removed_constants_.insert(producer).second)
        erase(producer);
    }
    order_.apply(graph_);
  }

 private:
  void remember_inputs(const Node& node) {
    for (Value* v : node.inputs())
      if (v) candidates_.push_back(v);
  }
  void erase(Node* node) {
    order_.erase(node);
    graph_.remove_node(node);
  }
  void drop_if_unused(Node* q) {
    Value* out = q->output(0);
    if (out && (!out->uses().empty() || contains(graph_.outputs, out) || by_name_.count(out->name()))) return;
    remember_inputs(*q);
    erase(q);
  }

  Graph& graph_;
  NodeOrder order_;
  std::set<std::string> by_name_;
  std::vector<Value*> candidates_;
  std::set<Node*> removed_constants_;
};

}  // namespace

ComponentInfo StripQdq::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "strip-qdq";
  info.summary = "Turn a QDQ model into the float model it simulates: drop activation QDQ pairs, dequantize constants";
  return info;
}

Expected<std::unique_ptr<Pass>> StripQdq::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<StripQdq>());
}

bool StripQdq::matches(const Model& model) const {
  if (!model.graph) return false;
  return std::any_of(model.graph->nodes().begin(), model.graph->nodes().end(),
                     [](const auto& node) { return node->op_type() == "DequantizeLinear" && is_default_domain(*node); });
}

Expected<PassResult> StripQdq::run_impl(Model& model) {
  Graph& graph = *model.graph;
  PassResult result;
  result.counters["pairs-removed"] = 0;
  result.counters["weights-dequantized"] = 0;
  std::vector<Node*> dequantizers;
  for (const auto& node : graph.nodes())
    if (node->op_type() == "DequantizeLinear" && is_default_domain(*node)) dequantizers.push_back(node.get());
  Stripper stripper(graph);
  for (Node* dq : dequantizers) {
    if (stripper.constant(dq)) {
      ++result.counters["weights-dequantized"];
      result.changed = true;
    } else if (stripper.activation(dq)) {
      ++result.counters["pairs-removed"];
      result.changed = true;
    }
  }
  stripper.finish(result);
  if (result.changed) graph.prune_unused_values();
  return result;
}

}  // namespace qflow
