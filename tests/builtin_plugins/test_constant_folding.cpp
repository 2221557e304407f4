// Tests of the constant-folding pass: structure before/after, untouched graphs, numerical equivalence.
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/constant_folding.h"

namespace qflow {
namespace {

using namespace pass_test;

// y = x + Reshape(Transpose(W) * Constant(2), S) ; Relu(x) also an output; RandomNormal stays.
//   W [3,2] initializer, S = [2,3] initializer, two = Constant node.
Model foldable_model() {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({2, 3});
  g.inputs = {x};
  Value* w = g.get_or_create_value("W");
  g.set_initializer(w, random_tensor({3, 2}, 7, -2.0f, 2.0f));
  Value* s = g.get_or_create_value("S");
  g.set_initializer(s, Tensor::from_vector<int64_t>({2}, {2, 3}));
  Value* two = g.get_or_create_value("two");
  Node* constant = g.add_node("Constant", {}, {two}, "two");
  constant->set_attribute(Attribute::make_tensor("value", Tensor::scalar<float>(2.0f)));
  Value* wt = g.get_or_create_value("wt");
  g.add_node("Transpose", {w}, {wt}, "transpose")->set_attribute(Attribute::make_ints("perm", {1, 0}));
  Value* scaled = g.get_or_create_value("scaled");
  g.add_node("Mul", {wt, two}, {scaled}, "scale");
  Value* bias = g.get_or_create_value("bias");
  g.add_node("Reshape", {scaled, s}, {bias}, "reshape");
  Value* y = g.get_or_create_value("y");
  g.add_node("Add", {x, bias}, {y}, "add");
  Value* r = g.get_or_create_value("r");
  g.add_node("Relu", {x}, {r}, "relu");
  g.outputs = {y, r};
  return model;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(n->name());
  return names;
}

std::map<std::string, Tensor> run_model(const Model& model, const std::map<std::string, Tensor>& feeds) {
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = executor.value()->run(feeds);
  REQUIRE(outputs.has_value());
  return outputs.value();
}

TEST_CASE("constant-folding: folds the constant chain into one initializer") {
  Model model = foldable_model();
  ConstantFolding pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("nodes-folded") == 4);  // Constant, Transpose, Mul, Reshape
  CHECK(result->counters.at("initializers-removed") == 2);  // W and S
  const Graph& g = *model.graph;
  CHECK(node_names(g) == std::vector<std::string>{"add", "relu"});
  const Value* bias = g.find_value("bias");
  REQUIRE(bias != nullptr);
  const Tensor* folded = g.initializer(bias);
  REQUIRE(folded != nullptr);
  CHECK(folded->shape() == Shape{2, 3});
  // bias[i][j] = 2 * W[j][i]: checked against W itself, not against the kernels.
  const Tensor w = random_tensor({3, 2}, 7, -2.0f, 2.0f);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      CHECK(folded->span<float>()[static_cast<std::size_t>(i * 3 + j)] ==
            2.0f * w.span<float>()[static_cast<std::size_t>(j * 2 + i)]);
  CHECK(g.find_value("W") == nullptr);
  CHECK(g.find_value("two") == nullptr);
  CHECK(g.validate().is_ok());
  // A second run finds nothing: the first reached the fixed point.
  auto again = pass.run(model);
  REQUIRE(again.has_value());
  CHECK_FALSE(again->changed);
}

TEST_CASE("constant-folding: outputs are numerically identical") {
  const Model original = foldable_model();
  Model folded = foldable_model();
  ConstantFolding pass;
  REQUIRE(pass.run(folded).has_value());
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const std::map<std::string, Tensor> feeds = {{"x", random_tensor({2, 3}, seed, -2.0f, 2.0f)}};
    const auto before = run_model(original, feeds);
    const auto after = run_model(folded, feeds);
    // Same kernels on the same values: the results must match bit for bit.
    CHECK(before.at("y").bitwise_equal(after.at("y")));
    CHECK(before.at("r").bitwise_equal(after.at("r")));
  }
}

TEST_CASE("constant-folding: leaves random, runtime-fed and graph-output nodes alone") {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({2});
  // An initializer listed as a graph input is a default the caller may override.
  Value* k = g.get_or_create_value("k");
  g.set_initializer(k, Tensor::from_vector<float>({2}, {1.0f, 2.0f}));
  g.inputs = {x, k};
  Value* noise = g.get_or_create_value("noise");
  Node* random = g.add_node("RandomNormal", {}, {noise}, "random");
  random->set_attribute(Attribute::make_ints("shape", {2}));
  Value* kn = g.get_or_create_value("kn");
  g.add_node("Neg", {k}, {kn}, "neg_k");
  Value* c = g.get_or_create_value("c");
  g.set_initializer(c, Tensor::from_vector<float>({2}, {3.0f, 4.0f}));
  Value* cn = g.get_or_create_value("cn");
  g.add_node("Neg", {c}, {cn}, "neg_c_output");
  Value* sum = g.get_or_create_value("sum");
  g.add_node("Sum", {x, noise, kn}, {sum}, "sum");
  g.outputs = {sum, cn};
  const std::vector<std::string> before = node_names(g);
  ConstantFolding pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
  CHECK(result->counters.at("nodes-folded") == 0);
  CHECK(node_names(g) == before);
}

