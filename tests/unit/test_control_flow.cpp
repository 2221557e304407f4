// If, Loop and Scan in the interpreter: branches and bodies that capture outer values,
// nested captures, carried values and scan outputs, ordering by captured values.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "framework/interpreter/executor.h"
#include "qflow/ir/captured_values.h"

using namespace qflow;

namespace {


Value* input(Graph& g, const std::string& name) {
  Value* v = g.get_or_create_value(name);
  g.inputs.push_back(v);
  return v;
}

Value* output(Graph& g, const std::string& name) {
  Value* v = g.get_or_create_value(name);
  g.outputs.push_back(v);
  return v;
}

std::vector<float> floats(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

// then: y = x * scale (x, scale outer); else: y = x + scale.
Model if_model() {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* cond = input(g, "cond");
  input(g, "x");
  Value* scale = g.get_or_create_value("scale");
  g.set_initializer(scale, Tensor::from_vector<float>({1}, {3.0f}));
  auto then_branch = std::make_shared<Graph>();
  then_branch->add_node("Mul", {then_branch->get_or_create_value("x"), then_branch->get_or_create_value("scale")},
                        {output(*then_branch, "then_y")}, "then_mul");
  auto else_branch = std::make_shared<Graph>();
  else_branch->add_node("Add", {else_branch->get_or_create_value("x"), else_branch->get_or_create_value("scale")},
                        {output(*else_branch, "else_y")}, "else_add");
  Node* node = g.add_node("If", {cond}, {output(g, "y")}, "if");
  node->set_attribute(Attribute::make_graph("then_branch", then_branch));
  node->set_attribute(Attribute::make_graph("else_branch", else_branch));
  return model;
}

}  // namespace

TEST_CASE("If runs the branch its condition picks, with the outer values it captures") {
  Model model = if_model();
  CHECK(captured_value_names(*model.graph->nodes().front()) == std::vector<std::string>{"scale", "x"});
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor, executor.status().message());
  const Tensor x = Tensor::from_vector<float>({2}, {1.0f, -2.0f});
  auto taken = (*executor)->run({{"cond", Tensor::scalar<bool>(true)}, {"x", x}});
  REQUIRE_MESSAGE(taken, taken.status().message());
  CHECK(floats(taken->at("y")) == std::vector<float>{3.0f, -6.0f});
  auto not_taken = (*executor)->run({{"cond", Tensor::scalar<bool>(false)}, {"x", x}});
  REQUIRE(not_taken);
  CHECK(floats(not_taken->at("y")) == std::vector<float>{4.0f, 1.0f});
  // A condition of several values is refused by name.
  auto bad = (*executor)->run({{"cond", Tensor::from_vector<bool>({2}, {true, false})}, {"x", x}});
  REQUIRE_FALSE(bad);
  CHECK(bad.status().message().find("If 'if': the condition must hold one value") != std::string::npos);
}

