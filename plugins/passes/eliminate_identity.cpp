// EliminateIdentity: pattern checks for pass-through nodes and the rewiring that bypasses them.
#include "eliminate_identity.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "constant_folding.h"

namespace qflow {

namespace {

bool contains(const std::vector<Value*>& values, const Value* v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// A static shape the value is known to have at run time: an initializer's (unless a caller
// may override it as a graph input) or the declared one.
std::optional<Shape> static_shape_of(const Graph& graph, const Value* v) {
  if (!v) return std::nullopt;
  if (const Tensor* t = graph.initializer(v))
    if (!contains(graph.inputs, v)) return t->shape();
  if (v->type) return v->type->static_shape();
  return std::nullopt;
}

std::optional<int64_t> rank_of(const Graph& graph, const Value* v) {
  if (!v) return std::nullopt;
  if (const Tensor* t = graph.initializer(v))
    if (!contains(graph.inputs, v)) return t->rank();
  if (v->type && v->type->shape) return static_cast<int64_t>(v->type->shape->size());
  return std::nullopt;
}

DType dtype_of(const Graph& graph, const Value* v) {
  if (!v) return DType::Undefined;
  if (const Tensor* t = graph.initializer(v)) return t->dtype();
  return v->type ? v->type->dtype : DType::Undefined;
}

// Transpose's permutation; without the attribute it reverses the axes, which needs the rank.
std::optional<std::vector<int64_t>> permutation(const Graph& graph, const Node& node) {
  if (node.find_attribute("perm")) return node.attr_ints("perm");
  const std::optional<int64_t> rank = rank_of(graph, node.input(0));
  if (!rank) return std::nullopt;
  std::vector<int64_t> perm(static_cast<std::size_t>(*rank));
  for (int64_t i = 0; i < *rank; ++i) perm[static_cast<std::size_t>(i)] = *rank - 1 - i;
  return perm;
}

bool is_identity_permutation(const std::vector<int64_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool is_noop_reshape(const Graph& graph, const Node& node) {
  const std::optional<Shape> in = static_shape_of(graph, node.input(0));
  const Tensor* target_tensor = node.input(1) ? graph.initializer(node.input(1)) : nullptr;
  if (!in || !target_tensor || contains(graph.inputs, node.input(1))) return false;
  const std::vector<int64_t> target = target_tensor->to_int64s();
  if (target.size() != in->size() || shape_numel(*in) <= 0) return false;
  const bool allow_zero = node.attr_int("allowzero", 0) != 0;
  int inferred = 0;
  for (std::size_t i = 0; i < target.size(); ++i) {
    const int64_t t = target[i];
    if (t == (*in)[i] || (t == 0 && !allow_zero)) continue;
    // With every other dimension equal and the same element count, -1 resolves to this one.
    if (t == -1 && ++inferred == 1) continue;
    return false;
  }
  return true;
}

bool is_noop_cast(const Graph& graph, const Node& node) {
  const DType from = dtype_of(graph, node.input(0));
  return from != DType::Undefined && static_cast<int64_t>(from) == node.attr_int("to", 0);
}

bool is_inference_dropout(const Graph& graph, const Node& node) {
  if (Value* mask = node.output(1))
    if (!mask->uses().empty() || contains(graph.outputs, mask)) return false;
  if (const Value* training = node.input(2)) {
    const Tensor* t = graph.initializer(training);
    if (!t || contains(graph.inputs, training) || t->numel() != 1 || t->to_doubles()[0] != 0.0) return false;
  }
  return true;
}

class Rewriter {
 public:
  explicit Rewriter(Graph& graph) : graph_(graph), by_name_(folding::subgraph_referenced_names(graph)) {}

  // Makes readers of `out` read `in` and removes `nodes` (the chain from `in` to `out`).
  bool bypass(const std::vector<Node*>& nodes, Value* in, Value* out) {
    if (!in || !out || by_name_.count(out->name())) return false;
    if (!contains(graph_.outputs, out)) {
      for (Node* n : nodes) graph_.remove_node(n);
      graph_.replace_all_uses(out, in);
      return true;
    }
    // `out` names the model's interface: `in` disappears under that name instead.
    Node* producer = in->producer();
    if (!producer || contains(graph_.outputs, in) || contains(graph_.inputs, in) || graph_.is_initializer(in) ||
        by_name_.count(in->name()))
      return false;
    for (Node* n : nodes) graph_.remove_node(n);
    std::vector<Value*> outputs = producer->outputs();
    std::replace(outputs.begin(), outputs.end(), in, out);
    Node* rebuilt = graph_.add_node(producer->op_type(), producer->inputs(), outputs, producer->name(), producer->domain());
    for (const Attribute& attr : producer->attributes()) rebuilt->set_attribute(attr);
    rebuilt->doc_string = producer->doc_string;
    rebuilt->overload = producer->overload;
    graph_.replace_all_uses(in, out);
    graph_.remove_node(producer);
    return true;
  }

 private:
  Graph& graph_;
  std::set<std::string> by_name_;
};

}  // namespace

ComponentInfo EliminateIdentity::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "eliminate-identity";
  info.summary = "Remove Identity, inference Dropout, no-op Reshape/Transpose/Cast and cancelling Transpose pairs";
  return info;
}

Expected<std::unique_ptr<Pass>> EliminateIdentity::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<EliminateIdentity>());
}

