// Tests of the fold-batchnorm pass: each fold target, the Mul + Add fallback, refusals and numerics.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/fold_batchnorm.h"

namespace qflow {
namespace {

using namespace pass_test;

// Folding reorders float rounding (x*W then *scale vs x*(W*scale)); sums here are short.
constexpr float kTolerance = 1e-4f;

Value* add_input(Graph& g, const std::string& name, const Shape& shape) {
  Value* v = g.get_or_create_value(name);
  v->type = float_type(shape);
  g.inputs.push_back(v);
  return v;
}

Value* add_constant(Graph& g, const std::string& name, Tensor t) {
  Value* v = g.get_or_create_value(name);
  g.set_initializer(v, std::move(t));
  return v;
}

// BatchNormalization over `x` with C channels and random statistics (variance positive).
Node* add_batch_norm(Graph& g, Value* x, Value* y, int64_t channels, uint32_t seed, const std::string& name = "bn") {
  Value* gamma = add_constant(g, name + "_gamma", random_tensor({channels}, seed, 0.5f, 2.0f));
  Value* beta = add_constant(g, name + "_beta", random_tensor({channels}, seed + 1));
  Value* mean = add_constant(g, name + "_mean", random_tensor({channels}, seed + 2));
  Value* var = add_constant(g, name + "_var", random_tensor({channels}, seed + 3, 0.1f, 3.0f));
  Node* bn = g.add_node("BatchNormalization", {x, gamma, beta, mean, var}, {y}, name);
  bn->set_attribute(Attribute::make_float("epsilon", 1e-3f));
  return bn;
}

Model empty_model() {
  Model model;
  model.opset_imports = {{"", 17}};
  return model;
}

// x[1,2,5,5] -> Conv(W[3,2,3,3], no bias, pad 1) -> c -> BN -> y
Model conv_bn() {
  Model model = empty_model();
  Graph& g = *model.graph;
  Value* x = add_input(g, "x", {1, 2, 5, 5});
  Value* w = add_constant(g, "W", random_tensor({3, 2, 3, 3}, 11));
  Value* c = g.get_or_create_value("c");
  Node* conv = g.add_node("Conv", {x, w}, {c}, "conv");
  conv->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  Value* y = g.get_or_create_value("y");
  add_batch_norm(g, c, y, 3, 20);
  y->type = float_type({1, 3, 5, 5});
  g.outputs = {y};
  return model;
}

// x[1,4,3,3] -> ConvTranspose(W[4,3,2,2], bias[6], group 2, stride 2) -> BN(6) -> y
Model conv_transpose_bn() {
  Model model = empty_model();
  Graph& g = *model.graph;
  Value* x = add_input(g, "x", {1, 4, 3, 3});
  Value* w = add_constant(g, "W", random_tensor({4, 3, 2, 2}, 12));
  Value* b = add_constant(g, "B", random_tensor({6}, 13));
  Value* c = g.get_or_create_value("c");
  Node* deconv = g.add_node("ConvTranspose", {x, w, b}, {c}, "deconv");
  deconv->set_attribute(Attribute::make_int("group", 2));
  deconv->set_attribute(Attribute::make_ints("strides", {2, 2}));
  Value* y = g.get_or_create_value("y");
  add_batch_norm(g, c, y, 6, 30);
  g.outputs = {y};
  return model;
}

// x[2,4] -> Gemm(B[3,4], C[3], transB, alpha 0.5, beta 2) -> BN(3) -> y
Model gemm_bn() {
  Model model = empty_model();
  Graph& g = *model.graph;
  Value* x = add_input(g, "x", {2, 4});
  Value* w = add_constant(g, "W", random_tensor({3, 4}, 14));
  Value* b = add_constant(g, "B", random_tensor({3}, 15));
  Value* c = g.get_or_create_value("c");
  Node* gemm = g.add_node("Gemm", {x, w, b}, {c}, "gemm");
  gemm->set_attribute(Attribute::make_int("transB", 1));
  gemm->set_attribute(Attribute::make_float("alpha", 0.5f));
  gemm->set_attribute(Attribute::make_float("beta", 2.0f));
  Value* y = g.get_or_create_value("y");
  add_batch_norm(g, c, y, 3, 40);
  g.outputs = {y};
  return model;
}

// x[2,4] -> MatMul(W[4,3]) -> BN(3) -> y
Model matmul_bn() {
  Model model = empty_model();
  Graph& g = *model.graph;
  Value* x = add_input(g, "x", {2, 4});
  Value* w = add_constant(g, "W", random_tensor({4, 3}, 16));
  Value* c = g.get_or_create_value("c");
  g.add_node("MatMul", {x, w}, {c}, "matmul");
  Value* y = g.get_or_create_value("y");
  add_batch_norm(g, c, y, 3, 50);
  g.outputs = {y};
  return model;
}

// Two Convs share W; only the first is followed by a BN. Outputs y (BN) and z (second Conv).
Model shared_weight_bn() {
  Model model = conv_bn();
  Graph& g = *model.graph;
  Value* z = g.get_or_create_value("z");
  Node* conv2 = g.add_node("Conv", {g.find_value("x"), g.find_value("W")}, {z}, "conv2");
  conv2->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  g.outputs.push_back(z);
  return model;
}

// BN straight on the graph input x[1,3,4,4]: nothing to fold into.
Model input_bn() {
  Model model = empty_model();
  Graph& g = *model.graph;
  Value* x = add_input(g, "x", {1, 3, 4, 4});
  Value* y = g.get_or_create_value("y");
  add_batch_norm(g, x, y, 3, 60);
  Value* r = g.get_or_create_value("r");
  g.add_node("Relu", {y}, {r}, "relu");
  g.outputs = {r};
  return model;
}

// conv_bn with every constant produced by a Constant node, as paddle2onnx exports them.
Model conv_bn_constant_nodes() {
  Model model = conv_bn();
  Graph& g = *model.graph;
  std::vector<Node*> original;
  for (const auto& n : g.nodes()) original.push_back(n.get());
  const std::vector<Value*> constants = g.initializer_order();
  for (Value* v : constants) {
    Node* constant = g.add_node("Constant", {}, {v}, v->name() + "_const");
    constant->set_attribute(Attribute::make_tensor("value", *g.initializer(v)));
    g.remove_initializer(v);
  }
  for (Node* n : original) g.move_node_to_end(n);  // keep the file order topological
  return model;
}

std::vector<std::string> node_ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type());
  return ops;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(n->name());
  return names;
}

