// Linear algebra kernels: Einsum forms the node tests leave out (implicit output, traces,
// broadcast ellipses, three operands, integers, thread independence) and Det with pivoting.
#include <doctest/doctest.h>

#include <vector>

#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_first_output;
using qflow::testing::run_single_node;
using qflow::testing::single_node;
using qflow::testing::SingleNode;

namespace {

Tensor einsum(const std::string& equation, std::vector<Tensor> inputs, int threads = 1) {
  SingleNode spec = single_node("Einsum", std::move(inputs), {Attribute::make_string("equation", equation)}, 12);
  spec.threads = threads;
  return run_first_output(spec);
}

std::vector<float> floats(const Tensor& t) { return std::vector<float>(t.span<float>().begin(), t.span<float>().end()); }

Tensor iota(Shape shape, float start = 1) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::from_vector<float>(std::move(shape), v);
}

}  // namespace

TEST_CASE("Einsum in implicit mode sums repeated letters and sorts the rest") {
  // 'ij,jk' is a matrix product with output 'ik'.
  const Tensor product = einsum("ij,jk", {iota({2, 3}), iota({3, 2})});
  CHECK(product.shape() == Shape{2, 2});
  CHECK(floats(product) == std::vector<float>{22, 28, 49, 64});
  // 'ba' has output 'ab': a transpose.
  const Tensor transposed = einsum("ba", {iota({2, 3})});
  CHECK(transposed.shape() == Shape{3, 2});
  CHECK(floats(transposed) == std::vector<float>{1, 4, 2, 5, 3, 6});
  // 'ii' is the trace, a scalar.
  const Tensor trace = einsum("ii", {iota({3, 3})});
  CHECK(trace.shape() == Shape{});
  CHECK(trace.data<float>()[0] == 15);
}

TEST_CASE("Einsum broadcasts ellipsis dimensions of size 1") {
  const Tensor a = iota({2, 1, 2, 2});      // [2, 1] batch
  const Tensor b = iota({3, 2, 2}, 10);     // [3] batch
  const Tensor out = einsum("...ij,...jk->...ik", {a, b});
  REQUIRE(out.shape() == Shape{2, 3, 2, 2});
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t k = 0; k < 2; ++k) {
          float expected = 0;
          for (int64_t j = 0; j < 2; ++j) expected += a.data<float>()[p * 4 + i * 2 + j] * b.data<float>()[q * 4 + j * 2 + k];
          CHECK(out.data<float>()[((p * 3 + q) * 2 + i) * 2 + k] == expected);
        }
}

TEST_CASE("Einsum with three operands and integers") {
  const Tensor x = Tensor::from_vector<int32_t>({2}, {1, 2});
  const Tensor y = Tensor::from_vector<int32_t>({2}, {3, 4});
  const Tensor z = Tensor::from_vector<int32_t>({2}, {5, 6});
  const Tensor outer = einsum("i,j,k->ijk", {x, y, z});
  REQUIRE(outer.dtype() == DType::Int32);
  CHECK(std::vector<int32_t>(outer.span<int32_t>().begin(), outer.span<int32_t>().end()) ==
        std::vector<int32_t>{15, 18, 20, 24, 30, 36, 40, 48});
  const Tensor dot3 = einsum("i,i,i->", {x, y, z});
  CHECK(dot3.data<int32_t>()[0] == 1 * 3 * 5 + 2 * 4 * 6);
}

TEST_CASE("Einsum gives the same bits for any thread count") {
  const Tensor a = iota({64, 96}, 0.25f), b = iota({96, 80}, -3000.5f);
  CHECK(einsum("ij,jk->ik", {a, b}, 1).bitwise_equal(einsum("ij,jk->ik", {a, b}, 4)));
}

TEST_CASE("Einsum refuses mismatched subscript sizes and unknown output letters") {
  auto mismatch = run_single_node(single_node("Einsum", {iota({2, 3}), iota({4, 2})}, {Attribute::make_string("equation", "ij,jk")}, 12));
  REQUIRE_FALSE(mismatch.has_value());
  CHECK(mismatch.status().message().find("disagree") != std::string::npos);
  auto unknown = run_single_node(single_node("Einsum", {iota({2, 3})}, {Attribute::make_string("equation", "ij->k")}, 12));
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.status().message().find("'k'") != std::string::npos);
}

TEST_CASE("Det pivots on a zero leading entry and gives 0 for singular matrices") {
  const Tensor x = Tensor::from_vector<double>({2, 3, 3}, {0, 1, 2, 1, 0, 3, 4, -3, 8,  //
                                                           1, 2, 3, 2, 4, 6, 0, 1, 1});
  const Tensor det = run_first_output(single_node("Det", {x}, {}, 11));
  REQUIRE(det.shape() == Shape{2});
  CHECK(det.data<double>()[0] == doctest::Approx(-2.0));
  CHECK(det.data<double>()[1] == 0.0);
}
