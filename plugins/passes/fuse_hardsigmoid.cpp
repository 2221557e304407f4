// FuseHardSigmoid: scaled Clip(a * x + b) chains become HardSigmoid(alpha, beta).
#include "fuse_hardsigmoid.h"

#include <algorithm>
#include <set>
#include <vector>

#include "pattern_match.h"

namespace qflow {

namespace {

struct Match {
  Node* root = nullptr;  // rewritten in place into the HardSigmoid
  Value* x = nullptr;
  double alpha = 0.0;
  double beta = 0.0;
  std::vector<Node*> erased;
};

std::optional<Match> match_at(const Graph& graph, Node* root, int64_t opset) {
  Value* out = root->output(0);
  if (!out || root->outputs().size() != 1) return std::nullopt;
  double scale = 1.0;
  Value* clip_out = out;
  std::vector<Node*> scale_nodes;
  if (root->op_type() == "Mul" || root->op_type() == "Div") {
    const std::optional<pattern::Product> product = pattern::flatten_product(graph, out, 2);
    if (!product || product->factors.size() != 1) return std::nullopt;
    clip_out = product->factors[0];
    // A leaf reached from the product's nodes with a single use is private to it.
    if (clip_out->uses().size() != 1 || pattern::is_graph_output(graph, clip_out)) return std::nullopt;
    scale = product->scale;
    scale_nodes = product->nodes;
  } else if (root->op_type() != "Clip") {
    return std::nullopt;
  }
  const std::optional<pattern::ClipAffine> affine = pattern::match_clip_affine(graph, clip_out, opset);
  if (!affine || scale <= 0.0 || !pattern::near(affine->upper * scale, 1.0)) return std::nullopt;
  Match match;
  match.root = root;
  match.x = affine->x;
  match.alpha = affine->alpha * scale;
  match.beta = affine->beta * scale;
  for (Node* n : scale_nodes)
    if (n != root) match.erased.push_back(n);
  for (Node* n : affine->nodes)
    if (n != root) match.erased.push_back(n);
  return match;
}

}  // namespace

ComponentInfo FuseHardSigmoid::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "fuse-hardsigmoid";
  info.summary = "Fuse scaled Clip(a*x+b, 0, U) spellings of hard-sigmoid into one HardSigmoid";
  return info;
}

Expected<std::unique_ptr<Pass>> FuseHardSigmoid::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<FuseHardSigmoid>());
}

bool FuseHardSigmoid::matches(const Model& model) const {
  if (!model.graph || model.opset() < 6) return false;
  const auto& nodes = model.graph->nodes();
  return std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return n->op_type() == "Clip"; });
}

Expected<PassResult> FuseHardSigmoid::run_impl(Model& model) {
  Graph& graph = *model.graph;
  const int64_t opset = model.opset();
  std::set<const Node*> erased;
  int64_t fused = 0;
  for (Node* node : pattern::node_snapshot(graph)) {
    if (erased.count(node)) continue;
    std::optional<Match> match = match_at(graph, node, opset);
    if (!match) continue;
    const std::vector<Value*> former = pattern::rewrite_node(*match->root, "HardSigmoid", "", {match->x});
    match->root->set_attribute(Attribute::make_float("alpha", static_cast<float>(match->alpha)));
    match->root->set_attribute(Attribute::make_float("beta", static_cast<float>(match->beta)));
    pattern::erase_nodes(graph, match->erased, erased);
    pattern::release_constants(graph, former, erased);
    ++fused;
  }
  if (fused > 0) graph.prune_unused_values();
  PassResult result;
  result.counters["fused"] = fused;
  result.changed = fused > 0;
  return result;
}

}  // namespace qflow
