// FuseLayerNorm: the mean/variance spelling of layer normalization becomes LayerNormalization.
#include "fuse_layernorm.h"

#include <algorithm>
#include <vector>

#include "qflow/ir/constants.h"
#include "qflow/ir/pattern.h"
#include "qflow/ir/rewrite.h"

namespace qflow {

namespace {

// The reduced axes of a ReduceMean, as negative axes counted from the end, sorted; empty
// when they are not known constants, when keepdims is 0 or when they are not the last k
// axes (the only layout LayerNormalization's single `axis` can express).
std::vector<int64_t> trailing_axes(const Graph& graph, const Node& reduce, const Value* x) {
  if (reduce.attr_int("keepdims", 1) != 1) return {};
  std::vector<int64_t> axes = reduce.attr_ints("axes");
  if (reduce.input(1)) {
    const std::optional<Tensor> t = graph_constant(graph, reduce.input(1));
    if (!t || !is_integer(t->dtype())) return {};
    axes = t->to_int64s();
  }
  if (axes.empty()) return {};
  std::optional<int64_t> rank;
  if (x->type && x->type->shape) rank = static_cast<int64_t>(x->type->shape->size());
  for (int64_t& a : axes) {
    if (a >= 0) {
      if (!rank) return {};
      a -= *rank;
    }
  }
  std::sort(axes.begin(), axes.end());
  const int64_t k = static_cast<int64_t>(axes.size());
  for (int64_t i = 0; i < k; ++i)
    if (axes[static_cast<std::size_t>(i)] != i - k) return {};
  return axes;
}

struct LayerNormMatch {
  Node* root = nullptr;
  Value* x = nullptr;
  int64_t k = 0;
  double epsilon = 0.0;
  std::optional<Tensor> gamma;
  std::optional<Tensor> beta;
  std::vector<Node*> nodes;
};

// The last k dimensions of x when its declared shape gives them all.
std::optional<Shape> trailing_dims(const Value* x, int64_t k) {
  if (!x->type || !x->type->shape || static_cast<int64_t>(x->type->shape->size()) < k) return std::nullopt;
  Shape dims;
  for (auto it = x->type->shape->end() - k; it != x->type->shape->end(); ++it) {
    if (!it->value) return std::nullopt;
    dims.push_back(*it->value);
  }
  return dims;
}

// A constant affine parameter with its leading 1s dropped; it must then have exactly the
// normalized shape (LayerNormalization's Scale/B do not broadcast), checked against x when
// x's shape is declared, otherwise required to have no size-1 (broadcasting) dimension.
std::optional<Tensor> affine_parameter(const Graph& graph, const Value* v, const Value* x, int64_t k) {
  std::optional<Tensor> t = graph_constant(graph, v);
  if (!t || t->dtype() != DType::Float32) return std::nullopt;
  Shape shape = t->shape();
  while (!shape.empty() && static_cast<int64_t>(shape.size()) > k && shape.front() == 1) shape.erase(shape.begin());
  if (static_cast<int64_t>(shape.size()) != k) return std::nullopt;
  if (const std::optional<Shape> expected = trailing_dims(x, k)) {
    if (shape != *expected) return std::nullopt;
  } else if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d == 1; })) {
    return std::nullopt;
  }
  return t->reshaped(shape);
}

