// Reduction kernels: axes, keepdims, negative axes, empty axes, ArgMax/ArgMin index selection.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_single_node;
using qflow::testing::run_first_output;
using qflow::testing::single_node;
using qflow::testing::SingleNode;

namespace {

void check_close(const Tensor& t, const Shape& shape, const std::vector<float>& expected) {
  REQUIRE(t.dtype() == DType::Float32);
  CHECK(t.shape() == shape);
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(t.data<float>()[i] == doctest::Approx(expected[i]).epsilon(1e-5));
  }
}

// [2, 2, 3]: values 1..12.
Tensor sample() {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i + 1);
  return Tensor::from_vector<float>({2, 2, 3}, v);
}

Attribute axes(std::vector<int64_t> a) { return Attribute::make_ints("axes", std::move(a)); }
Attribute keepdims(int64_t k) { return Attribute::make_int("keepdims", k); }

}  // namespace

TEST_CASE("ReduceSum and ReduceMean with and without keepdims") {
  check_close(run_first_output(single_node("ReduceSum", {sample()}, {axes({1})}, 11)), {2, 1, 3}, {5, 7, 9, 17, 19, 21});
  check_close(run_first_output(single_node("ReduceSum", {sample()}, {axes({1}), keepdims(0)}, 11)), {2, 3}, {5, 7, 9, 17, 19, 21});
  check_close(run_first_output(single_node("ReduceMean", {sample()}, {axes({0, 2}), keepdims(0)})), {2}, {5, 8});
  check_close(run_first_output(single_node("ReduceMean", {sample()}, {})), {1, 1, 1}, {6.5f});
  // Negative axis -1 is the last one.
  check_close(run_first_output(single_node("ReduceMax", {sample()}, {axes({-1}), keepdims(0)})), {2, 2}, {3, 6, 9, 12});
  check_close(run_first_output(single_node("ReduceMin", {sample()}, {axes({-3})})), {1, 2, 3}, {1, 2, 3, 4, 5, 6});
}

TEST_CASE("ReduceSum takes axes as an input from opset 13") {
  const Tensor ax = Tensor::from_vector<int64_t>({1}, {-2});
  check_close(run_first_output(single_node("ReduceSum", {sample(), ax}, {keepdims(0)}, 13)), {2, 3}, {5, 7, 9, 17, 19, 21});
  // Empty axes: reduce everything, unless noop_with_empty_axes asks for identity.
  const Tensor none = Tensor::from_vector<int64_t>({0}, {});
  check_close(run_first_output(single_node("ReduceSum", {sample(), none}, {}, 13)), {1, 1, 1}, {78});
  const Tensor same = run_first_output(single_node("ReduceSum", {sample(), none}, {Attribute::make_int("noop_with_empty_axes", 1)}, 13));
  CHECK(same.bitwise_equal(sample()));
}

TEST_CASE("norm, product and log reductions") {
  const Tensor x = Tensor::from_vector<float>({2, 2}, {-1, 2, 3, -4});
  check_close(run_first_output(single_node("ReduceL1", {x}, {axes({1}), keepdims(0)})), {2}, {3, 7});
  check_close(run_first_output(single_node("ReduceL2", {x}, {axes({1}), keepdims(0)})), {2}, {std::sqrt(5.0f), 5});
  check_close(run_first_output(single_node("ReduceSumSquare", {x}, {axes({0}), keepdims(0)})), {2}, {10, 20});
  check_close(run_first_output(single_node("ReduceProd", {x}, {axes({0}), keepdims(0)})), {2}, {-3, -8});
  const Tensor p = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  check_close(run_first_output(single_node("ReduceLogSum", {p}, {axes({1}), keepdims(0)})), {2}, {std::log(3.0f), std::log(7.0f)});
  // Large values would overflow a naive exp.
  const Tensor big = Tensor::from_vector<float>({2}, {1000, 1000});
  check_close(run_first_output(single_node("ReduceLogSumExp", {big}, {keepdims(0)})), {}, {1000 + std::log(2.0f)});
}

TEST_CASE("integer reductions stay integers") {
  const Tensor x = Tensor::from_vector<int32_t>({2, 3}, {1, -2, 3, 4, 5, -6});
  const Tensor sum = run_first_output(single_node("ReduceSum", {x}, {axes({1}), keepdims(0)}, 11));
  REQUIRE(sum.dtype() == DType::Int32);
  CHECK(sum.data<int32_t>()[0] == 2);
  CHECK(sum.data<int32_t>()[1] == 3);
  const Tensor mx = run_first_output(single_node("ReduceMax", {x}, {axes({0}), keepdims(0)}));
  CHECK(std::vector<int32_t>(mx.span<int32_t>().begin(), mx.span<int32_t>().end()) == std::vector<int32_t>{4, 5, 3});
}

