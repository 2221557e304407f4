// Tests of the shape-folding pass: static Shape chains become constants; dynamic ones stay.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "plugins/passes/shape_folding.h"

namespace qflow {
namespace {

ValueType float_type(const std::vector<Dim>& dims) {
  ValueType t;
  t.dtype = DType::Float32;
  t.shape = dims;
  return t;
}

Dim fixed(int64_t d) { return Dim{d, "", ""}; }

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (float& f : v) f = dist(rng);
  return Tensor::from_vector<float>(shape, v);
}

// The flatten idiom: y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])), x: [2, 3, 4].
// With `batch` symbolic the Shape cannot fold.
Model flatten_model(bool static_batch) {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({static_batch ? fixed(2) : Dim{std::nullopt, "batch", ""}, fixed(3), fixed(4)});
  g.inputs = {x};
  Value* zero = g.get_or_create_value("zero");
  g.set_initializer(zero, Tensor::from_vector<int64_t>({1}, {0}));
  Value* minus_one = g.get_or_create_value("minus_one");
  g.set_initializer(minus_one, Tensor::from_vector<int64_t>({1}, {-1}));
  Value* shape = g.get_or_create_value("shape");
  g.add_node("Shape", {x}, {shape}, "shape");
  Value* batch = g.get_or_create_value("batch_dim");
  g.add_node("Gather", {shape, zero}, {batch}, "gather");
  Value* target = g.get_or_create_value("target");
  g.add_node("Concat", {batch, minus_one}, {target}, "concat")->set_attribute(Attribute::make_int("axis", 0));
  Value* y = g.get_or_create_value("y");
  g.add_node("Reshape", {x, target}, {y}, "reshape");
  g.outputs = {y};
  return model;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(n->name());
  return names;
}

TEST_CASE("shape-folding: a static Shape chain becomes the Reshape's constant target") {
  Model model = flatten_model(true);
  ShapeFolding pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("shapes-folded") == 1);
  CHECK(result->counters.at("nodes-folded") == 2);  // Gather, Concat
  const Graph& g = *model.graph;
  CHECK(node_names(g) == std::vector<std::string>{"reshape"});
  const Tensor* target = g.initializer(g.find_value("target"));
  REQUIRE(target != nullptr);
  CHECK(target->to_int64s() == std::vector<int64_t>{2, -1});
  CHECK(g.find_value("zero") == nullptr);  // orphaned constants go
  CHECK(g.validate().is_ok());
}

TEST_CASE("shape-folding: Shape with start/end and Size") {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({fixed(1), fixed(3), fixed(5), fixed(7)});
  g.inputs = {x};
  Value* hw = g.get_or_create_value("hw");
  Node* shape = g.add_node("Shape", {x}, {hw}, "shape_hw");
  shape->set_attribute(Attribute::make_int("start", -2));
  Value* n = g.get_or_create_value("n");
  g.add_node("Size", {x}, {n}, "size");
  Value* hw_f = g.get_or_create_value("hw_f");
  g.add_node("Cast", {hw}, {hw_f}, "cast")->set_attribute(Attribute::make_int("to", 1));
  Value* n_f = g.get_or_create_value("n_f");
  g.add_node("Cast", {n}, {n_f}, "cast_n")->set_attribute(Attribute::make_int("to", 1));
  Value* y = g.get_or_create_value("y");
  g.add_node("Mul", {hw_f, n_f}, {y}, "mul");
  g.outputs = {y};
  ShapeFolding pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK(result->counters.at("shapes-folded") == 2);
  CHECK(result->counters.at("nodes-folded") == 2);  // the Casts; the float Mul is not shape arithmetic
  CHECK(node_names(g) == std::vector<std::string>{"mul"});
  CHECK(g.initializer(g.find_value("hw_f"))->to_doubles() == std::vector<double>{5.0, 7.0});
  CHECK(g.initializer(g.find_value("n_f"))->to_doubles() == std::vector<double>{105.0});
}

