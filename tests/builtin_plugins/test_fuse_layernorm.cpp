// Tests of the fuse-layernorm pass: LayerNormalization from opset 17, counted skips below, equal outputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/fuse_layernorm.h"

namespace qflow {
namespace {

using namespace pass_test;

Value* reduce_mean(Graph& g, Value* in, const std::vector<int64_t>& axes, const std::string& out) {
  Value* v = op(g, "ReduceMean", {in}, out);
  v->producer()->set_attribute(Attribute::make_ints("axes", axes));
  return v;
}

// Paddle's spelling over the last axis of x [2, 3, 8], gamma as a Constant node, beta as an
// initializer, followed by Relu. `square_by_mul` spells the square Mul(d, d) instead of Pow.
Model layer_norm_model(int64_t opset, bool square_by_mul = false, bool affine = true) {
  Model model = empty_model(opset, {2, 3, 8});
  Graph& g = *model.graph;
  Value* x = g.find_value("x");
  Value* mean = reduce_mean(g, x, {-1}, "mean");
  Value* d = op(g, "Sub", {x, mean}, "d");
  Value* sq = square_by_mul ? op(g, "Mul", {d, d}, "sq") : op(g, "Pow", {d, constant(g, "two", 2.0f)}, "sq");
  Value* var = reduce_mean(g, sq, {-1}, "var");
  Value* var_eps = op(g, "Add", {var, initializer(g, "eps", {}, {1e-5f})}, "var_eps");
  Value* norm = op(g, "Div", {d, op(g, "Sqrt", {var_eps}, "std")}, "norm");
  Value* out = norm;
  if (affine) {
    std::vector<float> gamma, beta;
    for (int i = 0; i < 8; ++i) {
      gamma.push_back(0.5f + 0.125f * static_cast<float>(i));
      beta.push_back(-0.25f + 0.0625f * static_cast<float>(i));
    }
    Value* gv = g.get_or_create_value("gamma");
    g.add_node("Constant", {}, {gv}, "gamma_node")
        ->set_attribute(Attribute::make_tensor("value", Tensor::from_vector<float>({8}, gamma)));
    Value* scaled = op(g, "Mul", {gv, norm}, "scaled");
    out = op(g, "Add", {scaled, initializer(g, "beta", {8}, beta)}, "shifted");
  }
  set_output(g, op(g, "Relu", {out}, "y"), {2, 3, 8});
  return model;
}

// Normalization over the last two axes with positive axes [1, 2] and no affine tail.
Model two_axis_model() {
  Model model = empty_model(17, {2, 3, 8});
  Graph& g = *model.graph;
  Value* x = g.find_value("x");
  Value* d = op(g, "Sub", {x, reduce_mean(g, x, {1, 2}, "mean")}, "d");
  Value* var = reduce_mean(g, op(g, "Mul", {d, d}, "sq"), {2, 1}, "var");
  Value* std_dev = op(g, "Sqrt", {op(g, "Add", {constant(g, "eps", 1e-6f), var}, "var_eps")}, "std");
  set_output(g, op(g, "Div", {d, std_dev}, "y"), {2, 3, 8});
  return model;
}

TEST_CASE("fuse-layernorm: opset 17 pattern with gamma and beta becomes LayerNormalization") {
  for (const bool square_by_mul : {false, true}) {
    CAPTURE(square_by_mul);
    Model model = layer_norm_model(17, square_by_mul);
    auto result = FuseLayerNorm().run(model);
    REQUIRE(result.has_value());
    CHECK(result->changed);
    CHECK(result->counters.at("fused") == 1);
    CHECK(result->counters.at("skipped-opset-below-17") == 0);
    const Graph& g = *model.graph;
    CHECK(op_types(g) == std::vector<std::string>{"LayerNormalization", "Relu"});
    const Node* ln = find_op(g, "LayerNormalization");
    REQUIRE(ln != nullptr);
    REQUIRE(ln->inputs().size() == 3);
    CHECK(ln->input(0) == g.find_value("x"));
    CHECK(ln->output(0) == g.find_value("shifted"));
    CHECK(ln->attr_int("axis", 0) == -1);
    CHECK(ln->attr_float("epsilon", 0.0f) == doctest::Approx(1e-5f));
    const Tensor* scale = g.initializer(ln->input(1));
    REQUIRE(scale != nullptr);
    CHECK(scale->shape() == Shape{8});
    CHECK(scale->data<float>()[1] == 0.625f);
    // eps and beta were private to the pattern and are replaced by the node's own parameters.
    CHECK(g.initializer_order().size() == 2);
    CHECK(g.validate().is_ok());
  }
}

TEST_CASE("fuse-layernorm: two trailing axes without gamma/beta get a ones scale") {
  Model model = two_axis_model();
  auto result = FuseLayerNorm().run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("fused") == 1);
  const Graph& g = *model.graph;
  CHECK(op_types(g) == std::vector<std::string>{"LayerNormalization"});
  const Node* ln = find_op(g, "LayerNormalization");
  REQUIRE(ln != nullptr);
  CHECK(ln->attr_int("axis", 0) == -2);
  REQUIRE(ln->inputs().size() == 2);
  const Tensor* scale = g.initializer(ln->input(1));
  REQUIRE(scale != nullptr);
  CHECK(scale->shape() == Shape{3, 8});
}

TEST_CASE("fuse-layernorm: below opset 17 the match is counted and the graph left alone") {
  Model model = layer_norm_model(11);
  const auto before = op_types(*model.graph);
  auto result = FuseLayerNorm().run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
  CHECK(result->counters.at("fused") == 0);
  CHECK(result->counters.at("skipped-opset-below-17") == 1);
  CHECK(op_types(*model.graph) == before);
  CHECK(model.opset() == 11);
}

TEST_CASE("fuse-layernorm: graphs it does not apply to are unchanged") {
  SUBCASE("the mean is also read elsewhere") {
    Model model = layer_norm_model(17);
    Graph& g = *model.graph;
    g.outputs.push_back(op(g, "Neg", {g.find_value("mean")}, "leak"));
    const auto before = op_types(g);
    auto result = FuseLayerNorm().run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(result->counters.at("fused") == 0);
    CHECK(op_types(g) == before);
  }
  SUBCASE("reduction over a leading axis") {
    Model model = layer_norm_model(17);
    Graph& g = *model.graph;
    for (const char* name : {"mean", "var"})
      g.find_value(name)->producer()->set_attribute(Attribute::make_ints("axes", {1}));
    const auto before = op_types(g);
    auto result = FuseLayerNorm().run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(op_types(g) == before);
  }
}

TEST_CASE("fuse-layernorm: outputs match the unfused graph (max abs diff <= 1e-5)") {
  const Tensor x = random_tensor({2, 3, 8}, 99, -3.0f, 3.0f);
  for (const bool square_by_mul : {false, true}) {
    CAPTURE(square_by_mul);
    Model fused = layer_norm_model(17, square_by_mul);
    REQUIRE(FuseLayerNorm().run(fused).has_value());
    REQUIRE(find_op(*fused.graph, "LayerNormalization") != nullptr);
    CHECK(max_abs_difference(run_model(layer_norm_model(17, square_by_mul), x), run_model(fused, x)) <= 1e-5f);
  }
  Model fused = two_axis_model();
  REQUIRE(FuseLayerNorm().run(fused).has_value());
  REQUIRE(find_op(*fused.graph, "LayerNormalization") != nullptr);
  const Tensor reference = run_model(two_axis_model(), x);
  CHECK(max_abs_difference(reference, run_model(fused, x)) <= 1e-5f);
  CHECK(std::fabs(reference.data<float>()[0]) > 1e-3f);  // the graph computed something
}

TEST_CASE("fuse-layernorm: component metadata") {
  CHECK(FuseLayerNorm::info().name == "fuse-layernorm");
  CHECK(FuseLayerNorm::create(Options{}).has_value());
}

}  // namespace
}  // namespace qflow
