// Tests of the eliminate-identity pass: each pass-through kind, graph-output names, equivalence.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/eliminate_identity.h"

namespace qflow {
namespace {

using namespace pass_test;

// x [2,3,4] -> Relu -> Identity -> Dropout -> Reshape([2,3,4]) -> Cast(float) -> Transpose(0,1,2)
//   -> Transpose(2,0,1) -> Transpose(1,2,0) -> Sigmoid -> Identity -> y (graph output)
Model passthrough_model() {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({2, 3, 4});
  g.inputs = {x};
  Value* shape = g.get_or_create_value("shape");
  g.set_initializer(shape, Tensor::from_vector<int64_t>({3}, {0, 3, -1}));
  auto v = [&g](const std::string& name) {
    Value* value = g.get_or_create_value(name);
    value->type = float_type({2, 3, 4});
    return value;
  };
  g.add_node("Relu", {x}, {v("r")}, "relu");
  g.add_node("Identity", {v("r")}, {v("i1")}, "identity");
  g.add_node("Dropout", {v("i1")}, {v("d"), g.get_or_create_value("mask")}, "dropout");
  g.add_node("Reshape", {v("d"), shape}, {v("rs")}, "reshape");
  g.add_node("Cast", {v("rs")}, {v("c")}, "cast")->set_attribute(Attribute::make_int("to", 1));
  g.add_node("Transpose", {v("c")}, {v("t0")}, "transpose_id")->set_attribute(Attribute::make_ints("perm", {0, 1, 2}));
  Value* t1 = g.get_or_create_value("t1");
  g.add_node("Transpose", {v("t0")}, {t1}, "transpose_a")->set_attribute(Attribute::make_ints("perm", {2, 0, 1}));
  g.add_node("Transpose", {t1}, {v("t2")}, "transpose_b")->set_attribute(Attribute::make_ints("perm", {1, 2, 0}));
  g.add_node("Sigmoid", {v("t2")}, {v("s")}, "sigmoid");
  Value* y = g.get_or_create_value("y");
  g.add_node("Identity", {v("s")}, {y}, "identity_out");
  g.outputs = {y};
  return model;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(n->name());
  return names;
}

TEST_CASE("eliminate-identity: removes every pass-through kind and keeps the output name") {
  Model model = passthrough_model();
  EliminateIdentity pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("identity-removed") == 2);
  CHECK(result->counters.at("dropout-removed") == 1);
  CHECK(result->counters.at("reshape-removed") == 1);
  CHECK(result->counters.at("cast-removed") == 1);
  CHECK(result->counters.at("transpose-removed") == 1);
  CHECK(result->counters.at("transpose-pairs-removed") == 1);
  CHECK(result->counters.at("initializers-removed") == 1);  // the Reshape target
  const Graph& g = *model.graph;
  REQUIRE(g.node_count() == 2);
  auto order = g.topological_order();
  REQUIRE(order.has_value());
  CHECK((*order)[0]->name() == "relu");
  CHECK((*order)[1]->name() == "sigmoid");
  // The graph output keeps its name: Sigmoid now writes y directly.
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0]->name() == "y");
  CHECK(g.outputs[0]->producer() == (*order)[1]);
  CHECK((*order)[1]->input(0) == (*order)[0]->output(0));
  CHECK(g.find_value("s") == nullptr);
  CHECK(g.find_value("shape") == nullptr);
  CHECK(g.validate().is_ok());
}

TEST_CASE("eliminate-identity: outputs are numerically identical") {
  const Model original = passthrough_model();
  Model optimized = passthrough_model();
  EliminateIdentity pass;
  REQUIRE(pass.run(optimized).has_value());
  REQUIRE(optimized.graph->node_count() == 2);
  auto before_exec = Executor::create(original);
  auto after_exec = Executor::create(optimized);
  REQUIRE(before_exec.has_value());
  REQUIRE(after_exec.has_value());
  for (uint32_t seed = 11; seed <= 13; ++seed) {
    const std::map<std::string, Tensor> feeds = {{"x", random_tensor({2, 3, 4}, seed, -3.0f, 3.0f)}};
    auto before = (*before_exec)->run(feeds);
    auto after = (*after_exec)->run(feeds);
    REQUIRE(before.has_value());
    REQUIRE(after.has_value());
    // Only copies were removed: tolerance zero, bit for bit.
    CHECK(before->at("y").bitwise_equal(after->at("y")));
  }
}

TEST_CASE("eliminate-identity: nodes that do change data stay") {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({2, 3});
  g.inputs = {x};
  Value* shape = g.get_or_create_value("shape");
  g.set_initializer(shape, Tensor::from_vector<int64_t>({2}, {3, 2}));
  Value* rs = g.get_or_create_value("rs");
  g.add_node("Reshape", {x, shape}, {rs}, "reshape");
  Value* c = g.get_or_create_value("c");
  g.add_node("Cast", {rs}, {c}, "cast_unknown_input")->set_attribute(Attribute::make_int("to", 1));
  Value* t = g.get_or_create_value("t");
  g.add_node("Transpose", {c}, {t}, "transpose")->set_attribute(Attribute::make_ints("perm", {1, 0}));
  Value* t2 = g.get_or_create_value("t2");
  // (1,0) then (1,0) cancels, but t has a second reader: the pair must stay.
  g.add_node("Transpose", {t}, {t2}, "transpose_back")->set_attribute(Attribute::make_ints("perm", {1, 0}));
  Value* y = g.get_or_create_value("y");
  g.add_node("Add", {t, t2}, {y}, "add");
  Value* d = g.get_or_create_value("d");
  Value* mask = g.get_or_create_value("mask");
  g.add_node("Dropout", {y}, {d, mask}, "dropout_mask_used");
  // An Identity from a graph input straight to a graph output cannot be bypassed.
  Value* passthrough = g.get_or_create_value("passthrough");
  g.add_node("Identity", {x}, {passthrough}, "identity_io");
  g.outputs = {d, mask, passthrough};
  const std::vector<std::string> before = node_names(g);
  EliminateIdentity pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
  CHECK(node_names(g) == before);
  CHECK(g.is_initializer(g.find_value("shape")));
}

TEST_CASE("eliminate-identity: component metadata") {
  const ComponentInfo info = EliminateIdentity::info();
  CHECK(info.kind == ComponentKind::Pass);
  CHECK(info.name == "eliminate-identity");
  CHECK(EliminateIdentity::create(Options{}).has_value());
}

}  // namespace
}  // namespace qflow
