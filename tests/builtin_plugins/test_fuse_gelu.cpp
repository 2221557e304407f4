// Tests of the fuse-gelu pass and the com.microsoft Gelu kernel it relies on.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/fuse_gelu.h"

namespace qflow {
namespace {

using namespace pass_test;

// Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt2)), 1)) -> Neg.
Model half_first_model(float divisor = 1.4142135f) {
  Model model = empty_model(13, {4, 6});
  Graph& g = *model.graph;
  Value* x = g.find_value("x");
  Value* t = op(g, "Div", {x, initializer(g, "sqrt2", {}, {divisor})}, "t");
  Value* one_plus = op(g, "Add", {op(g, "Erf", {t}, "erf"), constant(g, "one", 1.0f)}, "one_plus");
  Value* half_x = op(g, "Mul", {x, constant(g, "half", 0.5f)}, "half_x");
  set_output(g, op(g, "Neg", {op(g, "Mul", {half_x, one_plus}, "gelu")}, "y"), {4, 6});
  return model;
}

// The other grouping: Mul(x, Mul(0.5, Add(1, Erf(Mul(0.70710678, x))))).
Model half_last_model() {
  Model model = empty_model(11, {4, 6});
  Graph& g = *model.graph;
  Value* x = g.find_value("x");
  Value* t = op(g, "Mul", {initializer(g, "inv_sqrt2", {1}, {0.70710678f}), x}, "t");
  Value* one_plus = op(g, "Add", {constant(g, "one", 1.0f), op(g, "Erf", {t}, "erf")}, "one_plus");
  Value* gate = op(g, "Mul", {constant(g, "half", 0.5f), one_plus}, "gate");
  set_output(g, op(g, "Mul", {x, gate}, "y"), {4, 6});
  return model;
}

TEST_CASE("fuse-gelu: (x * 0.5) * (1 + erf(x / sqrt2)) becomes com.microsoft Gelu") {
  Model model = half_first_model();
  auto result = FuseGelu().run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("fused") == 1);
  const Graph& g = *model.graph;
  CHECK(op_types(g) == std::vector<std::string>{"Gelu", "Neg"});
  const Node* gelu = find_op(g, "Gelu");
  REQUIRE(gelu != nullptr);
  CHECK(gelu->domain() == "com.microsoft");
  REQUIRE(gelu->inputs().size() == 1);
  CHECK(gelu->input(0) == g.find_value("x"));
  CHECK(g.initializer_order().empty());
  CHECK(model.opset("com.microsoft") == 1);
  CHECK(model.opset() == 13);
  CHECK(g.validate().is_ok());
}

TEST_CASE("fuse-gelu: x * (0.5 * (1 + erf(x * 0.70710678))) becomes Gelu too") {
  Model model = half_last_model();
  auto result = FuseGelu().run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("fused") == 1);
  CHECK(op_types(*model.graph) == std::vector<std::string>{"Gelu"});
  CHECK(model.graph->outputs[0]->producer()->op_type() == "Gelu");
}

TEST_CASE("fuse-gelu: graphs it does not apply to are unchanged") {
  SUBCASE("erf argument scaled by 2, not sqrt 2") {
    Model model = half_first_model(2.0f);
    const auto before = op_types(*model.graph);
    auto result = FuseGelu().run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(result->counters.at("fused") == 0);
    CHECK(op_types(*model.graph) == before);
    CHECK(model.opset("com.microsoft") == 0);
  }
  SUBCASE("the erf output is also read elsewhere") {
    Model model = half_first_model();
    Graph& g = *model.graph;
    g.outputs.push_back(op(g, "Neg", {g.find_value("erf")}, "leak"));
    const auto before = op_types(g);
    auto result = FuseGelu().run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(op_types(g) == before);
  }
}

TEST_CASE("fuse-gelu: outputs match the unfused graph (max abs diff <= 1e-5)") {
  const Tensor x = random_tensor({4, 6}, 2024, -4.0f, 4.0f);
  Model fused1 = half_first_model();
  REQUIRE(FuseGelu().run(fused1).has_value());
  REQUIRE(find_op(*fused1.graph, "Gelu") != nullptr);
  CHECK(max_abs_difference(run_model(half_first_model(), x), run_model(fused1, x)) <= 1e-5f);
  Model fused2 = half_last_model();
  REQUIRE(FuseGelu().run(fused2).has_value());
  REQUIRE(find_op(*fused2.graph, "Gelu") != nullptr);
  CHECK(max_abs_difference(run_model(half_last_model(), x), run_model(fused2, x)) <= 1e-5f);
}

TEST_CASE("fuse-gelu: the interpreter's com.microsoft Gelu kernel computes 0.5x(1+erf(x/sqrt2))") {
  Model model = empty_model(13, {5});
  model.opset_imports.push_back({"com.microsoft", 1});
  Graph& g = *model.graph;
  Value* y = g.get_or_create_value("y");
  g.add_node("Gelu", {g.find_value("x")}, {y}, "gelu", "com.microsoft");
  set_output(g, y, {5});
  const Tensor out = run_model(model, Tensor::from_vector<float>({5}, {-3.0f, -1.0f, 0.0f, 1.0f, 2.5f}));
  const std::vector<float> expected = {-0.00404969f, -0.15865525f, 0.0f, 0.84134475f, 2.48447352f};
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(out.data<float>()[i] == doctest::Approx(expected[i]).epsilon(1e-6));
}

TEST_CASE("fuse-gelu: component metadata") {
  CHECK(FuseGelu::info().name == "fuse-gelu");
  CHECK(FuseGelu::create(Options{}).has_value());
}

}  // namespace
}  // namespace qflow