TEST_CASE("Loop carries values, stacks scan outputs and reads outer values from a nested If") {
  // sum = 0; for i < M: sum = sum + (i even ? step : 0) * i; scan out: sum each iteration.
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* m = input(g, "M");
  Value* sum0 = input(g, "sum0");
  Value* step = g.get_or_create_value("step");
  g.set_initializer(step, Tensor::from_vector<float>({}, {2.0f}));
  Value* two = g.get_or_create_value("two");
  g.set_initializer(two, Tensor::scalar<int64_t>(2));

  auto body = std::make_shared<Graph>();
  Value* i = input(*body, "i");
  Value* cond_in = input(*body, "cond_in");
  Value* sum_in = input(*body, "sum_in");
  Value* rem = body->get_or_create_value("rem");
  body->add_node("Mod", {i, body->get_or_create_value("two")}, {rem}, "mod");
  Value* zero = body->get_or_create_value("zero64");
  body->set_initializer(zero, Tensor::scalar<int64_t>(0));
  Value* even = body->get_or_create_value("even");
  body->add_node("Equal", {rem, zero}, {even}, "even");
  // The nested If reads `step` from the top graph and `i` from the body.
  auto then_branch = std::make_shared<Graph>();
  Value* fi = then_branch->get_or_create_value("fi");
  then_branch->add_node("Cast", {then_branch->get_or_create_value("i")}, {fi}, "cast")
      ->set_attribute(Attribute::make_int("to", static_cast<int64_t>(DType::Float32)));
  then_branch->add_node("Mul", {fi, then_branch->get_or_create_value("step")}, {output(*then_branch, "inc_then")},
                        "mul");
  auto else_branch = std::make_shared<Graph>();
  Value* z = else_branch->get_or_create_value("zf");
  else_branch->set_initializer(z, Tensor::from_vector<float>({}, {0.0f}));
  else_branch->add_node("Identity", {z}, {output(*else_branch, "inc_else")}, "id");
  Value* inc = body->get_or_create_value("inc");
  Node* nested = body->add_node("If", {even}, {inc}, "pick");
  nested->set_attribute(Attribute::make_graph("then_branch", then_branch));
  nested->set_attribute(Attribute::make_graph("else_branch", else_branch));
  body->add_node("Identity", {cond_in}, {output(*body, "cond_out")}, "keep_going");
  body->add_node("Add", {sum_in, inc}, {output(*body, "sum_out")}, "add");
  body->add_node("Identity", {body->find_value("sum_out")}, {output(*body, "scan_sum")}, "scan");
  CHECK(captured_value_names(*body) == std::vector<std::string>{"step", "two"});

  Node* loop = g.add_node("Loop", {m, nullptr, sum0}, {output(g, "sum"), output(g, "sums")}, "loop");
  loop->set_attribute(Attribute::make_graph("body", body));
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor, executor.status().message());
  auto result = (*executor)->run({{"M", Tensor::scalar<int64_t>(5)}, {"sum0", Tensor::from_vector<float>({}, {1.0f})}});
  REQUIRE_MESSAGE(result, result.status().message());
  // Increments 0, 0, 4, 0, 8.
  CHECK(floats(result->at("sum")) == std::vector<float>{13.0f});
  CHECK(result->at("sums").shape() == Shape{5});
  CHECK(floats(result->at("sums")) == std::vector<float>{1.0f, 1.0f, 5.0f, 5.0f, 13.0f});
  // No iteration: the carried value comes back, the scan output is empty.
  auto none = (*executor)->run({{"M", Tensor::scalar<int64_t>(0)}, {"sum0", Tensor::from_vector<float>({}, {1.0f})}});
  REQUIRE(none);
  CHECK(floats(none->at("sum")) == std::vector<float>{1.0f});
  CHECK(none->at("sums").numel() == 0);
}

TEST_CASE("Scan walks its inputs along their axes, in either direction") {
  // state = state + row; scan output = state; over x[3, 2] along axis 0, reversed.
  Model model;
  model.opset_imports.push_back({"", 11});
  Graph& g = *model.graph;
  Value* init = input(g, "init");
  Value* x = input(g, "x");
  auto body = std::make_shared<Graph>();
  Value* s = input(*body, "s");
  Value* row = input(*body, "row");
  body->add_node("Add", {s, row}, {output(*body, "s_out")}, "add");
  body->add_node("Identity", {body->find_value("s_out")}, {output(*body, "seen")}, "id");
  Node* scan = g.add_node("Scan", {init, x}, {output(g, "final"), output(g, "history")}, "scan");
  scan->set_attribute(Attribute::make_graph("body", body));
  scan->set_attribute(Attribute::make_int("num_scan_inputs", 1));
  scan->set_attribute(Attribute::make_ints("scan_input_directions", {1}));
  scan->set_attribute(Attribute::make_ints("scan_output_axes", {1}));
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor, executor.status().message());
  auto result = (*executor)->run({{"init", Tensor::from_vector<float>({2}, {0.0f, 0.0f})},
                                  {"x", Tensor::from_vector<float>({3, 2}, {1, 2, 3, 4, 5, 6})}});
  REQUIRE_MESSAGE(result, result.status().message());
  CHECK(floats(result->at("final")) == std::vector<float>{9.0f, 12.0f});
  // Rows visited 2, 1, 0; the history stacked along axis 1: [2, 3].
  REQUIRE(result->at("history").shape() == Shape{2, 3});
  CHECK(floats(result->at("history")) == std::vector<float>{5, 8, 9, 6, 10, 12});
}

TEST_CASE("a node runs after the producer of a value its subgraph captures") {
  // The If is inserted before the node producing the value its branch reads.
  Model model = if_model();
  Graph& g = *model.graph;
  Value* raw = input(g, "raw");
  // Re-point the branches' `x` at a value computed after the If in insertion order.
  Value* x = g.find_value("x");
  g.inputs.erase(std::find(g.inputs.begin(), g.inputs.end(), x));
  g.add_node("Neg", {raw}, {x}, "late_producer");
  auto order = g.topological_order();
  REQUIRE(order);
  CHECK((*order)[0]->name() == "late_producer");
  CHECK((*order)[1]->name() == "if");
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor, executor.status().message());
  auto result = (*executor)->run({{"cond", Tensor::scalar<bool>(true)}, {"raw", Tensor::from_vector<float>({1}, {2.0f})}});
  REQUIRE_MESSAGE(result, result.status().message());
  CHECK(floats(result->at("y")) == std::vector<float>{-6.0f});
}
