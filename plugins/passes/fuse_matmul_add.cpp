// FuseMatMulAdd: MatMul(A, W) + B with constant W and B rewritten as Gemm(A, W, B).
#include "fuse_matmul_add.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qflow/ir/constants.h"
#include "qflow/ir/pattern.h"
#include "qflow/ir/rewrite.h"

namespace qflow {

namespace {

using pattern::is_default_domain;

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

std::optional<Tensor> float_constant(const Graph& graph, const Value* v) {
  std::optional<Tensor> t = graph_constant(graph, v);
  return t && t->dtype() == DType::Float32 ? t : std::nullopt;
}

struct MatMulAddMatch {
  Node* matmul = nullptr;
  Node* add = nullptr;
  Value* bias = nullptr;
  std::vector<Node*> nodes;
};

class MatMulAddRule final : public RewriteRule<MatMulAddMatch> {
 public:
  std::string name() const override { return "fuse-matmul-add"; }

  std::optional<MatMulAddMatch> match(const Model& model, Node& matmul) const override {
    const Graph& graph = *model.graph;
    if (matmul.op_type() != "MatMul" || !is_default_domain(matmul) || matmul.inputs().size() != 2) return std::nullopt;
    Value* a = matmul.input(0);
    Value* product = matmul.output(0);
    if (!a || !product || !known_2d(a)) return std::nullopt;
    if (a->type && a->type->dtype != DType::Float32 && a->type->dtype != DType::Undefined) return std::nullopt;
    const std::optional<Tensor> w = float_constant(graph, matmul.input(1));
    if (!w || w->rank() != 2) return std::nullopt;
    Node* add = pattern::single_consumer(graph, product);
    if (!add || add->op_type() != "Add" || !is_default_domain(*add) || add->inputs().size() != 2 || !add->output(0))
      return std::nullopt;
    Value* bias = add->input(add->input(0) == product ? 1 : 0);
    const std::optional<Tensor> b = float_constant(graph, bias);
    if (!b || !is_row_bias(*b, w->dim(1))) return std::nullopt;
    return MatMulAddMatch{&matmul, add, bias, {&matmul, add}};
  }

  // The Add becomes the Gemm: it runs where the Add ran, after A's producer and every other
  // input, and keeps the Add's output. It takes the MatMul's name (the Add's when the MatMul
  // has none) and documentation.
  Status rewrite(Model& model, MatMulAddMatch& match) const override {
    (void)model;
    Node& gemm = *match.add;
    replace_op(gemm, "Gemm", "", {match.matmul->input(0), match.matmul->input(1), match.bias});
    if (!match.matmul->name().empty()) gemm.set_name(match.matmul->name());
    gemm.doc_string = match.matmul->doc_string;
    gemm.overload.clear();
    return Status::ok();
  }
};

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
  GreedyRewriter rewriter;
  rewriter.add<MatMulAddRule>();
  Expected<RewriteReport> report = rewriter.run(model);
  if (!report) return report.status();
  PassResult result;
  result.counters["fused"] = report->total();
  result.changed = report->total() > 0;
  return result;
}

}  // namespace qflow
