// FuseGelu: the erf spelling of GELU becomes ONNX Runtime's com.microsoft Gelu.
#include "fuse_gelu.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "pattern_match.h"

namespace qflow {

namespace {

constexpr const char* kContribDomain = "com.microsoft";

struct Match {
  Node* root = nullptr;
  Value* x = nullptr;
  std::vector<Node*> nodes;
};

// g = 1 + Erf(x / sqrt(2)) (or Erf(x * 1/sqrt(2))), with every intermediate private to it.
std::optional<std::vector<Node*>> match_one_plus_erf(const Graph& graph, Value* g, const Value* x) {
  Node* add = pattern::producer_of(g, "Add");
  if (!add || g->uses().size() != 1 || pattern::is_graph_output(graph, g)) return std::nullopt;
  const std::optional<pattern::ScalarOperand> one = pattern::split_scalar_operand(graph, *add);
  if (!one || !pattern::near(one->constant, 1.0)) return std::nullopt;
  Node* erf = pattern::producer_of(one->other, "Erf");
  if (!erf || !pattern::used_only_by(graph, one->other, add)) return std::nullopt;
  Value* t = erf->input(0);
  if (!pattern::used_only_by(graph, t, erf)) return std::nullopt;
  if (Node* div = pattern::producer_of(t, "Div")) {
    const std::optional<double> c = pattern::scalar_constant(graph, div->input(1));
    if (div->input(0) != x || !c || !pattern::near(*c, std::sqrt(2.0))) return std::nullopt;
    return std::vector<Node*>{add, erf, div};
  }
  if (Node* mul = pattern::producer_of(t, "Mul")) {
    const std::optional<pattern::ScalarOperand> c = pattern::split_scalar_operand(graph, *mul);
    if (!c || c->other != x || !pattern::near(c->constant, 1.0 / std::sqrt(2.0))) return std::nullopt;
    return std::vector<Node*>{add, erf, mul};
  }
  return std::nullopt;
}

std::optional<Match> match_at(const Graph& graph, Node* root) {
  if ((root->op_type() != "Mul" && root->op_type() != "Div") || root->outputs().size() != 1) return std::nullopt;
  const std::optional<pattern::Product> product = pattern::flatten_product(graph, root->output(0), 3);
  if (!product || product->factors.size() != 2 || !pattern::near(product->scale, 0.5)) return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    Value* x = product->factors[order];
    std::optional<std::vector<Node*>> inner = match_one_plus_erf(graph, product->factors[1 - order], x);
    if (!inner) continue;
    Match match;
    match.root = root;
    match.x = x;
    match.nodes = product->nodes;
    match.nodes.insert(match.nodes.end(), inner->begin(), inner->end());
    return match;
  }
  return std::nullopt;
}

}  // namespace

ComponentInfo FuseGelu::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "fuse-gelu";
  info.summary = "Fuse x * 0.5 * (1 + Erf(x / sqrt(2))) into com.microsoft Gelu";
  return info;
}

Expected<std::unique_ptr<Pass>> FuseGelu::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<FuseGelu>());
}

bool FuseGelu::matches(const Model& model) const {
  if (!model.graph) return false;
  const auto& nodes = model.graph->nodes();
  return std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return n->op_type() == "Erf"; });
}

Expected<PassResult> FuseGelu::run_impl(Model& model) {
  Graph& graph = *model.graph;
  std::set<const Node*> erased;
  int64_t fused = 0;
  for (Node* node : pattern::node_snapshot(graph)) {
    if (erased.count(node)) continue;
    std::optional<Match> match = match_at(graph, node);
    if (!match) continue;
    const std::vector<Value*> former = pattern::rewrite_node(*match->root, "Gelu", kContribDomain, {match->x});
    std::vector<Node*> drop;
    for (Node* n : match->nodes)
      if (n != match->root) drop.push_back(n);
    pattern::erase_nodes(graph, drop, erased);
    pattern::release_constants(graph, former, erased);
    ++fused;
  }
  if (fused > 0) {
    if (model.opset(kContribDomain) == 0) model.opset_imports.push_back({kContribDomain, 1});
    graph.prune_unused_values();
  }
  PassResult result;
  result.counters["fused"] = fused;
  result.changed = fused > 0;
  return result;
}

}  // namespace qflow
