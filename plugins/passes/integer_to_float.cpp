// IntegerToFloat: matching ONNX Runtime's dynamic-quantization pattern and restoring the float op.
#include "integer_to_float.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "constant_folding.h"
#include "qflow/ir/constants.h"
#include "qflow/ir/pattern.h"
#include "qflow/ir/rewrite.h"

namespace qflow {

namespace {

bool is_integer_op(const Node& node) {
  return (node.op_type() == "ConvInteger" || node.op_type() == "MatMulInteger") && pattern::is_default_domain(node);
}

// One matched pattern: what the float op is built from and the nodes it replaces.
struct Match {
  Node* mul = nullptr;          // y = Mul(cast, scale): becomes the float op, keeping y
  Node* integer = nullptr;      // ConvInteger / MatMulInteger
  Node* cast = nullptr;
  Node* scale_mul = nullptr;    // Mul(xs, ws)
  Node* dynamic = nullptr;      // DynamicQuantizeLinear
  Value* x = nullptr;           // the float activation the DynamicQuantizeLinear read
  Tensor weight;                // (Wq - wzp) * ws
  std::vector<Node*> nodes;     // all of the above: the driver erases those left unread
};

// Per-output-channel vector of `values` for a weight with `channels` output channels: one
// value or one per channel; nullopt otherwise.
std::optional<std::vector<double>> per_channel(const Tensor& values, int64_t channels) {
  const std::vector<double> v = values.to_doubles();
  if (v.size() == 1) return std::vector<double>(static_cast<std::size_t>(channels), v[0]);
  if (static_cast<int64_t>(v.size()) == channels) return v;
  return std::nullopt;
}

// True when a weight scale of `shape` multiplies an output of rank `rank` along `axis` only
// (or is one value).
bool broadcasts_along(const Shape& shape, int64_t rank, int64_t axis) {
  if (shape_numel(shape) == 1) return true;
  if (static_cast<int64_t>(shape.size()) > rank) return false;
  const int64_t offset = rank - static_cast<int64_t>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && static_cast<int64_t>(d) + offset != axis) return false;
  return true;
}

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph), by_name_(folding::subgraph_referenced_names(graph)) {}

  std::optional<Match> match(Node* mul) const {
    if (mul->op_type() != "Mul" || !pattern::is_default_domain(*mul) || mul->inputs().size() != 2 ||
        !mul->output(0))
      return std::nullopt;
    for (int side = 0; side < 2; ++side)
      if (auto m = match_operands(mul, mul->input(side), mul->input(1 - side))) return m;
    return std::nullopt;
  }

 private:
  // A value that disappears with the pattern: read only by `reader`, not an output, not
  // captured by a subgraph.
  bool internal(const Value* v, const Node* reader) const {
    return pattern::used_only_by(graph_, v, reader) && !by_name_.count(v->name());
  }

  std::optional<Match> match_operands(Node* mul, Value* product, Value* scale) const {
    Match m;
    m.mul = mul;
    m.cast = pattern::producer_of(product, "Cast");
    if (!m.cast || m.cast->attr_int("to", 0) != static_cast<int64_t>(DType::Float32) || !internal(product, mul))
      return std::nullopt;
    Value* integer_out = m.cast->input(0);
    m.integer = integer_out ? integer_out->producer() : nullptr;
    if (!m.integer || !is_integer_op(*m.integer) || !internal(integer_out, m.cast)) return std::nullopt;
    // The activation operand and its zero point come from one DynamicQuantizeLinear.
    Value* xq = m.integer->input(0);
    m.dynamic = pattern::producer_of(xq, "DynamicQuantizeLinear");
    if (!m.dynamic || xq->producer_output_index() != 0 || m.integer->input(2) != m.dynamic->output(2) ||
        !m.dynamic->output(2))
      return std::nullopt;
    m.x = m.dynamic->input(0);
    // scale = Mul(xs, ws), ws constant.
    m.scale_mul = pattern::producer_of(scale, "Mul");
    if (!m.scale_mul || m.scale_mul->inputs().size() != 2) return std::nullopt;
    Value* xs = m.dynamic->output(1);
    Value* ws_value = m.scale_mul->input(0) == xs ? m.scale_mul->input(1)
                      : m.scale_mul->input(1) == xs ? m.scale_mul->input(0)
                                                    : nullptr;
    const std::optional<Tensor> ws = graph_constant(graph_, ws_value);
    const std::optional<Tensor> wq = graph_constant(graph_, m.integer->input(1));
    if (!ws || ws->dtype() != DType::Float32 || !wq || (wq->dtype() != DType::Int8 && wq->dtype() != DType::UInt8))
      return std::nullopt;
    std::optional<Tensor> wzp;
    if (m.integer->input(3)) {
      wzp = graph_constant(graph_, m.integer->input(3));
      if (!wzp || wzp->dtype() != wq->dtype()) return std::nullopt;
    }
    // Output channels: Conv weights [M, C/group, k...] (output channel axis 1, output rank =
    // weight rank); MatMul weights [K, N] (output channel axis last).
    const bool conv = m.integer->op_type() == "ConvInteger";
    if ((conv && wq->rank() < 3) || (!conv && wq->rank() != 2)) return std::nullopt;
    const int64_t channels = conv ? wq->shape()[0] : wq->shape()[1];
    const int64_t output_rank = conv ? wq->rank() : 2;
    if (!broadcasts_along(ws->shape(), output_rank, conv ? 1 : output_rank - 1)) return std::nullopt;
    const auto scales = per_channel(*ws, channels);
    const auto zero_points = wzp ? per_channel(*wzp, channels) : std::vector<double>(static_cast<std::size_t>(channels), 0.0);
    if (!scales || !zero_points) return std::nullopt;

    const std::vector<int64_t> q = wq->to_int64s();
    m.weight = Tensor(DType::Float32, wq->shape());
    float* w = m.weight.data<float>();
    const int64_t per_row = wq->numel() / channels;  // Conv: a channel's run; MatMul: K rows of N
    for (int64_t i = 0; i < wq->numel(); ++i) {
      const auto c = static_cast<std::size_t>(conv ? i / per_row : i % channels);
      // q - zero_point is exact; its float32 value times the float32 scale, as DequantizeLinear.
      w[i] = static_cast<float>(q[static_cast<std::size_t>(i)] - static_cast<int64_t>((*zero_points)[c])) *
             static_cast<float>((*scales)[c]);
    }
    m.nodes = {m.mul, m.cast, m.integer, m.scale_mul, m.dynamic};
    return m;
  }

  const Graph& graph_;
  std::set<std::string> by_name_;
};