std::optional<LayerNormMatch> match_at(const Graph& graph, Node* div) {
  if (div->op_type() != "Div" || !div->domain().empty() || div->inputs().size() != 2) return std::nullopt;
  Value* d = div->input(0);
  Node* sub = pattern::producer_of(d, "Sub");
  Node* sqrt = pattern::producer_of(div->input(1), "Sqrt");
  if (!sub || !sqrt || !pattern::used_only_by(graph, div->input(1), div)) return std::nullopt;
  Node* add_eps = pattern::producer_of(sqrt->input(0), "Add");
  if (!add_eps || !pattern::used_only_by(graph, sqrt->input(0), sqrt)) return std::nullopt;
  const std::optional<pattern::ScalarOperand> eps = pattern::split_scalar_operand(graph, *add_eps);
  if (!eps || eps->constant < 0.0) return std::nullopt;
  Node* var = pattern::producer_of(eps->other, "ReduceMean");
  if (!var || !pattern::used_only_by(graph, eps->other, add_eps)) return std::nullopt;
  Value* sq = var->input(0);
  Node* square = pattern::producer_of(sq, "Pow");
  if (square) {
    const std::optional<double> exponent = scalar_constant(graph, square->input(1));
    if (!exponent || !pattern::near(*exponent, 2.0) || square->input(0) != d) return std::nullopt;
  } else {
    square = pattern::producer_of(sq, "Mul");
    if (!square || square->input(0) != d || square->input(1) != d) return std::nullopt;
  }
  if (!pattern::used_only_by(graph, sq, var)) return std::nullopt;
  Value* x = sub->input(0);
  Node* mean = pattern::producer_of(sub->input(1), "ReduceMean");
  if (!mean || mean->input(0) != x || !pattern::used_only_by(graph, sub->input(1), sub)) return std::nullopt;
  // d feeds the square (once or twice) and the Div, nothing else.
  if (pattern::is_graph_output(graph, d)) return std::nullopt;
  for (const auto& use : d->uses())
    if (use.first != square && use.first != div) return std::nullopt;
  const std::vector<int64_t> axes = trailing_axes(graph, *mean, x);
  if (axes.empty() || trailing_axes(graph, *var, x) != axes) return std::nullopt;
  // Scale and B are built as float32 and must share X's type.
  if (x->type && x->type->dtype != DType::Undefined && x->type->dtype != DType::Float32) return std::nullopt;

  LayerNormMatch match;
  match.x = x;
  match.k = static_cast<int64_t>(axes.size());
  match.epsilon = eps->constant;
  match.nodes = {mean, sub, square, var, add_eps, sqrt, div};
  match.root = div;
  // Optional Mul(gamma) then Add(beta), each applied to a value nothing else reads.
  Value* tail = div->output(0);
  if (Node* next = pattern::single_consumer(graph, tail)) {
    if (next->op_type() == "Mul" && next->domain().empty() && next->inputs().size() == 2) {
      Value* other = next->input(0) == tail ? next->input(1) : next->input(0);
      if (std::optional<Tensor> g = affine_parameter(graph, other, x, match.k)) {
        match.gamma = std::move(g);
        match.nodes.push_back(next);
        match.root = next;
        tail = next->output(0);
      }
    }
  }
  if (Node* next = pattern::single_consumer(graph, tail)) {
    if (next->op_type() == "Add" && next->domain().empty() && next->inputs().size() == 2) {
      Value* other = next->input(0) == tail ? next->input(1) : next->input(0);
      std::optional<Tensor> b = affine_parameter(graph, other, x, match.k);
      if (b && (!match.gamma || b->shape() == match.gamma->shape())) {
        match.beta = std::move(b);
        match.nodes.push_back(next);
        match.root = next;
      }
    }
  }
  if (!match.gamma) {
    // LayerNormalization needs a Scale: ones of the normalized shape, known from beta or x.
    Shape shape;
    if (match.beta) {
      shape = match.beta->shape();
    } else {
      const std::optional<Shape> dims = trailing_dims(x, match.k);
      if (!dims) return std::nullopt;
      shape = *dims;
    }
    Tensor ones(DType::Float32, shape);
    std::fill(ones.span<float>().begin(), ones.span<float>().end(), 1.0f);
    match.gamma = ones;
  }
  return match;
}

class LayerNormRule final : public RewriteRule<LayerNormMatch> {
 public:
  std::string name() const override { return "fuse-layernorm"; }

  std::optional<LayerNormMatch> match(const Model& model, Node& node) const override {
    return match_at(*model.graph, &node);
  }

  Status rewrite(Model& model, LayerNormMatch& match) const override {
    Graph& graph = *model.graph;
    const std::string base = match.root->name().empty() ? std::string("layer_norm") : match.root->name();
    Value* scale = graph.create_unique_value(base + "_scale");
    graph.set_initializer(scale, *match.gamma);
    std::vector<Value*> inputs = {match.x, scale};
    if (match.beta) {
      Value* bias = graph.create_unique_value(base + "_bias");
      graph.set_initializer(bias, *match.beta);
      inputs.push_back(bias);
    }
    replace_op(*match.root, "LayerNormalization", "", inputs);
    match.root->set_attribute(Attribute::make_int("axis", -match.k));
    match.root->set_attribute(Attribute::make_float("epsilon", static_cast<float>(match.epsilon)));
    return Status::ok();
  }
};

}  // namespace

ComponentInfo FuseLayerNorm::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "fuse-layernorm";
  info.summary = "Fuse the ReduceMean/Sub/Pow/Sqrt/Div spelling of layer normalization into LayerNormalization";
  return info;
}

Expected<std::unique_ptr<Pass>> FuseLayerNorm::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<FuseLayerNorm>());
}

bool FuseLayerNorm::matches(const Model& model) const {
  if (!model.graph) return false;
  const auto& nodes = model.graph->nodes();
  return std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return n->op_type() == "ReduceMean"; });
}

Expected<PassResult> FuseLayerNorm::run_impl(Model& model) {
  PassResult result;
  result.counters["fused"] = 0;
  result.counters["skipped-opset-below-17"] = 0;
  if (model.opset() < 17) {
    // LayerNormalization does not exist yet: count what would have been fused.
    const LayerNormRule rule;
    for (const auto& node : model.graph->nodes())
      if (rule.match(model, *node)) ++result.counters["skipped-opset-below-17"];
    return result;
  }
  GreedyRewriter rewriter;
  rewriter.add<LayerNormRule>();
  Expected<RewriteReport> report = rewriter.run(model);
  if (!report) return report.status();
  result.counters["fused"] = report->total();
  result.changed = report->total() > 0;
  return result;
}

}  // namespace qflow
