// FuseHardSwish: x * hardsigmoid(x) spellings become HardSwish (opset >= 14) or HardSigmoid + Mul.
#include "fuse_hardswish.h"

#include <algorithm>
#include <vector>

#include "qflow/ir/pattern.h"
#include "qflow/ir/rewrite.h"

namespace qflow {

namespace {

struct HardSwishMatch {
  Node* root = nullptr;  // the product's result node, rewritten in place
  Node* gate = nullptr;  // Clip or HardSigmoid producing the gate; reused by the two-op form
  Value* x = nullptr;
  Value* gate_out = nullptr;
  double alpha = 0.0;
  double beta = 0.0;
  std::vector<Node*> nodes;  // every node of the pattern, root and gate included
};

// The gate factor g of x * S * g: a Clip(a * x + b, 0, U) chain or HardSigmoid(x).
std::optional<HardSwishMatch> match_gate(const Graph& graph, Value* x, Value* gate, double scale, int64_t opset) {
  if (!pattern::single_consumer(graph, gate) || scale <= 0.0) return std::nullopt;
  HardSwishMatch match;
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

std::optional<HardSwishMatch> match_at(const Graph& graph, Node* root, int64_t opset) {
  if ((root->op_type() != "Mul" && root->op_type() != "Div") || root->outputs().size() != 1) return std::nullopt;
  const std::optional<pattern::Product> product = pattern::flatten_product(graph, root->output(0), 3);
  if (!product || product->factors.size() != 2) return std::nullopt;
  for (int order = 0; order < 2; ++order) {
    Value* x = product->factors[order];
    Value* gate = product->factors[1 - order];
    std::optional<HardSwishMatch> match = match_gate(graph, x, gate, product->scale, opset);
    if (!match) continue;
    match->root = root;
    match->nodes.insert(match->nodes.end(), product->nodes.begin(), product->nodes.end());
    return match;
  }
  return std::nullopt;
}

bool is_hardswish(const HardSwishMatch& match, int64_t opset) {
  return opset >= 14 && pattern::near(match.alpha, 1.0 / 6.0) && pattern::near(match.beta, 0.5);
}

// The whole pattern becomes one HardSwish (opset >= 14, hard-sigmoid constants 1/6 and 1/2).
class HardSwishRule final : public RewriteRule<HardSwishMatch> {
 public:
  std::string name() const override { return "fused-hardswish"; }

  std::optional<HardSwishMatch> match(const Model& model, Node& root) const override {
    std::optional<HardSwishMatch> match = match_at(*model.graph, &root, model.opset());
    if (!match || !is_hardswish(*match, model.opset())) return std::nullopt;
    return match;
  }

  Status rewrite(Model& model, HardSwishMatch& match) const override {
    (void)model;
    replace_op(*match.root, "HardSwish", "", {match.x});
    return Status::ok();
  }
};

// Otherwise the gate becomes a HardSigmoid and the product one Mul; a pattern already in
// that form (two nodes) has nothing shorter at its opset.
class HardSigmoidMulRule final : public RewriteRule<HardSwishMatch> {
 public:
  std::string name() const override { return "fused-hardsigmoid-mul"; }

  std::optional<HardSwishMatch> match(const Model& model, Node& root) const override {
    std::optional<HardSwishMatch> match = match_at(*model.graph, &root, model.opset());
    if (!match || is_hardswish(*match, model.opset()) || match->nodes.size() <= 2) return std::nullopt;
    return match;
  }

  Status rewrite(Model& model, HardSwishMatch& match) const override {
    (void)model;
    // The gate node sits after x's producer and before the root, so both keep a valid order.
    replace_op(*match.gate, "HardSigmoid", "", {match.x});
    match.gate->set_attribute(Attribute::make_float("alpha", static_cast<float>(match.alpha)));
    match.gate->set_attribute(Attribute::make_float("beta", static_cast<float>(match.beta)));
    replace_op(*match.root, "Mul", "", {match.x, match.gate_out});
    return Status::ok();
  }
};

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
  GreedyRewriter rewriter;
  rewriter.add<HardSwishRule>();
  rewriter.add<HardSigmoidMulRule>();
  Expected<RewriteReport> report = rewriter.run(model);
  if (!report) return report.status();
  PassResult result;
  result.counters["fused"] = report->total();
  result.counters.insert(report->rewrites.begin(), report->rewrites.end());
  result.changed = report->total() > 0;
  return result;
}

}  // namespace qflow
