// Selection kernels: TopK ties, NaN and opset forms; CumSum on integers; Unique on slices.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_single_node;
using qflow::testing::single_node;
using qflow::testing::SingleNode;

namespace {

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.span<T>().begin(), t.span<T>().end());
}

SingleNode top_k(const Tensor& x, int64_t k, std::vector<Attribute> attributes) {
  SingleNode spec = single_node("TopK", {x, Tensor::from_vector<int64_t>({1}, {k})}, std::move(attributes), 11);
  spec.outputs = 2;
  return spec;
}

}  // namespace

TEST_CASE("TopK breaks ties by the lower index, largest or smallest") {
  const Tensor x = Tensor::from_vector<float>({5}, {1, 3, 3, 2, 3});
  auto largest = run_single_node(top_k(x, 3, {}));
  REQUIRE(largest.has_value());
  CHECK(values_of<float>(largest->at(0)) == std::vector<float>{3, 3, 3});
  CHECK(values_of<int64_t>(largest->at(1)) == std::vector<int64_t>{1, 2, 4});
  const Tensor y = Tensor::from_vector<int32_t>({4}, {2, 1, 1, 0});
  auto smallest = run_single_node(top_k(y, 3, {Attribute::make_int("largest", 0)}));
  REQUIRE(smallest.has_value());
  CHECK(values_of<int32_t>(smallest->at(0)) == std::vector<int32_t>{0, 1, 1});
  CHECK(values_of<int64_t>(smallest->at(1)) == std::vector<int64_t>{3, 1, 2});
}

TEST_CASE("TopK ranks NaN above every number") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = run_single_node(top_k(Tensor::from_vector<float>({3}, {1, nan, 3}), 2, {}));
  REQUIRE(out.has_value());
  CHECK(std::isnan(out->at(0).data<float>()[0]));
  CHECK(values_of<int64_t>(out->at(1)) == std::vector<int64_t>{1, 2});
}

TEST_CASE("TopK reads k from an attribute before opset 10 and works on any axis") {
  const Tensor x = Tensor::from_vector<float>({3, 2}, {1, 6, 5, 2, 3, 4});
  SingleNode spec = single_node("TopK", {x}, {Attribute::make_int("k", 2), Attribute::make_int("axis", 0)}, 1);
  spec.outputs = 2;
  auto out = run_single_node(spec);
  REQUIRE(out.has_value());
  CHECK(out->at(0).shape() == Shape{2, 2});
  CHECK(values_of<float>(out->at(0)) == std::vector<float>{5, 6, 3, 4});
  CHECK(values_of<int64_t>(out->at(1)) == std::vector<int64_t>{1, 0, 2, 2});
}

TEST_CASE("TopK refuses k beyond the axis") {
  auto out = run_single_node(top_k(Tensor::from_vector<float>({2}, {1, 2}), 3, {}));
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().message().find("k = 3") != std::string::npos);
}

TEST_CASE("CumSum on integers, exclusive and reversed, axis given as int32") {
  const Tensor x = Tensor::from_vector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor axis = Tensor::scalar<int32_t>(1);
  const Tensor out = qflow::testing::run_first_output(
      single_node("CumSum", {x, axis}, {Attribute::make_int("exclusive", 1), Attribute::make_int("reverse", 1)}, 14));
  CHECK(values_of<int32_t>(out) == std::vector<int32_t>{5, 3, 0, 11, 6, 0});
}

TEST_CASE("Unique along an axis keeps first occurrences in order when unsorted") {
  // Columns: (2,1) (1,0) (2,1) (0,5); unsorted keeps first appearance order.
  const Tensor x = Tensor::from_vector<int64_t>({2, 4}, {2, 1, 2, 0, 1, 0, 1, 5});
  SingleNode spec = single_node("Unique", {x}, {Attribute::make_int("axis", 1), Attribute::make_int("sorted", 0)}, 11);
  spec.outputs = 4;
  auto out = run_single_node(spec);
  REQUIRE(out.has_value());
  CHECK(out->at(0).shape() == Shape{2, 3});
  CHECK(values_of<int64_t>(out->at(0)) == std::vector<int64_t>{2, 1, 0, 1, 0, 5});
  CHECK(values_of<int64_t>(out->at(1)) == std::vector<int64_t>{0, 1, 3});
  CHECK(values_of<int64_t>(out->at(2)) == std::vector<int64_t>{0, 1, 0, 2});
  CHECK(values_of<int64_t>(out->at(3)) == std::vector<int64_t>{2, 1, 1});
}