TEST_CASE("constant-folding: max-bytes skips large results") {
  Model model = foldable_model();
  ConstantFolding pass(/*max_bytes=*/16);  // the 24-byte bias is too large, the scalar fits
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("nodes-folded") == 1);  // only the Constant
  CHECK(node_names(*model.graph) == std::vector<std::string>{"transpose", "scale", "reshape", "add", "relu"});
  CHECK(model.graph->is_initializer(model.graph->find_value("two")));
}


// y = If(rate == 16000) then x * k else x + k, k read by both branches from the outer graph;
// the then-branch also hands its Constant `c` to a nested If that reads it by name. With
// `rate` an input the If stays; with `rate` a constant the taken branch replaces it.
Model branching_model(bool rate_is_constant) {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({2, 3});
  g.inputs = {x};
  Value* rate = g.get_or_create_value("rate");
  if (rate_is_constant) {
    g.set_initializer(rate, Tensor::scalar<int64_t>(16000));
  } else {
    ValueType t;
    t.dtype = DType::Int64;
    t.shape = std::vector<Dim>{};
    rate->type = t;
    g.inputs.push_back(rate);
  }
  Value* expected = g.get_or_create_value("expected");
  g.set_initializer(expected, Tensor::scalar<int64_t>(16000));
  Value* k = g.get_or_create_value("k");
  g.set_initializer(k, Tensor::scalar<float>(3.0f));
  Value* cond = g.get_or_create_value("cond");
  g.add_node("Equal", {rate, expected}, {cond}, "is_16k");

  auto then_branch = std::make_shared<Graph>();
  {
    Graph& b = *then_branch;
    Value* bx = b.get_or_create_value("x");
    Value* bk = b.get_or_create_value("k");
    Value* scaled = b.get_or_create_value("scaled");
    b.add_node("Mul", {bx, bk}, {scaled}, "scale");
    Value* c = b.get_or_create_value("c");
    b.add_node("Constant", {}, {c}, "c")->set_attribute(Attribute::make_tensor("value", Tensor::scalar<float>(0.5f)));
    Value* always = b.get_or_create_value("always");
    b.set_initializer(always, Tensor::scalar<bool>(true));
    // A nested If whose branches read `c` and `scaled` by name only.
    auto add_c = std::make_shared<Graph>();
    Value* inner = add_c->get_or_create_value("inner");
    add_c->add_node("Add", {add_c->get_or_create_value("scaled"), add_c->get_or_create_value("c")}, {inner}, "add_c");
    add_c->outputs = {inner};
    auto keep = std::make_shared<Graph>();
    Value* kept = keep->get_or_create_value("kept");
    keep->add_node("Identity", {keep->get_or_create_value("scaled")}, {kept}, "keep");
    keep->outputs = {kept};
    Value* by = b.get_or_create_value("by");
    Node* nested = b.add_node("If", {always}, {by}, "nested");
    nested->set_attribute(Attribute::make_graph("then_branch", add_c));
    nested->set_attribute(Attribute::make_graph("else_branch", keep));
    b.outputs = {by};
  }
  auto else_branch = std::make_shared<Graph>();
  {
    Graph& b = *else_branch;
    Value* sum = b.get_or_create_value("sum");
    b.add_node("Add", {b.get_or_create_value("x"), b.get_or_create_value("k")}, {sum}, "shift");
    b.outputs = {sum};
  }
  Value* y = g.get_or_create_value("y");
  Node* branch = g.add_node("If", {cond}, {y}, "by_rate");
  branch->set_attribute(Attribute::make_graph("then_branch", then_branch));
  branch->set_attribute(Attribute::make_graph("else_branch", else_branch));
  Value* r = g.get_or_create_value("r");
  g.add_node("Relu", {y}, {r}, "relu");
  g.outputs = {r};
  return model;
}

TEST_CASE("constant-folding: an If on a constant condition is replaced by the branch it takes") {
  Model runtime_rate = branching_model(false);
  ConstantFolding pass;
  auto untouched = pass.run(runtime_rate);
  REQUIRE(untouched.has_value());
  CHECK(untouched->counters.at("if-inlined") == 0);
  CHECK(node_names(*runtime_rate.graph) == std::vector<std::string>{"is_16k", "by_rate", "relu"});

  Model model = branching_model(true);
  auto result = pass.run(model);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  // The outer If, then the nested one (its condition is a branch initializer), both inlined;
  // Equal folded, and the nested branch's Constant `c` folded to an initializer it reads.
  CHECK(result->counters.at("if-inlined") == 2);
  CHECK(node_names(*model.graph) ==
        std::vector<std::string>{"scale", "add_c", "nested/output_0", "by_rate/output_0", "relu"});
  CHECK(model.graph->validate().is_ok());
  const Tensor x = random_tensor({2, 3}, 5, -2.0f, 2.0f);
  const auto outputs = run_model(model, {{"x", x}});
  for (std::size_t i = 0; i < 6; ++i)
    CHECK(outputs.at("r").span<float>()[i] == std::max(0.0f, x.span<float>()[i] * 3.0f + 0.5f));
}

TEST_CASE("constant-folding: component metadata and options") {
  const ComponentInfo info = ConstantFolding::info();
  CHECK(info.kind == ComponentKind::Pass);
  CHECK(info.name == "constant-folding");
  REQUIRE(info.options.size() == 1);
  CHECK(info.options[0].name == "max-bytes");
  CHECK(std::get<int64_t>(info.options[0].default_value) == int64_t{64} << 20);
  Options bad;
  bad.set("max-bytes", int64_t{-1});
  CHECK_FALSE(ConstantFolding::create(bad).has_value());
}

}  // namespace
}  // namespace qflow
