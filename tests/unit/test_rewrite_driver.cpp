// The greedy rewrite driver: fixpoint over sweeps, the iteration bound, per-rule counts, a
// rule that matches nothing, cleanup of dead nodes and constants, determinism.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "qflow/ir/constants.h"
#include "qflow/ir/pattern.h"
#include "qflow/ir/rewrite.h"

using namespace qflow;

namespace {

struct UnaryMatch {
  Node* node = nullptr;
  Node* inner = nullptr;
  std::vector<Node*> nodes;
};

// Neg(Neg(x)) -> Identity(x); the inner Neg dies and the driver erases it.
class FoldDoubleNeg final : public RewriteRule<UnaryMatch> {
 public:
  std::string name() const override { return "fold-double-neg"; }
  std::optional<UnaryMatch> match(const Model& model, Node& node) const override {
    if (node.op_type() != "Neg") return std::nullopt;
    Node* inner = pattern::producer_of(node.input(0), "Neg");
    if (!inner || !pattern::used_only_by(*model.graph, node.input(0), &node)) return std::nullopt;
    return UnaryMatch{&node, inner, {&node, inner}};
  }
  Status rewrite(Model& model, UnaryMatch& match) const override {
    (void)model;
    replace_op(*match.node, "Identity", "", {match.inner->input(0)});
    return Status::ok();
  }
};

// Sub(a, b) -> Add(a, Neg(b)), the Neg a new node: visited from the next sweep on.
class LowerSub final : public RewriteRule<UnaryMatch> {
 public:
  std::string name() const override { return "lower-sub"; }
  std::optional<UnaryMatch> match(const Model& model, Node& node) const override {
    (void)model;
    if (node.op_type() != "Sub") return std::nullopt;
    return UnaryMatch{&node, nullptr, {&node}};
  }
  Status rewrite(Model& model, UnaryMatch& match) const override {
    Graph& g = *model.graph;
    Value* negated = g.create_unique_value("negated");
    g.add_node("Neg", {match.node->input(1)}, {negated}, "neg_" + match.node->name());
    replace_op(*match.node, "Add", "", {match.node->input(0), negated});
    return Status::ok();
  }
};

// Identity(x) -> Neg(Neg(x)): with FoldDoubleNeg the two never settle.
class ExpandIdentity final : public RewriteRule<UnaryMatch> {
 public:
  std::string name() const override { return "expand-identity"; }
  std::optional<UnaryMatch> match(const Model& model, Node& node) const override {
    (void)model;
    if (node.op_type() != "Identity") return std::nullopt;
    return UnaryMatch{&node, nullptr, {&node}};
  }
  Status rewrite(Model& model, UnaryMatch& match) const override {
    Graph& g = *model.graph;
    Value* inner = g.create_unique_value("inner");
    g.add_node("Neg", {match.node->input(0)}, {inner});
    replace_op(*match.node, "Neg", "", {inner});
    return Status::ok();
  }
};

// Mul(x, 1) -> Identity(x), the constant read with graph_constant.
class DropMulByOne final : public RewriteRule<UnaryMatch> {
 public:
  std::string name() const override { return "drop-mul-by-one"; }
  std::optional<UnaryMatch> match(const Model& model, Node& node) const override {
    if (node.op_type() != "Mul") return std::nullopt;
    const std::optional<double> one = scalar_constant(*model.graph, node.input(1));
    if (!one || *one != 1.0) return std::nullopt;
    return UnaryMatch{&node, nullptr, {&node}};
  }
  Status rewrite(Model& model, UnaryMatch& match) const override {
    (void)model;
    replace_op(*match.node, "Identity", "", {match.node->input(0)});
    return Status::ok();
  }
};

// Matches nothing: a real graph never holds this op.
class NeverMatches final : public RewriteRule<UnaryMatch> {
 public:
  std::string name() const override { return "never-matches"; }
  std::optional<UnaryMatch> match(const Model& model, Node& node) const override {
    (void)model;
    if (node.op_type() != "NoSuchOp") return std::nullopt;
    return UnaryMatch{&node, nullptr, {&node}};
  }
  Status rewrite(Model& model, UnaryMatch& match) const override {
    (void)model;
    (void)match;
    return internal_error("never-matches rewrote");
  }
};

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type());
  return ops;
}

// y = Sub(a, Neg(b)).
Model sub_of_neg() {
  Model model;
  model.opset_imports = {{"", 13}};
  Graph& g = *model.graph;
  Value* a = g.get_or_create_value("a");
  Value* b = g.get_or_create_value("b");
  Value* n = g.get_or_create_value("n");
  Value* y = g.get_or_create_value("y");
  g.inputs = {a, b};
  g.add_node("Neg", {b}, {n}, "neg");
  g.add_node("Sub", {a, n}, {y}, "sub");
  g.outputs = {y};
  return model;
}

}  // namespace

TEST_CASE("rewrite driver: sweeps until a sweep rewrites nothing") {
  Model model = sub_of_neg();
  GreedyRewriter rewriter;
  rewriter.add<LowerSub>();
  rewriter.add<FoldDoubleNeg>();
  const auto report = rewriter.run(model);
  REQUIRE(report.has_value());
  // Sweep 1 lowers the Sub; its new Neg meets the old one only in sweep 2; sweep 3 finds nothing.
  CHECK(report->iterations == 3);
  CHECK(report->converged);
  CHECK(report->rewrites.at("lower-sub") == 1);
  CHECK(report->rewrites.at("fold-double-neg") == 1);
  CHECK(report->total() == 2);
  const Graph& g = *model.graph;
  // The inner Neg died with the fold and is gone; the Identity reads b.
  CHECK(op_types(g) == std::vector<std::string>{"Add", "Identity"});
  const Node* identity = g.nodes().back().get();
  CHECK(identity->input(0) == g.find_value("b"));
  CHECK(g.nodes().front()->input(1) == identity->output(0));
  CHECK(g.validate().is_ok());
  // Unused values are pruned after a rewrite.
  CHECK(g.find_value("n") == nullptr);
}