bool EliminateIdentity::matches(const Model& model) const {
  static const std::set<std::string> kOps = {"Identity", "Dropout", "Reshape", "Transpose", "Cast"};
  if (!model.graph) return false;
  return std::any_of(model.graph->nodes().begin(), model.graph->nodes().end(),
                     [](const auto& node) { return kOps.count(node->op_type()) != 0; });
}

Expected<PassResult> EliminateIdentity::run_impl(Model& model) {
  Graph& graph = *model.graph;
  Rewriter rewriter(graph);
  PassResult result;
  for (const char* counter : {"identity-removed", "dropout-removed", "reshape-removed", "transpose-removed",
                              "cast-removed", "transpose-pairs-removed"})
    result.counters[counter] = 0;
  std::vector<Value*> orphan_candidates;

  QFLOW_ASSIGN_OR_RETURN(const std::vector<Node*> order, graph.topological_order());
  std::set<const Node*> removed;
  for (Node* node : order) {
    if (removed.count(node) || !is_default_domain(*node)) continue;
    const std::string& op = node->op_type();
    Value* in = node->input(0);
    Value* out = node->output(0);
    std::string counter;
    std::vector<Node*> chain = {node};
    if (op == "Identity") {
      counter = "identity-removed";
    } else if (op == "Dropout" && is_inference_dropout(graph, *node)) {
      counter = "dropout-removed";
    } else if (op == "Reshape" && is_noop_reshape(graph, *node)) {
      counter = "reshape-removed";
    } else if (op == "Cast" && is_noop_cast(graph, *node)) {
      counter = "cast-removed";
    } else if (op == "Transpose") {
      const auto perm = permutation(graph, *node);
      if (perm && is_identity_permutation(*perm)) {
        counter = "transpose-removed";
      } else if (perm && out && out->uses().size() == 1 && !contains(graph.outputs, out)) {
        Node* second = out->uses()[0].first;
        const auto perm2 = second->op_type() == "Transpose" && is_default_domain(*second)
                               ? permutation(graph, *second) : std::nullopt;
        // Transposing by perm then perm2 reads input axis perm[perm2[j]] at output axis j.
        bool cancels = perm2 && perm2->size() == perm->size();
        for (std::size_t j = 0; cancels && j < perm2->size(); ++j) {
          const int64_t k = (*perm2)[j];
          cancels = k >= 0 && k < static_cast<int64_t>(perm->size()) && (*perm)[static_cast<std::size_t>(k)] == static_cast<int64_t>(j);
        }
        if (cancels) {
          counter = "transpose-pairs-removed";
          chain.push_back(second);
          out = second->output(0);
        }
      }
    }
    if (counter.empty()) continue;
    std::vector<Value*> inputs = node->inputs();
    for (std::size_t i = 1; i < inputs.size(); ++i) orphan_candidates.push_back(inputs[i]);
    if (!rewriter.bypass(chain, in, out)) continue;
    removed.insert(chain.begin(), chain.end());
    ++result.counters[counter];
    result.changed = true;
  }
  result.counters["initializers-removed"] = folding::remove_orphaned_initializers(graph, orphan_candidates);
  if (result.changed) graph.prune_unused_values();
  return result;
}

}  // namespace qflow
