// Tests of the fuse-hardsigmoid pass: the spellings it fuses, what it leaves alone, equal outputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "framework/runtime/executor.h"
#include "plugins/passes/fuse_hardsigmoid.h"

namespace qflow {
namespace {

ValueType float_type(const Shape& shape) {
  ValueType t;
  t.dtype = DType::Float32;
  std::vector<Dim> dims;
  for (int64_t d : shape) dims.push_back(Dim{d, "", ""});
  t.shape = dims;
  return t;
}

Model empty_model(int64_t opset, const Shape& x_shape) {
  Model model;
  model.opset_imports = {{"", opset}};
  Value* x = model.graph->get_or_create_value("x");
  x->type = float_type(x_shape);
  model.graph->inputs = {x};
  return model;
}

Value* initializer(Graph& g, const std::string& name, const Shape& shape, const std::vector<float>& values) {
  Value* v = g.get_or_create_value(name);
  g.set_initializer(v, Tensor::from_vector<float>(shape, values));
  return v;
}

// A Constant node holding a scalar, the way exporters often spell constants.
Value* constant(Graph& g, const std::string& name, float value) {
  Value* v = g.get_or_create_value(name);
  Node* n = g.add_node("Constant", {}, {v}, name + "_node");
  n->set_attribute(Attribute::make_tensor("value", Tensor::scalar<float>(value)));
  return v;
}

Value* op(Graph& g, const std::string& op_type, const std::vector<Value*>& inputs, const std::string& out) {
  Value* v = g.get_or_create_value(out);
  g.add_node(op_type, inputs, {v}, out);
  return v;
}

void set_output(Graph& g, Value* y, const Shape& shape) {
  y->type = float_type(shape);
  g.outputs = {y};
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type());
  return ops;
}

const Node* find_op(const Graph& g, const std::string& op_type) {
  for (const auto& n : g.nodes())
    if (n->op_type() == op_type) return n.get();
  return nullptr;
}

Tensor random_input(const Shape& shape, float low, float high, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_vector<float>(shape, values);
}

Tensor run_model(const Model& model, const Tensor& x) {
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = executor.value()->run({{"x", x}});
  REQUIRE(outputs.has_value());
  REQUIRE(outputs->size() == 1);
  return outputs->begin()->second;
}

float max_abs_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  float worst = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(a.data<float>()[i] - b.data<float>()[i]));
  return worst;
}

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
  const Tensor x1 = random_input({2, 5}, -8.0f, 8.0f, 7);
  Model fused1 = affine_clip_model();
  REQUIRE(FuseHardSigmoid().run(fused1).has_value());
  REQUIRE(find_op(*fused1.graph, "HardSigmoid") != nullptr);
  CHECK(max_abs_difference(run_model(affine_clip_model(), x1), run_model(fused1, x1)) <= 1e-6f);

  const Tensor x2 = random_input({3, 4}, -8.0f, 8.0f, 11);
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