PassResult run_pass(Model& model) {
  FoldBatchNorm pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  return *result;
}

std::map<std::string, Tensor> run_model(const Model& model, const std::map<std::string, Tensor>& inputs) {
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = executor.value()->run(inputs);
  REQUIRE(outputs.has_value());
  return outputs.value();
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  float worst = 0.0f;
  for (std::size_t i = 0; i < a.span<float>().size(); ++i)
    worst = std::max(worst, std::fabs(a.span<float>()[i] - b.span<float>()[i]));
  return worst;
}

// Runs `make()` before and after the pass on a seeded random x and compares every output.
void check_equivalent(Model (*make)(), const Shape& x_shape) {
  const Model original = make();
  Model folded = make();
  CHECK(run_pass(folded).changed);
  REQUIRE(folded.graph->validate().is_ok());
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::map<std::string, Tensor> inputs = {{"x", random_tensor(x_shape, seed, -2.0f, 2.0f)}};
    const auto before = run_model(original, inputs);
    const auto after = run_model(folded, inputs);
    REQUIRE(before.size() == after.size());
    for (const auto& [name, value] : before) {
      REQUIRE(after.count(name) == 1);
      CHECK(max_abs_diff(value, after.at(name)) <= kTolerance);
    }
  }
}

int64_t count_op(const Graph& g, const std::string& op) {
  const auto ops = node_ops(g);
  return std::count(ops.begin(), ops.end(), op);
}

TEST_CASE("fold-batchnorm: Conv without bias takes the scale and a new bias") {
  Model model = conv_bn();
  const PassResult result = run_pass(model);
  CHECK(result.changed);
  CHECK(result.counters.at("folded-into-conv") == 1);
  CHECK(result.counters.at("converted-to-mul-add") == 0);
  const Graph& g = *model.graph;
  REQUIRE(node_ops(g) == std::vector<std::string>{"Conv"});
  const Node& conv = *g.nodes().front();
  CHECK(conv.name() == "conv");
  CHECK(conv.output(0)->name() == "y");
  CHECK(conv.attr_ints("pads") == std::vector<int64_t>{1, 1, 1, 1});
  REQUIRE(conv.inputs().size() == 3);
  CHECK(conv.input(1)->name() == "W");  // used only here: updated in place
  const Tensor* bias = g.initializer(conv.input(2));
  REQUIRE(bias != nullptr);
  CHECK(bias->shape() == Shape{3});
  CHECK(g.find_value("c") == nullptr);
  CHECK(g.find_value("bn_gamma") == nullptr);
  CHECK(g.validate().is_ok());
}

