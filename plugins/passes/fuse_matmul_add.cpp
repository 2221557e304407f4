// FuseMatMulAdd: MatMul(A, W) + B with constant W and B rewritten as Gemm(A, W, B).
#include "fuse_matmul_add.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace qflow {

namespace {

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool contains(const std::vector<Value*>& values, const Value* v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// A float32 constant: an initializer a caller cannot override (not also a graph input),
// or the output of a Constant node (exporters such as paddle2onnx emit weights that way).
const Tensor* constant_float(const Graph& graph, const Value* v) {
  if (!v || contains(graph.inputs, v)) return nullptr;
  const Tensor* t = graph.initializer(v);
  const Node* producer = v->producer();
  if (!t && producer && producer->op_type() == "Constant" && is_default_domain(*producer)) {
    const Attribute* value = producer->find_attribute("value");
    if (value && value->type == AttributeType::Tensor) t = &value->t;
  }
  return t && t->dtype() == DType::Float32 ? t : nullptr;
}

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

// Keeps the file order of the nodes across replacements, so the exported node list
// stays topologically sorted: a replacement takes the place of the node it replaces.
class NodeOrder {
 public:
  explicit NodeOrder(const Graph& graph) {
    for (const auto& n : graph.nodes()) where_[n.get()] = order_.insert(order_.end(), n.get());
  }
  void replace(Node* old, Node* replacement) {
    // The replacement may live at the address the old node had: unmap the old one first.
    const auto it = where_.at(old);
    where_.erase(old);
    where_[replacement] = order_.insert(it, replacement);
    order_.erase(it);
  }
  void erase(Node* node) {
    order_.erase(where_.at(node));
    where_.erase(node);
  }
  void apply(Graph& graph) const {
    for (Node* n : order_) graph.move_node_to_end(n);
  }

 private:
  std::list<Node*> order_;
  std::unordered_map<Node*, std::list<Node*>::iterator> where_;
};

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
    order.replace(add, gemm);
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
