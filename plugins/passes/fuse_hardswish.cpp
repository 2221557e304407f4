// FuseHardSwish: x * hardsigmoid(x) spellings become HardSwish (opset >= 14) or HardSigmoid + Mul.
#include "fuse_hardswish.h"

#include <algorithm>
#include <set>
#include <vector>

#include "pattern_match.h"

namespace qflow {

namespace {

struct Match {
  Node* root = nullptr;  // the product's result node, rewritten in place
  Node* gate = nullptr;  // Clip or HardSigmoid producing the gate; reused by the two-op form
  Value* x = nullptr;
  Value* gate_out = nullptr;
  double alpha = 0.0;
  double beta = 0.0;
  std::vector<Node*> nodes;  // every node of the pattern, root and gate included
};

// The gate factor g of x * S * g: a Clip(a * x + b, 0, U) chain or HardSigmoid(x).
std::optional<Match> match_gate(const Graph& graph, Value* x, Value* gate, double scale, int64_t opset) {
  if (gate->uses().size() != 1 || pattern::is_graph_output(graph, gate) || scale <= 0.0) return std::nullopt;
  Match match;
  match.x = x;
  match.gate_out = gate;
  if (Node* hs = pattern::producer_of(gate, "HardSigmoid")) {
    if (hs->input(0) != x || !pattern::near(scale, 1.0)) return std::nullopt;
    match.gate = hs;
    match.alpha = hs->attr_float("alpha", 0.2f);
    match.beta = hs->attr_float("beta", 0.5f);
    match.nodes = {hs};
    return match;
  }
  const std::optional<pattern::ClipAffine> affine = pattern::match_clip_affine(graph, gate, opset);
  if (!affine || affine->x != x || !pattern::near(affine->upper * scale, 1.0)) return std::nullopt;
  match.gate = affine->nodes.front();
  match.alpha = affine->alpha * scale;
  match.beta = affine->beta * scale;
  match.nodes = affine->nodes;
  return match;
}

std::optional<Match> match_at(const Graph& graph, Node* root, int64_t opset) {
  if ((root->op_type() != "Mul" && root->op_type() != "Div") || root->outputs().size() != 1) return std::nullopt;
  const std::optional<pattern::Product> product = pattern::flatten_product(graph, root->output(0), 3);
  if (!product || product->factors.size() != 2) return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    Value* x = product->factors[order];
    Value* gate = product->factors[1 - order];
    std::optional<Match> match = match_gate(graph, x, gate, product->scale, opset);
    if (!match) continue;
    match->root = root;
    match->nodes.insert(match->nodes.end(), product->nodes.begin(), product->nodes.end());
    return match;
  }
  return std::nullopt;
}

}  // namespace

ComponentInfo FuseHardSwish::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "fuse-hardswish";
  info.summary = "Fuse x * hardsigmoid(x) spellings into HardSwish (opset >= 14) or HardSigmoid + Mul";
  return info;
}

Expected<std::unique_ptr<Pass>> FuseHardSwish::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<FuseHardSwish>());
}

bool FuseHardSwish::matches(const Model& model) const {
  if (!model.graph || model.opset() < 6) return false;
  const auto& nodes = model.graph->nodes();
  return std::any_of(nodes.begin(), nodes.end(),
                     [](const auto& n) { return n->op_type() == "Clip" || n->op_type() == "HardSigmoid"; });
}

Expected<PassResult> FuseHardSwish::run_impl(Model& model) {
  Graph& graph = *model.graph;
  const int64_t opset = model.opset();
  std::set<const Node*> erased;
  int64_t hardswish = 0;
  int64_t hardsigmoid_mul = 0;
  for (Node* node : pattern::node_snapshot(graph)) {
    if (erased.count(node)) continue;
    std::optional<Match> match = match_at(graph, node, opset);
    if (!match) continue;
    std::vector<Node*> drop;
    std::vector<Value*> former;
    if (opset >= 14 && pattern::near(match->alpha, 1.0 / 6.0) && pattern::near(match->beta, 0.5)) {
      former = pattern::rewrite_node(*match->root, "HardSwish", "", {match->x});
      for (Node* n : match->nodes)
        if (n != match->root) drop.push_back(n);
      ++hardswish;
    } else if (match->nodes.size() > 2) {
      // The gate node sits after x's producer and before the root, so both keep a valid order.
      former = pattern::rewrite_node(*match->gate, "HardSigmoid", "", {match->x});
      match->gate->set_attribute(Attribute::make_float("alpha", static_cast<float>(match->alpha)));
      match->gate->set_attribute(Attribute::make_float("beta", static_cast<float>(match->beta)));
      const std::vector<Value*> root_inputs = pattern::rewrite_node(*match->root, "Mul", "", {match->x, match->gate_out});
      former.insert(former.end(), root_inputs.begin(), root_inputs.end());
      for (Node* n : match->nodes)
        if (n != match->root && n != match->gate) drop.push_back(n);
      ++hardsigmoid_mul;
    } else {
      continue;  // already HardSigmoid + Mul: nothing shorter exists at this opset
    }
    pattern::erase_nodes(graph, drop, erased);
    pattern::release_constants(graph, former, erased);
  }
  if (hardswish + hardsigmoid_mul > 0) graph.prune_unused_values();
  PassResult result;
  result.counters["fused"] = hardswish + hardsigmoid_mul;
  result.counters["fused-hardswish"] = hardswish;
  result.counters["fused-hardsigmoid-mul"] = hardsigmoid_mul;
  result.changed = hardswish + hardsigmoid_mul > 0;
  return result;
}

}  // namespace qflow
