// Tests of the dead-code-elimination pass: structure before/after and numerical equivalence.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/dead_code_elimination.h"

namespace qflow {
namespace {

using namespace pass_test;

// x -> Add(W1) -> a -> Relu -> y (output); a -> Mul(W2) -> d1 -> Neg -> d2 (dead);
// initializer U is never used.
Model model_with_dead_branch() {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  g.name = "dce";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({2, 3});
  g.inputs = {x};
  Value* w1 = g.get_or_create_value("W1");
  g.set_initializer(w1, Tensor::from_vector<float>({2, 3}, {0.5f, -1.0f, 2.0f, -3.0f, 0.25f, 1.5f}));
  Value* w2 = g.get_or_create_value("W2");
  g.set_initializer(w2, Tensor::from_vector<float>({2, 3}, {2, 2, 2, 2, 2, 2}));
  Value* u = g.get_or_create_value("U");
  g.set_initializer(u, Tensor::from_vector<float>({1}, {9.0f}));
  Value* a = g.get_or_create_value("a");
  Value* y = g.get_or_create_value("y");
  Value* d1 = g.get_or_create_value("d1");
  Value* d2 = g.get_or_create_value("d2");
  g.add_node("Add", {x, w1}, {a}, "add");
  g.add_node("Mul", {a, w2}, {d1}, "mul_dead");
  g.add_node("Relu", {a}, {y}, "relu");
  g.add_node("Neg", {d1}, {d2}, "neg_dead");
  y->type = float_type({2, 3});
  g.outputs = {y};
  a->type = float_type({2, 3});
  d2->type = float_type({2, 3});
  g.value_info = {a, d2};
  return model;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(n->name());
  return names;
}

std::vector<std::string> initializer_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Value* v : g.initializer_order()) names.push_back(v->name());
  return names;
}

std::map<std::string, Tensor> run_model(const Model& model, const Tensor& x) {
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = executor.value()->run({{"x", x}});
  REQUIRE(outputs.has_value());
  return outputs.value();
}

TEST_CASE("dead-code-elimination: removes the dead branch, its initializer and unused ones") {
  Model model = model_with_dead_branch();
  DeadCodeElimination pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("nodes-removed") == 2);
  CHECK(result->counters.at("initializers-removed") == 2);
  CHECK(result->counters.at("values-removed") == 4);  // W2, U, d1, d2
  const Graph& g = *model.graph;
  CHECK(node_names(g) == std::vector<std::string>{"add", "relu"});
  CHECK(initializer_names(g) == std::vector<std::string>{"W1"});
  CHECK(g.find_value("d1") == nullptr);
  CHECK(g.find_value("d2") == nullptr);
  CHECK(g.find_value("W2") == nullptr);
  REQUIRE(g.value_info.size() == 1);
  CHECK(g.value_info[0]->name() == "a");
  CHECK(g.validate().is_ok());
}

TEST_CASE("dead-code-elimination: outputs are numerically identical") {
  const Model original = model_with_dead_branch();
  Model optimized = model_with_dead_branch();
  DeadCodeElimination pass;
  REQUIRE(pass.run(optimized).has_value());
  const Tensor x = Tensor::from_vector<float>({2, 3}, {1.0f, 2.0f, -3.0f, 4.5f, -0.75f, 0.0f});
  const auto before = run_model(original, x);
  const auto after = run_model(optimized, x);
  REQUIRE(before.size() == 1);
  REQUIRE(after.size() == 1);
  CHECK(before.at("y").bitwise_equal(after.at("y")));
  CHECK(after.at("y").span<float>()[2] == 0.0f);  // Relu(-3 + 2) = 0: the graph really ran
  CHECK(after.at("y").span<float>()[0] == 1.5f);
}

TEST_CASE("dead-code-elimination: a graph with nothing dead is unchanged") {
  Model model = model_with_dead_branch();
  DeadCodeElimination pass;
  REQUIRE(pass.run(model).has_value());
  const std::vector<std::string> nodes = node_names(*model.graph);
  const std::size_t values = model.graph->values().size();
  auto second = pass.run(model);
  REQUIRE(second.has_value());
  CHECK_FALSE(second->changed);
  CHECK(second->counters.at("nodes-removed") == 0);
  CHECK(second->counters.at("initializers-removed") == 0);
  CHECK(second->counters.at("values-removed") == 0);
  CHECK(node_names(*model.graph) == nodes);
  CHECK(model.graph->values().size() == values);
}

TEST_CASE("dead-code-elimination: values read by name inside a live subgraph stay") {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  Value* cond = g.get_or_create_value("cond");
  g.inputs = {x, cond};
  Value* c = g.get_or_create_value("c");
  Value* k = g.get_or_create_value("K");
  g.set_initializer(k, Tensor::from_vector<float>({1}, {3.0f}));
  Value* out = g.get_or_create_value("out");
  g.add_node("Neg", {x}, {c}, "only_used_by_branch");
  g.add_node("Neg", {x}, {g.get_or_create_value("unused")}, "dead");

  auto then_branch = std::make_shared<Graph>();
  Value* t_out = then_branch->get_or_create_value("t_out");
  then_branch->add_node("Add", {then_branch->get_or_create_value("c"), then_branch->get_or_create_value("K")}, {t_out});
  then_branch->outputs = {t_out};
  auto else_branch = std::make_shared<Graph>();
  Value* e_out = else_branch->get_or_create_value("e_out");
  else_branch->add_node("Identity", {else_branch->get_or_create_value("x")}, {e_out});
  else_branch->outputs = {e_out};

  Node* node_if = g.add_node("If", {cond}, {out}, "if");
  Attribute then_attr;
  then_attr.name = "then_branch";
  then_attr.type = AttributeType::Graph;
  then_attr.g = then_branch;
  node_if->set_attribute(then_attr);
  Attribute else_attr;
  else_attr.name = "else_branch";
  else_attr.type = AttributeType::Graph;
  else_attr.g = else_branch;
  node_if->set_attribute(else_attr);
  g.outputs = {out};

  DeadCodeElimination pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("nodes-removed") == 1);
  CHECK(result->counters.at("initializers-removed") == 0);
  CHECK(node_names(g) == std::vector<std::string>{"only_used_by_branch", "if"});
  CHECK(initializer_names(g) == std::vector<std::string>{"K"});
}

TEST_CASE("dead-code-elimination: initializers that are graph inputs stay") {
  Model model;
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  Value* bias = g.get_or_create_value("bias");
  g.set_initializer(bias, Tensor::from_vector<float>({1}, {1.0f}));
  g.inputs = {x, bias};
  Value* y = g.get_or_create_value("y");
  g.add_node("Relu", {x}, {y}, "relu");
  g.outputs = {y};
  DeadCodeElimination pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
  CHECK(initializer_names(g) == std::vector<std::string>{"bias"});
}

TEST_CASE("dead-code-elimination: component metadata") {
  const ComponentInfo info = DeadCodeElimination::info();
  CHECK(info.kind == ComponentKind::Pass);
  CHECK(info.name == "dead-code-elimination");
  CHECK(DeadCodeElimination::create(Options{}).has_value());
}

}  // namespace
}  // namespace qflow
