// Window kernels: output_datatype and the one-sample symmetric window.
#include <doctest/doctest.h>

#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_first_output;
using qflow::testing::single_node;

TEST_CASE("HannWindow honours output_datatype") {
  const Tensor size = Tensor::scalar<int64_t>(4);
  const Tensor d = run_first_output(single_node("HannWindow", {size}, {Attribute::make_int("output_datatype", 11)}, 17));
  REQUIRE(d.dtype() == DType::Float64);
  REQUIRE(d.shape() == Shape{4});
  CHECK(d.data<double>()[0] == doctest::Approx(0.0));
  CHECK(d.data<double>()[1] == doctest::Approx(0.5));
  CHECK(d.data<double>()[2] == doctest::Approx(1.0));
  CHECK(d.data<double>()[3] == doctest::Approx(0.5));
  const Tensor i = run_first_output(single_node("HannWindow", {size}, {Attribute::make_int("output_datatype", 7)}, 17));
  REQUIRE(i.dtype() == DType::Int64);
  CHECK(i.data<int64_t>()[2] == 1);
}

TEST_CASE("a symmetric window of one sample is 1") {
  const Tensor one = Tensor::scalar<int32_t>(1);
  const Tensor w = run_first_output(single_node("BlackmanWindow", {one}, {Attribute::make_int("periodic", 0)}, 17));
  REQUIRE(w.shape() == Shape{1});
  CHECK(w.data<float>()[0] == 1.0f);
}
