// FuseMatMulAdd: MatMul(A, W) + B with constant W and B rewritten as Gemm(A, W, B).
#include "fuse_matmul_add.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pass_helpers.h"

namespace qflow {

namespace {

using pass_helpers::constant_float;
using pass_helpers::contains;
using pass_helpers::is_default_domain;
using pass_helpers::NodeOrder;

// A declared rank of 2, or a producer whose output is 2-D whatever its inputs are.
bool known_2d(const Value* v) {
  if (v->type && v->type->shape) return v->type->shape->size() == 2;
  const Node* producer = v->producer();
  return producer && is_default_domain(*producer) && (producer->op_type() == "Gemm" || producer->op_type() == "Flatten");
}

// A bias Gemm broadcasts as a row: [N] or [1, N].
bool is_row_bias(const Tensor& b, int64_t n) {
  const Shape& s = b.shape();
  return (s.size() == 1 && s[0] == n) || (s.size() == 2 && s[0] == 1 && s[1] == n);
}


struct Match {
  Node* matmul;
  Node* add;
  Value* bias;
};

std::optional<Match> match_at(const Graph& graph, Node* matmul) {
  if (matmul->op_type() != "MatMul" || !is_default_domain(*matmul) || matmul->inputs().size() != 2) return std::nullopt;
  Value* a = matmul->input(0);
  Value* product = matmul->output(0);
  if (!a || !product || !known_2d(a)) return std::nullopt;
  if (a->type && a->type->dtype != DType::Float32 && a->type->dtype != DType::Undefined) return std::nullopt;
  const Tensor* w = constant_float(graph, matmul->input(1));
  if (!w || w->rank() != 2) return std::nullopt;
  if (product->uses().size() != 1 || contains(graph.outputs, product)) return std::nullopt;
  Node* add = product->uses()[0].first;
  if (add->op_type() != "Add" || !is_default_domain(*add) || add->inputs().size() != 2 || !add->output(0))
    return std::nullopt;
  Value* bias = add->input(add->input(0) == product ? 1 : 0);
  const Tensor* b = constant_float(graph, bias);
  if (!b || !is_row_bias(*b, w->dim(1))) return std::nullopt;
  return Match{matmul, add, bias};
}

}  // namespace

ComponentInfo FuseMatMulAdd::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "fuse-matmul-add";
  info.summary = "Fuse a 2-D MatMul with a constant weight and the bias Add after it into one Gemm";
  return info;
}

Expected<std::unique_ptr<Pass>> FuseMatMulAdd::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<FuseMatMulAdd>());
}

bool FuseMatMulAdd::matches(const Model& model) const {
  // Gemm broadcasts C implicitly from opset 7 on.
  if (!model.graph || model.opset() < 7) return false;
  return std::any_of(model.graph->nodes().begin(), model.graph->nodes().end(),
                     [](const auto& n) { return n->op_type() == "MatMul"; });
}

Expected<PassResult> FuseMatMulAdd::run_impl(Model& model) {
  Graph& graph = *model.graph;
  std::vector<Node*> matmuls;
  for (const auto& n : graph.nodes())
    if (n->op_type() == "MatMul") matmuls.push_back(n.get());

  NodeOrder order(graph);
  int64_t fused = 0;
  for (Node* matmul : matmuls) {
    const auto match = match_at(graph, matmul);
    if (!match) continue;
    Value* y = match->add->output(0);
    const std::vector<Value*> inputs = {matmul->input(0), matmul->input(1), match->bias};
    const std::string name = matmul->name().empty() ? match->add->name() : matmul->name();
    const std::string doc = matmul->doc_string;
    order.erase(matmul);
    graph.remove_node(matmul);
    Node* add = match->add;
    graph.remove_node(add);
    Node* gemm = graph.add_node("Gemm", inputs, {y}, name);
    gemm->doc_string = doc;
    // The Gemm runs where the Add ran: after A's producer and every other input.
    order.replace(add, {gemm});
    ++fused;
  }

  PassResult result;
  result.counters["fused"] = fused;
  result.changed = fused > 0;
  if (result.changed) {
    order.apply(graph);
    // Drops the MatMul outputs that no longer exist, with their value_info.
    graph.prune_unused_values();
  }
  return result;
}

}  // namespace qflow