TEST_CASE("fold-batchnorm: folded weight is W * gamma / sqrt(var + eps) per output channel") {
  Model model = conv_bn();
  const Graph& g = *model.graph;
  const Tensor w = g.initializer(g.find_value("W"))->clone();
  const Tensor gamma = g.initializer(g.find_value("bn_gamma"))->clone();
  const Tensor var = g.initializer(g.find_value("bn_var"))->clone();
  const Tensor beta = g.initializer(g.find_value("bn_beta"))->clone();
  const Tensor mean = g.initializer(g.find_value("bn_mean"))->clone();
  run_pass(model);
  const Node& conv = *g.nodes().front();
  const Tensor& w2 = *g.initializer(conv.input(1));
  const Tensor& b2 = *g.initializer(conv.input(2));
  for (int64_t o = 0; o < 3; ++o) {
    const double scale = gamma.span<float>()[o] / std::sqrt(static_cast<double>(var.span<float>()[o]) + 1e-3f);
    for (int64_t k = 0; k < 18; ++k)
      CHECK(w2.span<float>()[o * 18 + k] == static_cast<float>(w.span<float>()[o * 18 + k] * scale));
    CHECK(b2.span<float>()[o] == static_cast<float>(beta.span<float>()[o] - mean.span<float>()[o] * scale));
  }
}

TEST_CASE("fold-batchnorm: Conv outputs are numerically equivalent") { check_equivalent(conv_bn, {1, 2, 5, 5}); }

TEST_CASE("fold-batchnorm: grouped ConvTranspose scales along its second weight axis") {
  Model model = conv_transpose_bn();
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("folded-into-convtranspose") == 1);
  REQUIRE(node_ops(*model.graph) == std::vector<std::string>{"ConvTranspose"});
  const Node& node = *model.graph->nodes().front();
  CHECK(node.attr_int("group", 1) == 2);
  CHECK(node.input(2)->name() == "B");
  check_equivalent(conv_transpose_bn, {1, 4, 3, 3});
}

TEST_CASE("fold-batchnorm: Gemm with transB, alpha and beta") {
  Model model = gemm_bn();
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("folded-into-gemm") == 1);
  REQUIRE(node_ops(*model.graph) == std::vector<std::string>{"Gemm"});
  const Node& gemm = *model.graph->nodes().front();
  CHECK(gemm.attr_int("transB", 0) == 1);
  CHECK(gemm.attr_float("alpha", 1.0f) == 0.5f);
  CHECK(gemm.attr_float("beta", 0.0f) == 1.0f);  // C now holds beta * C
  CHECK(gemm.output(0)->name() == "y");
  check_equivalent(gemm_bn, {2, 4});
}

TEST_CASE("fold-batchnorm: 2-D MatMul becomes Gemm with the folded bias") {
  Model model = matmul_bn();
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("folded-into-matmul") == 1);
  REQUIRE(node_ops(*model.graph) == std::vector<std::string>{"Gemm"});
  const Node& gemm = *model.graph->nodes().front();
  REQUIRE(gemm.inputs().size() == 3);
  CHECK(model.graph->initializer(gemm.input(2))->shape() == Shape{3});
  check_equivalent(matmul_bn, {2, 4});
}

TEST_CASE("fold-batchnorm: a weight shared with another node is copied, not changed") {
  Model model = shared_weight_bn();
  const Graph& g = *model.graph;
  const Tensor w = g.initializer(g.find_value("W"))->clone();
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("folded-into-conv") == 1);
  CHECK(g.initializer(g.find_value("W"))->bitwise_equal(w));
  const Node* folded = nullptr;
  const Node* other = nullptr;
  for (const auto& n : g.nodes()) (n->name() == "conv" ? folded : other) = n.get();
  REQUIRE(folded != nullptr);
  REQUIRE(other != nullptr);
  CHECK(other->input(1)->name() == "W");
  CHECK(folded->input(1)->name() != "W");
  CHECK_FALSE(g.initializer(folded->input(1))->bitwise_equal(w));
  check_equivalent(shared_weight_bn, {1, 2, 5, 5});
}

