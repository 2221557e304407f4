// Tests of evaluate_node / can_evaluate: one node through the reference kernels, no graph run.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "qflow/interpreter.h"

namespace qflow {
namespace {

TEST_CASE("evaluate_node: Add broadcasts like the kernel does") {
  Graph g;
  Node* add = g.add_node("Add", {g.get_or_create_value("a"), g.get_or_create_value("b")},
                         {g.get_or_create_value("c")}, "add");
  const Tensor a = Tensor::from_vector<float>({2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  const Tensor b = Tensor::from_vector<float>({2}, {10.0f, -1.0f});
  auto out = evaluate_node(*add, {&a, &b}, 17);
  REQUIRE(out.has_value());
  REQUIRE(out->size() == 1);
  CHECK(out->at(0).shape() == Shape{2, 2});
  CHECK(out->at(0).to_doubles() == std::vector<double>{11.0, 1.0, 13.0, 3.0});
}

TEST_CASE("evaluate_node: missing optional input and output") {
  Graph g;
  // Clip with only a max bound (min absent) and Dropout without its mask output.
  Node* clip = g.add_node("Clip", {g.get_or_create_value("x"), nullptr, g.get_or_create_value("hi")},
                          {g.get_or_create_value("y")}, "clip");
  const Tensor x = Tensor::from_vector<float>({3}, {-5.0f, 0.5f, 7.0f});
  const Tensor hi = Tensor::scalar<float>(1.0f);
  auto clipped = evaluate_node(*clip, {&x, nullptr, &hi}, 13);
  REQUIRE(clipped.has_value());
  CHECK(clipped->at(0).to_doubles() == std::vector<double>{-5.0, 0.5, 1.0});

  Node* shape = g.add_node("Shape", {g.get_or_create_value("x")}, {g.get_or_create_value("s")}, "shape");
  auto s = evaluate_node(*shape, {&x}, 17);
  REQUIRE(s.has_value());
  CHECK(s->at(0).dtype() == DType::Int64);
  CHECK(s->at(0).to_int64s() == std::vector<int64_t>{3});
}

TEST_CASE("evaluate_node: errors name the node") {
  Graph g;
  Node* unknown = g.add_node("NoSuchOp", {g.get_or_create_value("x")}, {g.get_or_create_value("y")}, "mystery");
  const Tensor x = Tensor::from_vector<float>({1}, {1.0f});
  CHECK_FALSE(can_evaluate(*unknown, 17));
  auto missing = evaluate_node(*unknown, {&x}, 17);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().code() == StatusCode::Unsupported);
  CHECK(missing.status().message().find("mystery") != std::string::npos);

  Node* relu = g.add_node("Relu", {g.get_or_create_value("x")}, {g.get_or_create_value("r")}, "relu");
  CHECK(can_evaluate(*relu, 17));
  CHECK_FALSE(can_evaluate(*relu, 0));
  // Wrong input count is refused before any kernel runs.
  auto wrong = evaluate_node(*relu, {}, 17);
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.status().code() == StatusCode::InvalidInput);
}

}  // namespace
}  // namespace qflow
