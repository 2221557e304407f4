// Unit tests for compute_model_stats: histogram, parameter count and hand-computed MACs.
#include <doctest/doctest.h>

#include "framework/ir/model_stats.h"

#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;
using test::sym;

// x[N,3,8,8] -> Conv(W[4,3,3,3], group 1) -> c[N,4,6,6] -> Relu -> r -> Flatten -> f[N,144]
//   -> Gemm(B[144,10] + bias) -> y[N,10]; ConvTranspose on the side without shapes.
Model make_model(bool with_intermediate_shapes) {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({sym("N"), d(3), d(8), d(8)});
  g.inputs.push_back(x);
  Value* w = g.get_or_create_value("w");
  g.set_initializer(w, Tensor(DType::Float32, {4, 3, 3, 3}));
  Value* b = g.get_or_create_value("b");
  g.set_initializer(b, Tensor(DType::Float32, {144, 10}));
  Value* bias = g.get_or_create_value("bias");
  g.set_initializer(bias, Tensor(DType::Int64, {10}));
  Value* c = g.get_or_create_value("c");
  Value* r = g.get_or_create_value("r");
  Value* f = g.get_or_create_value("f");
  Value* y = g.get_or_create_value("y");
  Value* t = g.get_or_create_value("t");
  y->type = float_type({sym("N"), d(10)});
  if (with_intermediate_shapes) {
    c->type = float_type({sym("N"), d(4), d(6), d(6)});
    f->type = float_type({sym("N"), d(144)});
  }
  g.add_node("Conv", {x, w}, {c}, "conv");
  g.add_node("Relu", {c}, {r}, "relu");
  g.add_node("Flatten", {r}, {f}, "flatten");
  g.add_node("Gemm", {f, b, bias}, {y}, "fc");
  g.add_node("ConvTranspose", {c, w}, {t}, "deconv");
  g.add_node("Custom", {y}, {g.get_or_create_value("z")}, "custom", "com.example");
  g.outputs.push_back(y);
  return model;
}

}  // namespace

TEST_CASE("model_stats: histogram, parameters and MACs with inferred shapes") {
  Model model = make_model(true);
  auto stats = compute_model_stats(model);
  REQUIRE(stats.has_value());
  REQUIRE(stats->inputs.size() == 1);
  CHECK(stats->inputs[0].name == "x");
  CHECK(stats->outputs[0].name == "y");
  CHECK(stats->op_histogram == std::map<std::string, int64_t>{
                                   {"Conv", 1}, {"ConvTranspose", 1}, {"Flatten", 1}, {"Gemm", 1},
                                   {"Relu", 1}, {"com.example::Custom", 1}});
  CHECK(stats->initializer_count == 3);
  CHECK(stats->parameter_count == 108 + 1440 + 10);
  CHECK(stats->parameter_bytes == 108 * 4 + 1440 * 4 + 10 * 8);

  REQUIRE(stats->nodes.size() == 6);
  CHECK(stats->nodes[0].name == "conv");
  CHECK(stats->nodes[0].macs == 4 * 6 * 6 * (3 * 3 * 3));  // numel(Y) * C * kh * kw
  CHECK_FALSE(stats->nodes[1].macs.has_value());          // Relu is not counted
  const NodeStats* fc = nullptr;
  const NodeStats* deconv = nullptr;
  for (const NodeStats& n : stats->nodes) {
    if (n.name == "fc") fc = &n;
    if (n.name == "deconv") deconv = &n;
  }
  REQUIRE(fc);
  REQUIRE(deconv);
  CHECK(fc->macs == 10 * 144);
  CHECK_FALSE(deconv->macs.has_value());  // its output shape is unknown
  CHECK(stats->macs_unknown_nodes == 1);
  CHECK(stats->total_macs == 3888 + 1440);
  CHECK(stats->symbolic_dims_in_macs);
}

TEST_CASE("model_stats: without intermediate shapes the MACs are unknown, not guessed") {
  Model model = make_model(false);
  auto stats = compute_model_stats(model);
  REQUIRE(stats.has_value());
  CHECK(stats->macs_unknown_nodes == 3);
  CHECK(stats->total_macs == 0);
}

TEST_CASE("model_stats: MatMul with broadcast batch and Gemm with transA") {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* a = g.get_or_create_value("a");
  a->type = float_type({d(2), d(5), d(7)});
  Value* b = g.get_or_create_value("b");
  b->type = float_type({d(7), d(3)});
  Value* m = g.get_or_create_value("m");
  m->type = float_type({d(2), d(5), d(3)});
  g.inputs = {a, b};
  g.add_node("MatMul", {a, b}, {m}, "mm");
  Value* at = g.get_or_create_value("at");
  at->type = float_type({d(6), d(4)});
  g.inputs.push_back(at);
  Value* bt = g.get_or_create_value("bt");
  g.set_initializer(bt, Tensor(DType::Float32, {6, 9}));
  Value* gy = g.get_or_create_value("gy");
  gy->type = float_type({d(4), d(9)});
  Node* gemm = g.add_node("Gemm", {at, bt}, {gy}, "gemm");
  gemm->set_attribute(Attribute::make_int("transA", 1));
  g.outputs = {m, gy};
  auto stats = compute_model_stats(model);
  REQUIRE(stats.has_value());
  CHECK(stats->nodes[0].macs == 2 * 5 * 3 * 7);
  CHECK(stats->nodes[1].macs == 4 * 9 * 6);
  CHECK_FALSE(stats->symbolic_dims_in_macs);
  CHECK(stats->inputs.size() == 3);
}

TEST_CASE("model_stats: a cycle is an error") {
  Model model;
  Graph& g = *model.graph;
  Value* p = g.get_or_create_value("p");
  Value* q = g.get_or_create_value("q");
  g.add_node("Relu", {p}, {q}, "a");
  g.add_node("Relu", {q}, {p}, "b");
  g.outputs = {q};
  CHECK_FALSE(compute_model_stats(model).has_value());
}

}  // namespace qflow