TEST_CASE("fold-batchnorm: BN with no producer to fold into becomes Mul + Add") {
  Model model = input_bn();
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("converted-to-mul-add") == 1);
  const Graph& g = *model.graph;
  CHECK(node_ops(g) == std::vector<std::string>{"Mul", "Add", "Relu"});
  const Node& mul = *g.nodes().front();
  const Node& add = **std::next(g.nodes().begin());
  CHECK(g.initializer(mul.input(1))->shape() == Shape{3, 1, 1});
  CHECK(g.initializer(add.input(1))->shape() == Shape{3, 1, 1});
  CHECK(add.output(0)->name() == "y");
  check_equivalent(input_bn, {1, 3, 4, 4});
}

TEST_CASE("fold-batchnorm: weights and statistics from Constant nodes fold into new initializers") {
  Model model = conv_bn_constant_nodes();
  const Graph& g = *model.graph;
  REQUIRE(g.initializer_order().empty());
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("folded-into-conv") == 1);
  CHECK(count_op(g, "BatchNormalization") == 0);
  const Node* conv = nullptr;
  for (const auto& n : g.nodes())
    if (n->op_type() == "Conv") conv = n.get();
  REQUIRE(conv != nullptr);
  REQUIRE(conv->inputs().size() == 3);
  CHECK(g.is_initializer(conv->input(1)));
  CHECK(g.is_initializer(conv->input(2)));
  CHECK(conv->input(1)->name() != "W");
  CHECK(conv->output(0)->name() == "y");
  CHECK(g.validate().is_ok());
  check_equivalent(conv_bn_constant_nodes, {1, 2, 5, 5});
}

TEST_CASE("fold-batchnorm: a Conv output with another user is not folded into") {
  Model model = conv_bn();
  Graph& g = *model.graph;
  g.find_value("c")->type = float_type({1, 3, 5, 5});
  g.outputs.push_back(g.find_value("c"));
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("folded-into-conv") == 0);
  CHECK(result.counters.at("converted-to-mul-add") == 1);
  CHECK(count_op(g, "Conv") == 1);
  CHECK(g.nodes().front()->inputs().size() == 2);  // the Conv kept no bias
}

TEST_CASE("fold-batchnorm: graphs it does not apply to are unchanged") {
  SUBCASE("training mode") {
    Model model = conv_bn();
    for (const auto& n : model.graph->nodes())
      if (n->op_type() == "BatchNormalization") n->set_attribute(Attribute::make_int("training_mode", 1));
    const auto names = node_names(*model.graph);
    const PassResult result = run_pass(model);
    CHECK_FALSE(result.changed);
    CHECK(node_names(*model.graph) == names);
  }
  SUBCASE("mean fed at run time") {
    Model model = conv_bn();
    model.graph->inputs.push_back(model.graph->find_value("bn_mean"));
    const auto names = node_names(*model.graph);
    const std::size_t values = model.graph->values().size();
    const PassResult result = run_pass(model);
    CHECK_FALSE(result.changed);
    CHECK(node_names(*model.graph) == names);
    CHECK(model.graph->values().size() == values);
  }
  SUBCASE("input rank unknown and nothing to fold into") {
    Model model = input_bn();
    model.graph->find_value("x")->type->shape.reset();
    const auto names = node_names(*model.graph);
    const PassResult result = run_pass(model);
    CHECK_FALSE(result.changed);
    CHECK(result.counters.at("converted-to-mul-add") == 0);
    CHECK(node_names(*model.graph) == names);
  }
  SUBCASE("MatMul output not known to be 2-D") {
    Model model = matmul_bn();
    model.graph->find_value("x")->type->shape.reset();
    const auto names = node_names(*model.graph);
    const PassResult result = run_pass(model);
    CHECK_FALSE(result.changed);
    CHECK(node_names(*model.graph) == names);
  }
}

}  // namespace
}  // namespace qflow
