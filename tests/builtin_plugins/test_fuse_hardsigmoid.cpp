// Tests of the fuse-hardsigmoid pass: the spellings it fuses, what it leaves alone, equal outputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/fuse_hardsigmoid.h"

namespace qflow {
namespace {

using namespace pass_test;

// Clip(Add(b, Mul(x, a)), 0, 1) -> Relu, constants split between initializers and Constant
// nodes, operands in swapped order, Clip bounds as inputs (opset 13).
Model affine_clip_model() {
  Model model = empty_model(13, {2, 5});
  Graph& g = *model.graph;
  Value* x = g.find_value("x");
  Value* ax = op(g, "Mul", {initializer(g, "a", {1}, {0.2f}), x}, "ax");
  Value* lin = op(g, "Add", {constant(g, "b", 0.5f), ax}, "lin");
  Value* hs = op(g, "Clip", {lin, constant(g, "lo", 0.0f), initializer(g, "hi", {}, {1.0f})}, "clip");
  set_output(g, op(g, "Relu", {hs}, "y"), {2, 5});
  return model;
}

// Clip(Add(x, 3), 0, 6) * (1/6), Clip bounds as attributes (opset 9).
Model relu6_model(float divisor_or_factor, bool use_div) {
  Model model = empty_model(9, {3, 4});
  Graph& g = *model.graph;
  Value* x = g.find_value("x");
  Value* lin = op(g, "Add", {x, constant(g, "three", 3.0f)}, "lin");
  Value* clip = op(g, "Clip", {lin}, "clip");
  Node* clip_node = clip->producer();
  clip_node->set_attribute(Attribute::make_float("min", 0.0f));
  clip_node->set_attribute(Attribute::make_float("max", 6.0f));
  Value* scale = constant(g, "scale", divisor_or_factor);
  Value* y = use_div ? op(g, "Div", {clip, scale}, "y") : op(g, "Mul", {scale, clip}, "y");
  set_output(g, y, {3, 4});
  return model;
}

TEST_CASE("fuse-hardsigmoid: Clip(a*x+b, 0, 1) becomes HardSigmoid(a, b)") {
  Model model = affine_clip_model();
  FuseHardSigmoid pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("fused") == 1);
  const Graph& g = *model.graph;
  CHECK(op_types(g) == std::vector<std::string>{"HardSigmoid", "Relu"});
  const Node* hs = find_op(g, "HardSigmoid");
  REQUIRE(hs != nullptr);
  CHECK(hs->input(0) == g.find_value("x"));
  CHECK(hs->attr_float("alpha", 0.0f) == doctest::Approx(0.2f));
  CHECK(hs->attr_float("beta", 0.0f) == doctest::Approx(0.5f));
  CHECK(g.initializer_order().empty());  // a and hi were private to the pattern
  CHECK(g.validate().is_ok());
}

TEST_CASE("fuse-hardsigmoid: Relu6-style Clip(x+3, 0, 6) / 6 and * (1/6) give alpha 1/6, beta 0.5") {
  for (const bool use_div : {true, false}) {
    CAPTURE(use_div);
    Model model = relu6_model(use_div ? 6.0f : 1.0f / 6.0f, use_div);
    FuseHardSigmoid pass;
    auto result = pass.run(model);
    REQUIRE(result.has_value());
    CHECK(result->counters.at("fused") == 1);
    const Graph& g = *model.graph;
    CHECK(op_types(g) == std::vector<std::string>{"HardSigmoid"});
    const Node* hs = find_op(g, "HardSigmoid");
    REQUIRE(hs != nullptr);
    CHECK(hs->output(0) == g.outputs[0]);
    CHECK(hs->attr_float("alpha", 0.0f) == doctest::Approx(1.0f / 6.0f));
    CHECK(hs->attr_float("beta", 0.0f) == doctest::Approx(0.5f));
    CHECK(g.validate().is_ok());
  }
}

TEST_CASE("fuse-hardsigmoid: graphs it does not apply to are unchanged") {
  SUBCASE("scale does not map the clip range to [0, 1]") {
    Model model = relu6_model(5.0f, true);
    const auto before = op_types(*model.graph);
    FuseHardSigmoid pass;
    auto result = pass.run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(result->counters.at("fused") == 0);
    CHECK(op_types(*model.graph) == before);
  }
  SUBCASE("an intermediate value has a user outside the pattern") {
    Model model = affine_clip_model();
    Graph& g = *model.graph;
    Value* extra = op(g, "Neg", {g.find_value("lin")}, "extra");
    g.outputs.push_back(extra);
    const auto before = op_types(g);
    FuseHardSigmoid pass;
    auto result = pass.run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(op_types(g) == before);
  }
}

TEST_CASE("fuse-hardsigmoid: outputs match the unfused graph (max abs diff <= 1e-6)") {
  const Tensor x1 = random_tensor({2, 5}, 7, -8.0f, 8.0f);
  Model fused1 = affine_clip_model();
  REQUIRE(FuseHardSigmoid().run(fused1).has_value());
  REQUIRE(find_op(*fused1.graph, "HardSigmoid") != nullptr);
  CHECK(max_abs_difference(run_model(affine_clip_model(), x1), run_model(fused1, x1)) <= 1e-6f);

  const Tensor x2 = random_tensor({3, 4}, 11, -8.0f, 8.0f);
  Model fused2 = relu6_model(6.0f, true);
  REQUIRE(FuseHardSigmoid().run(fused2).has_value());
  REQUIRE(find_op(*fused2.graph, "HardSigmoid") != nullptr);
  const Tensor reference = run_model(relu6_model(6.0f, true), x2);
  CHECK(max_abs_difference(reference, run_model(fused2, x2)) <= 1e-6f);
  // The inputs span both saturated ends and the linear part.
  CHECK(*std::min_element(reference.span<float>().begin(), reference.span<float>().end()) == 0.0f);
  CHECK(*std::max_element(reference.span<float>().begin(), reference.span<float>().end()) == 1.0f);
}

TEST_CASE("fuse-hardsigmoid: component metadata") {
  CHECK(FuseHardSigmoid::info().name == "fuse-hardsigmoid");
  CHECK(FuseHardSigmoid::create(Options{}).has_value());
}

}  // namespace
}  // namespace qflow
