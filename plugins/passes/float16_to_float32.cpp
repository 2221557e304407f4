// Float16ToFloat32: rewrites half-precision dtypes to float32 throughout a graph and its subgraphs.
#include "float16_to_float32.h"

#include <set>
#include <string>

namespace qflow {

namespace {

bool is_half(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16; }
bool is_half_code(int64_t code) { return code == static_cast<int64_t>(DType::Float16) || code == static_cast<int64_t>(DType::BFloat16); }

// Ops whose integer attribute names the dtype they produce.
const std::set<std::string>& dtype_attribute_ops() {
  static const std::set<std::string> ops = {"Cast", "EyeLike", "RandomNormal", "RandomUniform",
                                            "RandomNormalLike", "RandomUniformLike", "Bernoulli"};
  return ops;
}

bool graph_has_half(const Graph& graph);

bool node_has_half(const Node& node) {
  for (const Attribute& attr : node.attributes()) {
    if (attr.type == AttributeType::Tensor && is_half(attr.t.dtype())) return true;
    if (attr.type == AttributeType::Int && is_half_code(attr.i) && dtype_attribute_ops().count(node.op_type()) &&
        (attr.name == "to" || attr.name == "dtype"))
      return true;
    if (attr.type == AttributeType::Graph && attr.g && graph_has_half(*attr.g)) return true;
    for (const auto& g : attr.graphs)
      if (g && graph_has_half(*g)) return true;
  }
  return false;
}

bool graph_has_half(const Graph& graph) {
  for (const Value* v : graph.initializer_order())
    if (is_half(graph.initializer(v)->dtype())) return true;
  for (const Value* v : graph.values())
    if (v->type && is_half(v->type->dtype)) return true;
  for (const auto& node : graph.nodes())
    if (node_has_half(*node)) return true;
  return false;
}

void widen(Graph& graph, PassResult& result) {
  for (Value* v : graph.initializer_order()) {
    const Tensor* t = graph.initializer(v);
    if (!is_half(t->dtype())) continue;
    graph.set_initializer(v, t->cast(DType::Float32));
    ++result.counters["initializers-widened"];
  }
  for (Value* v : graph.values()) {
    if (!v->type || !is_half(v->type->dtype)) continue;
    v->type->dtype = DType::Float32;
    ++result.counters["values-retyped"];
  }
  for (const auto& node : graph.nodes()) {
    for (Attribute attr : node->attributes()) {
      bool changed = false;
      if (attr.type == AttributeType::Tensor && is_half(attr.t.dtype())) {
        attr.t = attr.t.cast(DType::Float32);
        ++result.counters["constants-widened"];
        changed = true;
      } else if (attr.type == AttributeType::Int && is_half_code(attr.i) && (attr.name == "to" || attr.name == "dtype") &&
                 dtype_attribute_ops().count(node->op_type())) {
        attr.i = static_cast<int64_t>(DType::Float32);
        ++result.counters["casts-retargeted"];
        changed = true;
      }
      if (changed) node->set_attribute(std::move(attr));
    }
    for (const Attribute& attr : node->attributes()) {
      if (attr.type == AttributeType::Graph && attr.g) widen(*attr.g, result);
      for (const auto& g : attr.graphs)
        if (g) widen(*g, result);
    }
  }
}

}  // namespace

ComponentInfo Float16ToFloat32::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "float16-to-float32";
  info.summary = "Compute in float32 what a model stores and computes in float16 or bfloat16";
  return info;
}

Expected<std::unique_ptr<Pass>> Float16ToFloat32::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<Float16ToFloat32>());
}

bool Float16ToFloat32::matches(const Model& model) const { return model.graph && graph_has_half(*model.graph); }

Expected<PassResult> Float16ToFloat32::run_impl(Model& model) {
  PassResult result;
  for (const char* counter : {"initializers-widened", "constants-widened", "casts-retargeted", "values-retyped"})
    result.counters[counter] = 0;
  widen(*model.graph, result);
  result.changed = true;
  return result;
}

}  // namespace qflow
