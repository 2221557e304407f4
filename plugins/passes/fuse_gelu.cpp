// FuseGelu: the erf spelling of GELU becomes ONNX Runtime's com.microsoft Gelu.
#include "fuse_gelu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qflow/ir/constants.h"
#include "qflow/ir/pattern.h"
#include "qflow/ir/rewrite.h"

namespace qflow {

namespace {

constexpr const char* kContribDomain = "com.microsoft";

struct GeluMatch {
  Node* root = nullptr;
  Value* x = nullptr;
  std::vector<Node*> nodes;
};

// g = 1 + Erf(x / sqrt(2)) (or Erf(x * 1/sqrt(2))), with every intermediate private to it.
std::optional<std::vector<Node*>> match_one_plus_erf(const Graph& graph, Value* g, const Value* x) {
  Node* add = pattern::producer_of(g, "Add");
  if (!add || !pattern::single_consumer(graph, g)) return std::nullopt;
  const std::optional<pattern::ScalarOperand> one = pattern::split_scalar_operand(graph, *add);
  if (!one || !pattern::near(one->constant, 1.0)) return std::nullopt;
  Node* erf = pattern::producer_of(one->other, "Erf");
  if (!erf || !pattern::used_only_by(graph, one->other, add)) return std::nullopt;
  Value* t = erf->input(0);
  if (!pattern::used_only_by(graph, t, erf)) return std::nullopt;
  if (Node* div = pattern::producer_of(t, "Div")) {
    const std::optional<double> c = scalar_constant(graph, div->input(1));
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

class GeluRule final : public RewriteRule<GeluMatch> {
 public:
  std::string name() const override { return "fuse-gelu"; }

  std::optional<GeluMatch> match(const Model& model, Node& root) const override {
    const Graph& graph = *model.graph;
    if ((root.op_type() != "Mul" && root.op_type() != "Div") || root.outputs().size() != 1) return std::nullopt;
    const std::optional<pattern::Product> product = pattern::flatten_product(graph, root.output(0), 3);
    if (!product || product->factors.size() != 2 || !pattern::near(product->scale, 0.5)) return std::nullopt;
    for (int order = 0; order < 2; ++order) {
      Value* x = product->factors[order];
      std::optional<std::vector<Node*>> inner = match_one_plus_erf(graph, product->factors[1 - order], x);
      if (!inner) continue;
      GeluMatch match{&root, x, product->nodes};
      match.nodes.insert(match.nodes.end(), inner->begin(), inner->end());
      return match;
    }
    return std::nullopt;
  }

  Status rewrite(Model& model, GeluMatch& match) const override {
    (void)model;
    replace_op(*match.root, "Gelu", kContribDomain, {match.x});
    return Status::ok();
  }
};

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
  GreedyRewriter rewriter;
  rewriter.add<GeluRule>();
  Expected<RewriteReport> report = rewriter.run(model);
  if (!report) return report.status();
  const int64_t fused = report->total();
  if (fused > 0 && model.opset(kContribDomain) == 0) model.opset_imports.push_back({kContribDomain, 1});
  PassResult result;
  result.counters["fused"] = fused;
  result.changed = fused > 0;
  return result;
}

}  // namespace qflow
