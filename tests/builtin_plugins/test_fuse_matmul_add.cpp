// Tests of the fuse-matmul-add pass: the fused Gemm, the cases it must leave alone, and numerics.
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
#include "plugins/passes/fuse_matmul_add.h"

namespace qflow {
namespace {

using namespace pass_test;

// Gemm and MatMul + Add accumulate the same 4-term dot products; only the bias add may round apart.
constexpr float kTolerance = 1e-5f;

struct Spec {
  Shape x_shape = {2, 4};
  bool x_typed = true;
  Shape bias_shape = {3};
  bool bias_first = false;       // Add(B, MatMul) instead of Add(MatMul, B)
  bool product_escapes = false;  // the MatMul output is also a graph output
};

// x -> MatMul(W[4,3]) -> m -> Add(B) -> y -> Relu -> r
Model matmul_add(const Spec& spec = {}) {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  if (spec.x_typed) x->type = float_type(spec.x_shape);
  g.inputs = {x};
  Value* w = g.get_or_create_value("W");
  g.set_initializer(w, random_tensor({4, 3}, 7));
  Value* b = g.get_or_create_value("B");
  g.set_initializer(b, random_tensor(spec.bias_shape, 8));
  Value* m = g.get_or_create_value("m");
  Value* y = g.get_or_create_value("y");
  Value* r = g.get_or_create_value("r");
  g.add_node("MatMul", {x, w}, {m}, "matmul");
  g.add_node("Add", spec.bias_first ? std::vector<Value*>{b, m} : std::vector<Value*>{m, b}, {y}, "add");
  g.add_node("Relu", {y}, {r}, "relu");
  g.outputs = {r};
  if (spec.product_escapes) g.outputs.push_back(m);
  return model;
}

std::vector<std::string> node_ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type());
  return ops;
}

PassResult run_pass(Model& model) {
  FuseMatMulAdd pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  return *result;
}

std::map<std::string, Tensor> run_model(const Model& model, const Tensor& x) {
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = executor.value()->run({{"x", x}});
  REQUIRE(outputs.has_value());
  return outputs.value();
}

TEST_CASE("fuse-matmul-add: MatMul + bias Add becomes one Gemm writing the Add's output") {
  for (const bool bias_first : {false, true}) {
    CAPTURE(bias_first);
    Spec spec;
    spec.bias_first = bias_first;
    Model model = matmul_add(spec);
    const PassResult result = run_pass(model);
    CHECK(result.changed);
    CHECK(result.counters.at("fused") == 1);
    const Graph& g = *model.graph;
    REQUIRE(node_ops(g) == std::vector<std::string>{"Gemm", "Relu"});
    const Node& gemm = *g.nodes().front();
    REQUIRE(gemm.inputs().size() == 3);
    CHECK(gemm.input(0)->name() == "x");
    CHECK(gemm.input(1)->name() == "W");
    CHECK(gemm.input(2)->name() == "B");
    CHECK(gemm.output(0)->name() == "y");
    CHECK(gemm.attributes().empty());
    CHECK(g.find_value("m") == nullptr);
    CHECK(g.validate().is_ok());
  }
}

TEST_CASE("fuse-matmul-add: A produced by Gemm is 2-D without a declared type") {
  Model model = matmul_add();
  Graph& g = *model.graph;
  // x -> Gemm(I) -> h feeds the MatMul instead of x; h has no declared type.
  Value* eye = g.get_or_create_value("I");
  Tensor identity(DType::Float32, {4, 4});
  for (int i = 0; i < 4; ++i) identity.span<float>()[i * 5] = 1.0f;
  g.set_initializer(eye, identity);
  Value* h = g.get_or_create_value("h");
  Node* first = g.add_node("Gemm", {g.find_value("x"), eye}, {h}, "gemm0");
  for (const auto& n : g.nodes())
    if (n->op_type() == "MatMul") n->set_input(0, h);
  g.move_node_to_end(first);
  for (const std::string name : {"matmul", "add", "relu"})
    for (const auto& n : g.nodes())
      if (n->name() == name) {
        g.move_node_to_end(n.get());
        break;
      }
  const PassResult result = run_pass(model);
  CHECK(result.counters.at("fused") == 1);
  CHECK(node_ops(g) == std::vector<std::string>{"Gemm", "Gemm", "Relu"});
  CHECK(g.validate().is_ok());
}

TEST_CASE("fuse-matmul-add: outputs are numerically equivalent") {
  for (const Shape& bias_shape : {Shape{3}, Shape{1, 3}}) {
    CAPTURE(shape_to_string(bias_shape));
    Spec spec;
    spec.bias_shape = bias_shape;
    const Model original = matmul_add(spec);
    Model fused = matmul_add(spec);
    REQUIRE(run_pass(fused).counters.at("fused") == 1);
    for (uint32_t seed : {1u, 2u, 3u}) {
      const Tensor x = random_tensor({2, 4}, seed);
      const Tensor before = run_model(original, x).at("r");
      const Tensor after = run_model(fused, x).at("r");
      REQUIRE(before.shape() == after.shape());
      bool some_positive = false;
      for (std::size_t i = 0; i < before.span<float>().size(); ++i) {
        CHECK(std::fabs(before.span<float>()[i] - after.span<float>()[i]) <= kTolerance);
        some_positive = some_positive || after.span<float>()[i] > 0.0f;
      }
      CHECK(some_positive);  // Relu did not zero everything: the comparison means something
    }
  }
}

TEST_CASE("fuse-matmul-add: graphs it does not apply to are unchanged") {
  std::vector<std::pair<std::string, Spec>> cases;
  {
    Spec s;
    s.x_shape = {2, 5, 4};
    cases.push_back({"A is 3-D", s});
  }
  {
    Spec s;
    s.x_typed = false;
    cases.push_back({"A's rank unknown", s});
  }
  {
    Spec s;
    s.bias_shape = {2, 3};
    cases.push_back({"bias is a full [N, out] matrix", s});
  }
  {
    Spec s;
    s.product_escapes = true;
    cases.push_back({"MatMul output has another user", s});
  }
  for (const auto& [label, spec] : cases) {
    CAPTURE(label);
    Model model = matmul_add(spec);
    const auto ops = node_ops(*model.graph);
    const std::size_t values = model.graph->values().size();
    const PassResult result = run_pass(model);
    CHECK_FALSE(result.changed);
    CHECK(result.counters.at("fused") == 0);
    CHECK(node_ops(*model.graph) == ops);
    CHECK(model.graph->values().size() == values);
  }
}

}  // namespace
}  // namespace qflow
