// Reading constants: scalar constants and Clip bounds, from a graph or from any other source.
#include "qflow/ir/constants.h"

#include <algorithm>
#include <limits>

namespace qflow {

std::optional<Tensor> graph_constant(const Graph& graph, const Value* value) {
  if (!value || std::find(graph.inputs.begin(), graph.inputs.end(), value) != graph.inputs.end()) return std::nullopt;
  if (const Tensor* t = graph.initializer(value)) return *t;
  const Node* node = value->producer();
  if (!node || node->op_type() != "Constant" || !(node->domain().empty() || node->domain() == "ai.onnx"))
    return std::nullopt;
  if (const Attribute* a = node->find_attribute("value"); a && a->type == AttributeType::Tensor) return a->t;
  if (const Attribute* a = node->find_attribute("value_float"); a && a->type == AttributeType::Float)
    return Tensor::scalar<float>(a->f);
  if (const Attribute* a = node->find_attribute("value_floats"); a && a->type == AttributeType::Floats)
    return Tensor::from_vector<float>({static_cast<int64_t>(a->floats.size())}, a->floats);
  if (const Attribute* a = node->find_attribute("value_int"); a && a->type == AttributeType::Int)
    return Tensor::scalar<int64_t>(a->i);
  if (const Attribute* a = node->find_attribute("value_ints"); a && a->type == AttributeType::Ints)
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(a->ints.size())}, a->ints);
  return std::nullopt;
}

ConstantSource graph_constants(const Graph& graph) {
  return [&graph](const Value* value) { return graph_constant(graph, value); };
}

std::optional<ScalarConstant> scalar_constant(const Value* value, const ConstantSource& constants) {
  const std::optional<Tensor> t = value ? constants(value) : std::nullopt;
  if (!t || t->numel() != 1 || !is_float(t->dtype())) return std::nullopt;
  return ScalarConstant{t->to_doubles()[0], t->dtype(), static_cast<std::size_t>(t->rank())};
}

std::optional<double> scalar_constant(const Graph& graph, const Value* value) {
  const std::optional<ScalarConstant> c = scalar_constant(value, graph_constants(graph));
  return c ? std::optional<double>(c->value) : std::nullopt;
}

std::optional<ClipBounds> clip_bounds(const Node& clip, int64_t opset, const ConstantSource& constants) {
  const float lowest = std::numeric_limits<float>::lowest(), highest = std::numeric_limits<float>::max();
  if (opset < 11) return ClipBounds{clip.attr_float("min", lowest), clip.attr_float("max", highest)};
  double bounds[2] = {lowest, highest};
  for (std::size_t i = 1; i <= 2; ++i) {
    if (!clip.input(i)) continue;
    const std::optional<ScalarConstant> c = scalar_constant(clip.input(i), constants);
    if (!c) return std::nullopt;
    bounds[i - 1] = c->value;
  }
  return ClipBounds{bounds[0], bounds[1]};
}

std::optional<ClipBounds> clip_bounds(const Graph& graph, const Node& clip, int64_t opset) {
  return clip_bounds(clip, opset, graph_constants(graph));
}

}  // namespace qflow