TEST_CASE("rewrite driver: the iteration bound stops rules that never settle") {
  Model model;
  model.opset_imports = {{"", 13}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  Value* y = g.get_or_create_value("y");
  g.inputs = {x};
  g.add_node("Identity", {x}, {y}, "id");
  g.outputs = {y};
  RewriteOptions options;
  options.max_iterations = 5;
  GreedyRewriter rewriter(options);
  rewriter.add<ExpandIdentity>();
  rewriter.add<FoldDoubleNeg>();
  const auto report = rewriter.run(model);
  REQUIRE(report.has_value());
  CHECK(report->iterations == 5);
  CHECK_FALSE(report->converged);
  // Odd sweeps expand, even sweeps fold.
  CHECK(report->rewrites.at("expand-identity") == 3);
  CHECK(report->rewrites.at("fold-double-neg") == 2);
  CHECK(op_types(g) == std::vector<std::string>{"Neg", "Neg"});
  CHECK(g.validate().is_ok());
}

TEST_CASE("rewrite driver: a rule that matches nothing leaves the graph alone and counts 0") {
  Model model = sub_of_neg();
  Graph& g = *model.graph;
  g.get_or_create_value("dangling");  // pruned only when something was rewritten
  GreedyRewriter rewriter;
  rewriter.add<NeverMatches>();
  const auto report = rewriter.run(model);
  REQUIRE(report.has_value());
  CHECK(report->iterations == 1);
  CHECK(report->converged);
  CHECK(report->rewrites.size() == 1);
  CHECK(report->rewrites.at("never-matches") == 0);
  CHECK(report->total() == 0);
  CHECK(op_types(g) == std::vector<std::string>{"Neg", "Sub"});
  CHECK(g.find_value("dangling") != nullptr);
}

TEST_CASE("rewrite driver: constants only the rewritten pattern read are released") {
  Model model;
  model.opset_imports = {{"", 13}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  Value* one_init = g.get_or_create_value("one_init");
  g.set_initializer(one_init, Tensor::scalar<float>(1.0f));
  Value* one_node = g.get_or_create_value("one_node");
  Node* constant = g.add_node("Constant", {}, {one_node}, "one");
  constant->set_attribute(Attribute::make_float("value_float", 1.0f));
  Value* shared = g.get_or_create_value("shared");
  g.set_initializer(shared, Tensor::scalar<float>(1.0f));
  Value* m1 = g.get_or_create_value("m1");
  Value* m2 = g.get_or_create_value("m2");
  Value* m3 = g.get_or_create_value("m3");
  Value* y = g.get_or_create_value("y");
  g.inputs = {x};
  g.add_node("Mul", {x, one_init}, {m1}, "mul_init");
  g.add_node("Mul", {m1, one_node}, {m2}, "mul_node");
  g.add_node("Mul", {m2, shared}, {m3}, "mul_shared");
  g.add_node("Add", {m3, shared}, {y}, "add_shared");
  g.outputs = {y};
  GreedyRewriter rewriter;
  rewriter.add<DropMulByOne>();
  const auto report = rewriter.run(model);
  REQUIRE(report.has_value());
  CHECK(report->rewrites.at("drop-mul-by-one") == 3);
  CHECK(op_types(g) == std::vector<std::string>{"Identity", "Identity", "Identity", "Add"});
  CHECK_FALSE(g.is_initializer(g.find_value("one_init")));
  CHECK(g.find_value("one_node") == nullptr);  // its Constant node was erased, then the value pruned
  CHECK(g.is_initializer(shared));             // the Add still reads it
  CHECK(g.validate().is_ok());
}

TEST_CASE("rewrite driver: the same graph and rules give the same result") {
  auto run = [] {
    Model model = sub_of_neg();
    GreedyRewriter rewriter;
    rewriter.add<LowerSub>();
    rewriter.add<FoldDoubleNeg>();
    REQUIRE(rewriter.run(model).has_value());
    std::vector<std::string> described;
    for (const auto& n : model.graph->nodes()) {
      std::string line = n->op_type() + " " + n->name() + ":";
      for (const Value* v : n->inputs()) line += " " + v->name();
      described.push_back(line);
    }
    return described;
  };
  const auto first = run();
  CHECK(first == run());
  CHECK(first.size() == 2);
}

TEST_CASE("rewrite driver: a failing rewrite fails the run") {
  class Failing final : public RewriteRule<UnaryMatch> {
   public:
    std::string name() const override { return "failing"; }
    std::optional<UnaryMatch> match(const Model& model, Node& node) const override {
      (void)model;
      return UnaryMatch{&node, nullptr, {&node}};
    }
    Status rewrite(Model& model, UnaryMatch& match) const override {
      (void)model;
      return invalid_input("cannot rewrite " + match.node->name());
    }
  };
  Model model = sub_of_neg();
  GreedyRewriter rewriter;
  rewriter.add<Failing>();
  const auto report = rewriter.run(model);
  REQUIRE_FALSE(report.has_value());
  CHECK(report.status().message() == "cannot rewrite neg");
}
