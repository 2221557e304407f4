// Tests of the flush-denormals pass: subnormal float32/float64 constants become signed zeros,
// normal values (the smallest included) stay, and the model computes the same function.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>

#include "plugins/passes/flush_denormals.h"
#include "tests/builtin_plugins/pass_test_graphs.h"

namespace qflow {
namespace {

using namespace pass_test;

TEST_CASE("flush-denormals: subnormal constants become zeros of their sign, the rest stays") {
  Model model = empty_model(17, {1, 4});
  Graph& g = *model.graph;
  Value* w = initializer(g, "w", {1, 4}, {1e-40f, -1e-41f, 0.5f, FLT_MIN});
  Value* wide = g.get_or_create_value("wide");  // float64, a subnormal and a normal value
  g.set_initializer(wide, Tensor::from_vector<double>({2}, {1e-310, 1.0}));
  Value* y = op(g, "Mul", {g.find_value("x"), w}, "y");
  set_output(g, y, {1, 4});
  const Tensor x = random_tensor({1, 4}, 5);
  const Tensor before = run_model(model, x);

  FlushDenormals pass;
  auto result = pass.run(model);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->changed);
  CHECK(result->counters.at("values-flushed") == 3);
  CHECK(result->counters.at("initializers-changed") == 2);
  const auto flushed = g.initializer(w)->span<float>();
  CHECK(flushed[0] == 0.0f);
  CHECK_FALSE(std::signbit(flushed[0]));
  CHECK(flushed[1] == 0.0f);
  CHECK(std::signbit(flushed[1]));
  CHECK(flushed[2] == 0.5f);
  CHECK(flushed[3] == FLT_MIN);
  const auto doubles = g.initializer(wide)->span<double>();
  CHECK(doubles[0] == 0.0);
  CHECK(doubles[1] == 1.0);
  CHECK(max_abs_difference(before, run_model(model, x)) < 1e-30f);

  // Nothing subnormal is left: a second run changes nothing.
  auto again = pass.run(model);
  REQUIRE(again.has_value());
  CHECK_FALSE(again->changed);
}

}  // namespace
}  // namespace qflow
