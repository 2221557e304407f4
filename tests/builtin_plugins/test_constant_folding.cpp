// Tests of the constant-folding pass: structure before/after, untouched graphs, numerical equivalence.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "framework/runtime/executor.h"
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
