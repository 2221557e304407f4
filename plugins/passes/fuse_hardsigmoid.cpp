// FuseHardSigmoid: scaled Clip(a * x + b) chains become HardSigmoid(alpha, beta).
#include "fuse_hardsigmoid.h"

#include <algorithm>
#include <vector>

#include "qflow/ir/pattern.h"
#include "qflow/ir/rewrite.h"

namespace qflow {

namespace {

struct HardSigmoidMatch {
  Node* root = nullptr;  // rewritten in place into the HardSigmoid
  Value* x = nullptr;
  double alpha = 0.0;
  double beta = 0.0;
  std::vector<Node*> nodes;
};

class HardSigmoidRule final : public RewriteRule<HardSigmoidMatch> {
 public:
  std::string name() const override { return "fuse-hardsigmoid"; }

  std::optional<HardSigmoidMatch> match(const Model& model, Node& root) const override {
    const Graph& graph = *model.graph;
    Value* out = root.output(0);
    if (!out || root.outputs().size() != 1) return std::nullopt;
    double scale = 1.0;
    Value* clip_out = out;
    std::vector<Node*> scale_nodes;
    if (root.op_type() == "Mul" || root.op_type() == "Div") {
      const std::optional<pattern::Product> product = pattern::flatten_product(graph, out, 2);
      if (!product || product->factors.size() != 1) return std::nullopt;
      clip_out = product->factors[0];
      // A leaf reached from the product's nodes with a single use is private to it.
      if (!pattern::single_consumer(graph, clip_out)) return std::nullopt;
      scale = product->scale;
      scale_nodes = product->nodes;
    } else if (root.op_type() != "Clip") {
      return std::nullopt;
    }
    const std::optional<pattern::ClipAffine> affine = pattern::match_clip_affine(graph, clip_out, model.opset());
    if (!affine || scale <= 0.0 || !pattern::near(affine->upper * scale, 1.0)) return std::nullopt;
    HardSigmoidMatch match{&root, affine->x, affine->alpha * scale, affine->beta * scale, scale_nodes};
    match.nodes.insert(match.nodes.end(), affine->nodes.begin(), affine->nodes.end());
    return match;
  }

  Status rewrite(Model& model, HardSigmoidMatch& match) const override {
    (void)model;
    replace_op(*match.root, "HardSigmoid", "", {match.x});
    match.root->set_attribute(Attribute::make_float("alpha", static_cast<float>(match.alpha)));
    match.root->set_attribute(Attribute::make_float("beta", static_cast<float>(match.beta)));
    return Status::ok();
  }
};

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
  GreedyRewriter rewriter;
  rewriter.add<HardSigmoidRule>();
  Expected<RewriteReport> report = rewriter.run(model);
  if (!report) return report.status();
  PassResult result;
  result.counters["fused"] = report->total();
  result.changed = report->total() > 0;
  return result;
}

}  // namespace qflow
