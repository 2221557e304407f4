// qflow/ir/constants.h: which values are constants, scalar constants, Clip bounds from
// attributes or inputs, and a caller's own constant source.
#include <doctest/doctest.h>

#include <limits>

#include "qflow/ir/constants.h"

using namespace qflow;

namespace {

Value* constant_node(Graph& g, const std::string& name, Attribute value, const std::string& domain = "") {
  Value* v = g.get_or_create_value(name);
  Node* n = g.add_node("Constant", {}, {v}, name, domain);
  n->set_attribute(std::move(value));
  return v;
}

}  // namespace

TEST_CASE("graph_constant: initializers and Constant nodes, not what a caller can feed") {
  Graph g;
  Value* init = g.get_or_create_value("init");
  g.set_initializer(init, Tensor::from_vector<float>({2}, {1.0f, 2.0f}));
  Value* fed = g.get_or_create_value("fed");
  g.set_initializer(fed, Tensor::scalar<float>(3.0f));
  g.inputs = {fed};  // an old-IR default a caller may override
  Value* computed = g.get_or_create_value("computed");
  g.add_node("Relu", {init}, {computed}, "relu");

  const auto t = graph_constant(g, init);
  REQUIRE(t.has_value());
  CHECK(t->to_doubles() == std::vector<double>{1.0, 2.0});
  CHECK_FALSE(graph_constant(g, fed).has_value());
  CHECK_FALSE(graph_constant(g, computed).has_value());
  CHECK_FALSE(graph_constant(g, nullptr).has_value());

  CHECK(graph_constant(g, constant_node(g, "t", Attribute::make_tensor("value", Tensor::scalar<float>(4.0f))))
            ->to_doubles() == std::vector<double>{4.0});
  CHECK(graph_constant(g, constant_node(g, "f", Attribute::make_float("value_float", 5.0f)))->to_doubles() ==
        std::vector<double>{5.0});
  const auto floats = graph_constant(g, constant_node(g, "fs", Attribute::make_floats("value_floats", {6.0f, 7.0f})));
  REQUIRE(floats.has_value());
  CHECK(floats->shape() == Shape{2});
  const auto ints = graph_constant(g, constant_node(g, "is", Attribute::make_ints("value_ints", {-1, -2})));
  REQUIRE(ints.has_value());
  CHECK(ints->dtype() == DType::Int64);
  CHECK(ints->to_int64s() == std::vector<int64_t>{-1, -2});
  CHECK(graph_constant(g, constant_node(g, "i", Attribute::make_int("value_int", 9)))->to_int64s() ==
        std::vector<int64_t>{9});
  // A Constant of another domain is not ONNX's.
  CHECK_FALSE(graph_constant(g, constant_node(g, "custom", Attribute::make_float("value_float", 1.0f), "com.example"))
                  .has_value());
}

TEST_CASE("scalar_constant: one floating-point element of any rank") {
  Graph g;
  Value* s = g.get_or_create_value("s");
  g.set_initializer(s, Tensor::from_vector<float>({1, 1}, {0.5f}));
  Value* pair = g.get_or_create_value("pair");
  g.set_initializer(pair, Tensor::from_vector<float>({2}, {0.5f, 1.0f}));
  Value* integer = g.get_or_create_value("integer");
  g.set_initializer(integer, Tensor::scalar<int64_t>(2));
  Value* d = g.get_or_create_value("d");
  g.set_initializer(d, Tensor::scalar<double>(0.25));

  const auto c = scalar_constant(s, graph_constants(g));
  REQUIRE(c.has_value());
  CHECK(c->value == 0.5);
  CHECK(c->dtype == DType::Float32);
  CHECK(c->rank == 2);
  CHECK(scalar_constant(g, d) == 0.25);
  CHECK_FALSE(scalar_constant(g, pair).has_value());
  CHECK_FALSE(scalar_constant(g, integer).has_value());
}

TEST_CASE("clip_bounds: attributes before opset 11, constant inputs from then on") {
  const double lowest = std::numeric_limits<float>::lowest(), highest = std::numeric_limits<float>::max();
  Graph g;
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};

  Node* old_clip = g.add_node("Clip", {x}, {g.get_or_create_value("y0")}, "old");
  old_clip->set_attribute(Attribute::make_float("max", 6.0f));
  auto b = clip_bounds(g, *old_clip, 9);
  REQUIRE(b.has_value());
  CHECK(b->min == lowest);
  CHECK(b->max == 6.0);

  Value* lo = g.get_or_create_value("lo");
  g.set_initializer(lo, Tensor::scalar<float>(-1.0f));
  Value* hi = constant_node(g, "hi", Attribute::make_float("value_float", 2.5f));
  Node* clip = g.add_node("Clip", {x, lo, hi}, {g.get_or_create_value("y1")}, "new");
  b = clip_bounds(g, *clip, 13);
  REQUIRE(b.has_value());
  CHECK(b->min == -1.0);
  CHECK(b->max == 2.5);

  // An absent bound ("" input) is the end of the float range, as the kernel takes it.
  Node* min_only = g.add_node("Clip", {x, lo}, {g.get_or_create_value("y2")}, "min_only");
  b = clip_bounds(g, *min_only, 13);
  REQUIRE(b.has_value());
  CHECK(b->max == highest);
  // At opset 13 the attributes mean nothing: bounds come from inputs only.
  b = clip_bounds(g, *old_clip, 13);
  REQUIRE(b.has_value());
  CHECK(b->max == highest);

  // A computed bound is not a constant of the graph, but may be one of another source.
  Value* computed = g.get_or_create_value("computed");
  g.add_node("Relu", {x}, {computed}, "relu");
  Node* dynamic = g.add_node("Clip", {x, lo, computed}, {g.get_or_create_value("y3")}, "dynamic");
  CHECK_FALSE(clip_bounds(g, *dynamic, 13).has_value());
  const ConstantSource folded = [&](const Value* v) -> std::optional<Tensor> {
    if (v == computed) return Tensor::scalar<float>(4.0f);
    return graph_constant(g, v);
  };
  b = clip_bounds(*dynamic, 13, folded);
  REQUIRE(b.has_value());
  CHECK(b->min == -1.0);
  CHECK(b->max == 4.0);
}
