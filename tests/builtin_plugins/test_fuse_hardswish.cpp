// Tests of the fuse-hardswish pass: HardSwish from opset 14, HardSigmoid + Mul below, untouched non-matches.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/fuse_hardswish.h"

namespace qflow {
namespace {

using namespace pass_test;

// Paddle's spelling: z = Relu(x0); Div(Mul(z, Clip(Add(z, 3), 0, 6)), 6) -> Neg.
// `scale_first` moves the division onto the gate: Mul(Div(Clip, 6), z).
Model paddle_model(int64_t opset, bool scale_first = false) {
  Model model = empty_model(opset, {2, 3, 4});
  Graph& g = *model.graph;
  Value* z = op(g, "Relu", {g.find_value("x")}, "z");
  Value* lin = op(g, "Add", {z, constant(g, "three", 3.0f)}, "lin");
  Value* clip;
  if (opset >= 11) {
    clip = op(g, "Clip", {lin, constant(g, "zero", 0.0f), constant(g, "six", 6.0f)}, "clip");
  } else {
    clip = op(g, "Clip", {lin}, "clip");
    clip->producer()->set_attribute(Attribute::make_float("min", 0.0f));
    clip->producer()->set_attribute(Attribute::make_float("max", 6.0f));
  }
  Value* hs;
  if (scale_first) {
    Value* gate = op(g, "Div", {clip, initializer(g, "div6", {1}, {6.0f})}, "gate");
    hs = op(g, "Mul", {gate, z}, "hs");
  } else {
    Value* prod = op(g, "Mul", {z, clip}, "prod");
    hs = op(g, "Div", {prod, initializer(g, "div6", {}, {6.0f})}, "hs");
  }
  set_output(g, op(g, "Neg", {hs}, "y"), {2, 3, 4});
  return model;
}

// Mul(x, HardSigmoid(x)) with the given alpha.
Model hardsigmoid_mul_model(int64_t opset, float alpha) {
  Model model = empty_model(opset, {2, 3, 4});
  Graph& g = *model.graph;
  Value* x = g.find_value("x");
  Value* gate = op(g, "HardSigmoid", {x}, "gate");
  gate->producer()->set_attribute(Attribute::make_float("alpha", alpha));
  gate->producer()->set_attribute(Attribute::make_float("beta", 0.5f));
  set_output(g, op(g, "Mul", {x, gate}, "y"), {2, 3, 4});
  return model;
}

TEST_CASE("fuse-hardswish: opset 14 Paddle spelling becomes one HardSwish") {
  for (const bool scale_first : {false, true}) {
    CAPTURE(scale_first);
    Model model = paddle_model(14, scale_first);
    FuseHardSwish pass;
    auto result = pass.run(model);
    REQUIRE(result.has_value());
    CHECK(result->changed);
    CHECK(result->counters.at("fused") == 1);
    CHECK(result->counters.at("fused-hardswish") == 1);
    CHECK(result->counters.at("fused-hardsigmoid-mul") == 0);
    const Graph& g = *model.graph;
    CHECK(op_types(g) == std::vector<std::string>{"Relu", "HardSwish", "Neg"});
    const Node* hs = find_op(g, "HardSwish");
    REQUIRE(hs != nullptr);
    CHECK(hs->input(0) == g.find_value("z"));
    CHECK(hs->output(0) == g.find_value("hs"));
    CHECK(g.initializer_order().empty());
    CHECK(g.validate().is_ok());
  }
}

TEST_CASE("fuse-hardswish: below opset 14 it becomes HardSigmoid(1/6, 0.5) + Mul") {
  for (const int64_t opset : {9, 11, 13}) {
    CAPTURE(opset);
    Model model = paddle_model(opset);
    FuseHardSwish pass;
    auto result = pass.run(model);
    REQUIRE(result.has_value());
    CHECK(result->counters.at("fused") == 1);
    CHECK(result->counters.at("fused-hardswish") == 0);
    CHECK(result->counters.at("fused-hardsigmoid-mul") == 1);
    const Graph& g = *model.graph;
    CHECK(op_types(g) == std::vector<std::string>{"Relu", "HardSigmoid", "Mul", "Neg"});
    const Node* gate = find_op(g, "HardSigmoid");
    const Node* mul = find_op(g, "Mul");
    REQUIRE(gate != nullptr);
    REQUIRE(mul != nullptr);
    CHECK(gate->input(0) == g.find_value("z"));
    CHECK(gate->attr_float("alpha", 0.0f) == doctest::Approx(1.0f / 6.0f));
    CHECK(gate->attr_float("beta", 0.0f) == doctest::Approx(0.5f));
    CHECK(mul->input(0) == g.find_value("z"));
    CHECK(mul->input(1) == gate->output(0));
    CHECK(g.validate().is_ok());
  }
}

TEST_CASE("fuse-hardswish: x * HardSigmoid(x) becomes HardSwish only when it is one") {
  Model model = hardsigmoid_mul_model(14, 1.0f / 6.0f);
  auto result = FuseHardSwish().run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("fused-hardswish") == 1);
  CHECK(op_types(*model.graph) == std::vector<std::string>{"HardSwish"});
}

TEST_CASE("fuse-hardswish: graphs it does not apply to are unchanged") {
  SUBCASE("already HardSigmoid + Mul below opset 14") {
    Model model = hardsigmoid_mul_model(11, 1.0f / 6.0f);
    auto result = FuseHardSwish().run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(result->counters.at("fused") == 0);
    CHECK(op_types(*model.graph) == std::vector<std::string>{"HardSigmoid", "Mul"});
  }
  SUBCASE("HardSigmoid with alpha 0.2 at opset 14 is not HardSwish") {
    Model model = hardsigmoid_mul_model(14, 0.2f);
    auto result = FuseHardSwish().run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(op_types(*model.graph) == std::vector<std::string>{"HardSigmoid", "Mul"});
  }
  SUBCASE("the clipped gate is also read elsewhere") {
    Model model = paddle_model(14);
    Graph& g = *model.graph;
    g.outputs.push_back(op(g, "Neg", {g.find_value("clip")}, "leak"));
    const auto before = op_types(g);
    auto result = FuseHardSwish().run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(op_types(g) == before);
  }
}

TEST_CASE("fuse-hardswish: outputs match the unfused graph (max abs diff <= 1e-5)") {
  for (const int64_t opset : {11, 14}) {
    for (const bool scale_first : {false, true}) {
      CAPTURE(opset);
      CAPTURE(scale_first);
      const Tensor x = random_tensor({2, 3, 4}, 1234, -5.0f, 5.0f);
      Model fused = paddle_model(opset, scale_first);
      auto result = FuseHardSwish().run(fused);
      REQUIRE(result.has_value());
      REQUIRE(result->counters.at("fused") == 1);
      const Tensor reference = run_model(paddle_model(opset, scale_first), x);
      CHECK(max_abs_difference(reference, run_model(fused, x)) <= 1e-5f);
    }
  }
}

TEST_CASE("fuse-hardswish: component metadata") {
  CHECK(FuseHardSwish::info().name == "fuse-hardswish");
  CHECK(FuseHardSwish::create(Options{}).has_value());
}

}  // namespace
}  // namespace qflow
