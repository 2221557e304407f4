// Tests of the float16-to-float32 pass: every place a half-precision dtype can sit, subgraphs,
// and the model computing the same function in float32.
#include <doctest/doctest.h>

#include <string>

#include "plugins/passes/eliminate_identity.h"
#include "plugins/passes/float16_to_float32.h"
#include "tests/builtin_plugins/pass_test_graphs.h"

namespace qflow {
namespace {

using namespace pass_test;

ValueType typed(DType dtype, const Shape& shape) {
  ValueType t = float_type(shape);
  t.dtype = dtype;
  return t;
}

Tensor half_tensor(const Tensor& values) { return values.cast(DType::Float16); }

// A half-precision export: x (float) -> Cast(float16) -> Conv(w, b float16) -> Relu
//   -> Mul(Constant float16) -> If(flag initializer: then Add(branch float16 initializer),
//   else Identity) -> Cast(float) -> y; every intermediate value declared float16.
Model half_model() {
  Model model = empty_model(17, {1, 2, 4, 4});
  Graph& g = *model.graph;
  auto half = [&g](const std::string& name, const Shape& shape) {
    Value* v = g.get_or_create_value(name);
    v->type = typed(DType::Float16, shape);
    return v;
  };
  const Shape image = {1, 3, 4, 4};
  Value* w = g.get_or_create_value("w");
  g.set_initializer(w, half_tensor(random_tensor({3, 2, 3, 3}, 1)));
  Value* b = g.get_or_create_value("b");
  g.set_initializer(b, half_tensor(random_tensor({3}, 2)));
  g.add_node("Cast", {g.find_value("x")}, {half("xh", {1, 2, 4, 4})}, "to_half")
      ->set_attribute(Attribute::make_int("to", static_cast<int64_t>(DType::Float16)));
  Node* conv = g.add_node("Conv", {g.find_value("xh"), w, b}, {half("conv", image)}, "conv");
  conv->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  g.add_node("Relu", {g.find_value("conv")}, {half("relu", image)}, "relu");
  g.add_node("Constant", {}, {half("k", {})}, "k")
      ->set_attribute(Attribute::make_tensor("value", half_tensor(Tensor::scalar<float>(0.75f))));
  g.add_node("Mul", {g.find_value("relu"), g.find_value("k")}, {half("scaled", image)}, "mul");

  auto then_branch = std::make_shared<Graph>();
  then_branch->name = "then";
  Value* offset = then_branch->get_or_create_value("offset");
  then_branch->set_initializer(offset, half_tensor(Tensor::scalar<float>(0.5f)));
  Value* then_out = then_branch->get_or_create_value("then_out");
  then_out->type = typed(DType::Float16, image);
  then_branch->add_node("Add", {then_branch->get_or_create_value("scaled"), offset}, {then_out}, "add_offset");
  then_branch->outputs = {then_out};
  auto else_branch = std::make_shared<Graph>();
  else_branch->name = "else";
  Value* else_out = else_branch->get_or_create_value("else_out");
  else_out->type = typed(DType::Float16, image);
  else_branch->add_node("Identity", {else_branch->get_or_create_value("scaled")}, {else_out}, "pass");
  else_branch->outputs = {else_out};
  Value* flag = g.get_or_create_value("flag");
  g.set_initializer(flag, Tensor::scalar<bool>(true));
  Node* branch = g.add_node("If", {flag}, {half("branched", image)}, "if");
  branch->set_attribute(Attribute::make_graph("then_branch", then_branch));
  branch->set_attribute(Attribute::make_graph("else_branch", else_branch));

  Value* y = g.get_or_create_value("y");
  g.add_node("Cast", {g.find_value("branched")}, {y}, "to_float")
      ->set_attribute(Attribute::make_int("to", static_cast<int64_t>(DType::Float32)));
  set_output(g, y, image);
  return model;
}

bool holds_half(const Graph& g) {
  for (const Value* v : g.initializer_order())
    if (g.initializer(v)->dtype() == DType::Float16) return true;
  for (const Value* v : g.values())
    if (v->type && v->type->dtype == DType::Float16) return true;
  for (const auto& node : g.nodes())
    for (const Attribute& a : node->attributes()) {
      if (a.type == AttributeType::Tensor && a.t.dtype() == DType::Float16) return true;
      if (a.name == "to" && a.i == static_cast<int64_t>(DType::Float16)) return true;
      if (a.g && holds_half(*a.g)) return true;
    }
  return false;
}

TEST_CASE("float16-to-float32: widens initializers, constants, casts and types, subgraphs included") {
  Model model = half_model();
  REQUIRE(holds_half(*model.graph));
  const Tensor x = random_tensor({1, 2, 4, 4}, 3);
  const Tensor before = run_model(model, x);

  Float16ToFloat32 pass;
  auto result = pass.run(model);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->changed);
  CHECK(result->counters.at("initializers-widened") == 3);  // w, b and the branch's offset
  CHECK(result->counters.at("constants-widened") == 1);
  CHECK(result->counters.at("casts-retargeted") == 1);
  CHECK(result->counters.at("values-retyped") == 8);  // xh conv relu k scaled branched, then_out, else_out
  CHECK_FALSE(holds_half(*model.graph));
  CHECK(model.graph->validate().is_ok());

  // The same function, without float16 rounding of the intermediate results.
  const Tensor after = run_model(model, x);
  CHECK(after.dtype() == DType::Float32);
  CHECK(max_abs_difference(before, after) < 0.02f);

  // The casts around the body now cast float32 to float32: eliminate-identity removes them.
  EliminateIdentity identity;
  auto removed = identity.run(model);
  REQUIRE(removed.has_value());
  CHECK(removed->counters.at("cast-removed") == 2);
  CHECK(find_op(*model.graph, "Cast") == nullptr);
  CHECK(max_abs_difference(after, run_model(model, x)) == 0.0f);

  // A second run finds nothing to do.
  auto again = pass.run(model);
  REQUIRE(again.has_value());
  CHECK_FALSE(again->changed);
}

TEST_CASE("float16-to-float32: a float32 model is left alone") {
  Model model = empty_model(17, {2, 3});
  Graph& g = *model.graph;
  Value* y = op(g, "Relu", {g.find_value("x")}, "y");
  set_output(g, y, {2, 3});
  Float16ToFloat32 pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
  CHECK(result->counters.empty());
}

}  // namespace
}  // namespace qflow