// y = If(Shape(x)[0] == 1) then Squeeze(x, 0) else x, as exporters write a batch-of-one test.
TEST_CASE("shape-folding: an If on a shape test that folds is inlined, and asks for types again") {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({fixed(1), fixed(3)});
  g.inputs = {x};
  Value* dims = g.get_or_create_value("dims");
  g.add_node("Shape", {x}, {dims}, "shape");
  Value* zero = g.get_or_create_value("zero");
  g.set_initializer(zero, Tensor::scalar<int64_t>(0));
  Value* one = g.get_or_create_value("one");
  g.set_initializer(one, Tensor::scalar<int64_t>(1));
  Value* batch = g.get_or_create_value("batch");
  g.add_node("Gather", {dims, zero}, {batch}, "batch");
  Value* single = g.get_or_create_value("single");
  g.add_node("Equal", {batch, one}, {single}, "is_single");
  auto squeeze = std::make_shared<Graph>();
  Value* axes = squeeze->get_or_create_value("axes");
  squeeze->set_initializer(axes, Tensor::from_vector<int64_t>({1}, {0}));
  Value* squeezed = squeeze->get_or_create_value("squeezed");
  squeeze->add_node("Squeeze", {squeeze->get_or_create_value("x"), axes}, {squeezed}, "squeeze");
  squeeze->outputs = {squeezed};
  auto keep = std::make_shared<Graph>();
  Value* kept = keep->get_or_create_value("kept");
  keep->add_node("Identity", {keep->get_or_create_value("x")}, {kept}, "keep");
  keep->outputs = {kept};
  Value* y = g.get_or_create_value("y");
  Node* branch = g.add_node("If", {single}, {y}, "maybe_squeeze");
  branch->set_attribute(Attribute::make_graph("then_branch", squeeze));
  branch->set_attribute(Attribute::make_graph("else_branch", keep));
  g.outputs = {y};

  ShapeFolding pass;
  auto result = pass.run(model);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->counters.at("if-inlined") == 1);
  CHECK(result->types_stale);
  CHECK(node_names(g) == std::vector<std::string>{"squeeze", "maybe_squeeze/output_0"});
  const Tensor input = random_tensor({1, 3}, 3);
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = (*executor)->run({{"x", input}});
  REQUIRE(outputs.has_value());
  CHECK(outputs->at("y").shape() == Shape{3});
  CHECK(outputs->at("y").span<float>()[2] == input.span<float>()[2]);
}

TEST_CASE("shape-folding: a symbolic dimension leaves the graph unchanged") {
  Model model = flatten_model(false);
  const std::vector<std::string> before = node_names(*model.graph);
  ShapeFolding pass;
  auto result = pass.run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
  CHECK(result->counters.at("shapes-folded") == 0);
  CHECK(result->counters.at("nodes-folded") == 0);
  CHECK(node_names(*model.graph) == before);
}

TEST_CASE("shape-folding: outputs are numerically identical") {
  const Model original = flatten_model(true);
  Model folded = flatten_model(true);
  ShapeFolding pass;
  REQUIRE(pass.run(folded).has_value());
  REQUIRE(folded.graph->node_count() == 1);
  auto before_exec = Executor::create(original);
  auto after_exec = Executor::create(folded);
  REQUIRE(before_exec.has_value());
  REQUIRE(after_exec.has_value());
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const std::map<std::string, Tensor> feeds = {{"x", random_tensor({2, 3, 4}, seed)}};
    auto before = (*before_exec)->run(feeds);
    auto after = (*after_exec)->run(feeds);
    REQUIRE(before.has_value());
    REQUIRE(after.has_value());
    // Data movement only: exact equality, shape included.
    CHECK(after->at("y").shape() == Shape{2, 12});
    CHECK(before->at("y").bitwise_equal(after->at("y")));
  }
}

TEST_CASE("shape-folding: component metadata") {
  const ComponentInfo info = ShapeFolding::info();
  CHECK(info.kind == ComponentKind::Pass);
  CHECK(info.name == "shape-folding");
  CHECK(ShapeFolding::create(Options{}).has_value());
}

}  // namespace
}  // namespace qflow