TEST_CASE("large reductions are identical for any thread count") {
  std::vector<float> v(64 * 4096);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(static_cast<double>(i)));
  const Tensor x = Tensor::from_vector<float>({64, 4096}, v);
  SingleNode spec = single_node("ReduceMean", {x}, {axes({1})}, 11);
  const Tensor one = run_first_output(spec);
  spec.threads = 2;
  CHECK(one.bitwise_equal(run_first_output(spec)));
  double row0 = 0;
  for (int i = 0; i < 4096; ++i) row0 += v[static_cast<std::size_t>(i)];
  CHECK(one.data<float>()[0] == doctest::Approx(row0 / 4096).epsilon(1e-5));
}

TEST_CASE("ArgMax and ArgMin with select_last_index") {
  const Tensor x = Tensor::from_vector<float>({2, 3}, {2, 5, 5, 1, 1, 0});
  const Tensor first = run_first_output(single_node("ArgMax", {x}, {Attribute::make_int("axis", 1)}));
  CHECK(first.dtype() == DType::Int64);
  CHECK(first.shape() == Shape{2, 1});
  CHECK(first.data<int64_t>()[0] == 1);
  CHECK(first.data<int64_t>()[1] == 0);
  const Tensor last =
      run_first_output(single_node("ArgMax", {x}, {Attribute::make_int("axis", -1), Attribute::make_int("select_last_index", 1), keepdims(0)}));
  CHECK(last.shape() == Shape{2});
  CHECK(last.data<int64_t>()[0] == 2);
  CHECK(last.data<int64_t>()[1] == 1);
  const Tensor mn = run_first_output(single_node("ArgMin", {x}, {keepdims(0)}));
  CHECK(mn.shape() == Shape{3});
  CHECK(std::vector<int64_t>(mn.span<int64_t>().begin(), mn.span<int64_t>().end()) == std::vector<int64_t>{1, 1, 1});
  const Tensor mn_last = run_first_output(single_node("ArgMin", {x}, {Attribute::make_int("axis", 1), Attribute::make_int("select_last_index", 1)}));
  CHECK(mn_last.data<int64_t>()[0] == 0);
  CHECK(mn_last.data<int64_t>()[1] == 2);
}

TEST_CASE("reduce errors name the axis") {
  auto r = run_single_node(single_node("ReduceSum", {sample()}, {axes({3})}, 11));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.status().message().find("axis 3") != std::string::npos);
}

TEST_CASE("reducing leading axes agrees with reducing each column on its own") {
  std::vector<float> v(256 * 300);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::cos(static_cast<double>(i) * 0.37));
  v[5 * 300 + 7] = std::nanf("");
  const Tensor x = Tensor::from_vector<float>({256, 300}, v);
  SingleNode spec = single_node("ReduceMax", {x}, {axes({0}), keepdims(0)}, 11);
  const Tensor one = run_first_output(spec);
  spec.threads = 2;
  CHECK(one.bitwise_equal(run_first_output(spec)));
  CHECK(std::isnan(one.data<float>()[7]));
  float col3 = -1e30f;
  for (int r = 0; r < 256; ++r) col3 = std::max(col3, v[static_cast<std::size_t>(r * 300 + 3)]);
  CHECK(one.data<float>()[3] == col3);
  // The same column through a transposed layout takes the per-output path.
  std::vector<float> t(v.size());
  for (int r = 0; r < 256; ++r)
    for (int c = 0; c < 300; ++c) t[static_cast<std::size_t>(c * 256 + r)] = v[static_cast<std::size_t>(r * 300 + c)];
  const Tensor sum_rows = run_first_output(single_node("ReduceSum", {Tensor::from_vector<float>({300, 256}, t)}, {axes({1}), keepdims(0)}, 11));
  const Tensor sum_cols = run_first_output(single_node("ReduceSum", {x}, {axes({0}), keepdims(0)}, 11));
  CHECK(sum_rows.data<float>()[3] == sum_cols.data<float>()[3]);
  CHECK(sum_rows.data<float>()[100] == sum_cols.data<float>()[100]);
}