// "conv.weight_quantized" -> "conv.weight" when free, else a fresh name.
Value* weight_value(Graph& graph, const Value* quantized) {
  std::string name = quantized ? quantized->name() : "weight";
  const std::string suffix = "_quantized";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  if (!graph.find_value(name)) return graph.get_or_create_value(name);
  return graph.create_unique_value(name + "_float");
}

// Restores one kind of integer op (ConvInteger or MatMulInteger): the Mul becomes the
// float op, keeping its output and place in the node order; the driver removes what only
// the pattern used (the scale Mul when private, the DynamicQuantizeLinear when unread).
class RestoreRule final : public RewriteRule<Match> {
 public:
  RestoreRule(const Graph& graph, std::string integer_op, std::string counter)
      : matcher_(graph), integer_op_(std::move(integer_op)), counter_(std::move(counter)) {}

  std::string name() const override { return counter_; }

  std::optional<Match> match(const Model& model, Node& node) const override {
    (void)model;
    std::optional<Match> m = matcher_.match(&node);
    if (!m || m->integer->op_type() != integer_op_) return std::nullopt;
    return m;
  }

  Status rewrite(Model& model, Match& m) const override {
    Graph& graph = *model.graph;
    Value* weight = weight_value(graph, m.integer->input(1));
    graph.set_initializer(weight, std::move(m.weight));
    const std::string name = m.integer->name();
    const std::vector<Attribute> attributes = m.integer->attributes();
    replace_op(*m.mul, integer_op_ == "ConvInteger" ? "Conv" : "MatMul", "", {m.x, weight});
    for (const Attribute& a : attributes) m.mul->set_attribute(a);
    m.mul->set_name(name);
    return Status::ok();
  }

 private:
  const Matcher matcher_;
  std::string integer_op_;
  std::string counter_;
};

}  // namespace

ComponentInfo IntegerToFloat::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "integer-to-float";
  info.summary = "Turn dynamically quantized convolutions and matmuls (ConvInteger/MatMulInteger) back into float ones";
  return info;
}

Expected<std::unique_ptr<Pass>> IntegerToFloat::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<IntegerToFloat>());
}

bool IntegerToFloat::matches(const Model& model) const {
  if (!model.graph) return false;
  return std::any_of(model.graph->nodes().begin(), model.graph->nodes().end(),
                     [](const auto& node) { return is_integer_op(*node); });
}

Expected<PassResult> IntegerToFloat::run_impl(Model& model) {
  // Earlier restorations remove only nodes private to their own patterns, so one sweep
  // finds every pattern.
  GreedyRewriter rewriter;
  rewriter.add<RestoreRule>(*model.graph, "ConvInteger", "convs-restored");
  rewriter.add<RestoreRule>(*model.graph, "MatMulInteger", "matmuls-restored");
  Expected<RewriteReport> report = rewriter.run(model);
  if (!report) return report.status();
  PassResult result;
  result.counters = report->rewrites;
  result.changed = report->total() > 0;
  return result;
}

}  // namespace qflow
