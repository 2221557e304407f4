// Element-wise kernels: hand-computed values for unary, binary, comparison, logical and Where ops.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_single_node;
using qflow::testing::run_first_output;
using qflow::testing::single_node;
using qflow::testing::SingleNode;

namespace {

template <typename T>
std::vector<T> values(const Tensor& t) {
  REQUIRE(t.dtype() == dtype_of_v<T>);
  auto s = t.span<T>();
  return {s.begin(), s.end()};
}

void check_close(const Tensor& t, const std::vector<float>& expected, double tol = 1e-5) {
  REQUIRE(t.dtype() == DType::Float32);
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(t.data<float>()[i] == doctest::Approx(expected[i]).epsilon(tol));
  }
}

Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from_vector<float>(std::move(shape), v); }

}  // namespace

TEST_CASE("unary activations and math") {
  const Tensor x = f32({5}, {-2.0f, -0.5f, 0.0f, 0.5f, 2.0f});
  check_close(run_first_output(single_node("Relu", {x})), {0, 0, 0, 0.5f, 2});
  check_close(run_first_output(single_node("LeakyRelu", {x}, {Attribute::make_float("alpha", 0.1f)})), {-0.2f, -0.05f, 0, 0.5f, 2});
  check_close(run_first_output(single_node("Elu", {x})), {std::expm1(-2.0f), std::expm1(-0.5f), 0, 0.5f, 2});
  check_close(run_first_output(single_node("Sigmoid", {x})), {0.11920292f, 0.37754067f, 0.5f, 0.62245933f, 0.88079708f});
  check_close(run_first_output(single_node("HardSigmoid", {x})), {0.1f, 0.4f, 0.5f, 0.6f, 0.9f});
  check_close(run_first_output(single_node("HardSwish", {x})), {-2.0f * (1.0f / 6.0f), -0.5f * (0.5f - 1.0f / 12.0f), 0,
                                         0.5f * (0.5f + 1.0f / 12.0f), 2.0f * (5.0f / 6.0f)});
  check_close(run_first_output(single_node("Softplus", {x})), {std::log1p(std::exp(-2.0f)), std::log1p(std::exp(-0.5f)), std::log(2.0f),
                                        std::log1p(std::exp(0.5f)), std::log1p(std::exp(2.0f))});
  check_close(run_first_output(single_node("Softsign", {x})), {-2.0f / 3, -0.5f / 1.5f, 0, 0.5f / 1.5f, 2.0f / 3});
  check_close(run_first_output(single_node("ThresholdedRelu", {x}, {Attribute::make_float("alpha", 0.4f)})), {0, 0, 0, 0.5f, 2});
  check_close(run_first_output(single_node("Celu", {x}, {Attribute::make_float("alpha", 2.0f)})),
              {2 * std::expm1(-1.0f), 2 * std::expm1(-0.25f), 0, 0.5f, 2});
  check_close(run_first_output(single_node("Neg", {x})), {2, 0.5f, 0, -0.5f, -2});
  check_close(run_first_output(single_node("Abs", {x})), {2, 0.5f, 0, 0.5f, 2});
  check_close(run_first_output(single_node("Sign", {x})), {-1, -1, 0, 1, 1});
  check_close(run_first_output(single_node("Tanh", {x})), {std::tanh(-2.0f), std::tanh(-0.5f), 0, std::tanh(0.5f), std::tanh(2.0f)});
  check_close(run_first_output(single_node("Erf", {x})), {-0.99532227f, -0.52049988f, 0, 0.52049988f, 0.99532227f});
  // Gelu-20: 0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2 / pi) (x + 0.044715 x^3)).
  check_close(run_first_output(single_node("Gelu", {x}, {}, 20)), {-0.04550026f, -0.15426877f, 0, 0.34573123f, 1.95449974f});
  check_close(run_first_output(single_node("Gelu", {x}, {Attribute::make_string("approximate", "tanh")}, 20)),
              {-0.04540231f, -0.15428599f, 0, 0.34571401f, 1.95459769f});
}

TEST_CASE("Round is half to even; Floor and Ceil") {
  const Tensor x = f32({6}, {-2.5f, -1.5f, 0.5f, 1.5f, 2.5f, 2.6f});
  check_close(run_first_output(single_node("Round", {x})), {-2, -2, 0, 2, 2, 3});
  check_close(run_first_output(single_node("Floor", {x})), {-3, -2, 0, 1, 2, 2});
  check_close(run_first_output(single_node("Ceil", {x})), {-2, -1, 1, 2, 3, 3});
}

TEST_CASE("integer unary ops and predicates") {
  const Tensor i = Tensor::from_vector<int32_t>({4}, {-3, 0, 5, std::numeric_limits<int32_t>::min()});
  CHECK(values<int32_t>(run_first_output(single_node("Neg", {i}))) == std::vector<int32_t>{3, 0, -5, std::numeric_limits<int32_t>::min()});
  CHECK(values<int32_t>(run_first_output(single_node("Abs", {i})))[0] == 3);
  CHECK(values<int32_t>(run_first_output(single_node("Sign", {i}))) == std::vector<int32_t>{-1, 0, 1, -1});
  CHECK(values<int32_t>(run_first_output(single_node("Relu", {i}))) == std::vector<int32_t>{0, 0, 5, 0});

  const float inf = std::numeric_limits<float>::infinity();
  const Tensor f = f32({4}, {1.0f, std::nanf(""), inf, -inf});
  CHECK(values<bool>(run_first_output(single_node("IsNaN", {f}))) == std::vector<bool>{false, true, false, false});
  CHECK(values<bool>(run_first_output(single_node("IsInf", {f}))) == std::vector<bool>{false, false, true, true});
  CHECK(values<bool>(run_first_output(single_node("IsInf", {f}, {Attribute::make_int("detect_positive", 0)}))) ==
        std::vector<bool>{false, false, false, true});
}

TEST_CASE("Clip reads attributes before opset 11 and inputs from 11") {
  const Tensor x = f32({4}, {-3, -1, 1, 3});
  check_close(run_first_output(single_node("Clip", {x}, {Attribute::make_float("min", -2), Attribute::make_float("max", 2)}, 6)),
              {-2, -1, 1, 2});
  check_close(run_first_output(single_node("Clip", {x}, {Attribute::make_float("max", 0)}, 6)), {-3, -1, 0, 0});
  check_close(run_first_output(single_node("Clip", {x, Tensor::scalar(-0.5f), Tensor::scalar(2.5f)}, {}, 11)), {-0.5f, -0.5f, 1, 2.5f});
  // Missing min: only the upper bound applies.
  check_close(run_first_output(single_node("Clip", {x, Tensor(), Tensor::scalar(0.0f)}, {}, 13)), {-3, -1, 0, 0});
  const Tensor xi = Tensor::from_vector<int8_t>({3}, {-100, 0, 100});
  CHECK(values<int8_t>(run_first_output(single_node("Clip", {xi, Tensor::scalar<int8_t>(-5), Tensor::scalar<int8_t>(7)}, {}, 12))) ==
        std::vector<int8_t>{-5, 0, 7});
}

TEST_CASE("binary arithmetic with broadcasting") {
  const Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  check_close(run_first_output(single_node("Add", {a, f32({3}, {10, 20, 30})})), {11, 22, 33, 14, 25, 36});
  check_close(run_first_output(single_node("Sub", {a, f32({2, 1}, {1, 2})})), {0, 1, 2, 2, 3, 4});
  check_close(run_first_output(single_node("Mul", {f32({}, {2}), a})), {2, 4, 6, 8, 10, 12});
  check_close(run_first_output(single_node("Div", {a, a})), {1, 1, 1, 1, 1, 1});
  // [2,1] with [1,3] grows both sides.
  const Tensor col = f32({2, 1}, {1, 2});
  const Tensor row = f32({1, 3}, {10, 20, 30});
  const Tensor sum = run_first_output(single_node("Add", {col, row}));
  CHECK(sum.shape() == Shape{2, 3});
  check_close(sum, {11, 21, 31, 12, 22, 32});
}

TEST_CASE("channel broadcast over a large tensor matches for any thread count") {
  const int64_t n = 2, c = 3, hw = 100 * 100;
  std::vector<float> xs(static_cast<std::size_t>(n * c * hw));
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 97) * 0.5f;
  const Tensor x = f32({n, c, 100, 100}, xs);
  const Tensor bias = f32({c, 1, 1}, {1, 2, 3});
  SingleNode spec = single_node("Add", {x, bias});
  const Tensor one = run_first_output(spec);
  spec.threads = 2;
  const Tensor two = run_first_output(spec);
  CHECK(one.bitwise_equal(two));
  for (int64_t i : {int64_t{0}, hw - 1, hw, 2 * hw + 5, 3 * hw + 7, n * c * hw - 1}) {
    CAPTURE(i);
    CHECK(one.data<float>()[i] == xs[static_cast<std::size_t>(i)] + static_cast<float>((i / hw) % c + 1));
  }
}

TEST_CASE("legacy broadcast attribute aligns B at axis") {
  const Tensor a = f32({2, 3, 2}, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  const Tensor b = f32({3}, {1, 2, 3});
  const Tensor out = run_first_output(single_node("Add", {a, b}, {Attribute::make_int("broadcast", 1), Attribute::make_int("axis", 1)}, 6));
  check_close(out, {1, 1, 2, 2, 3, 3, 2, 2, 3, 3, 4, 4});
}

TEST_CASE("integer division truncates; Mod follows fmod") {
  const Tensor a = Tensor::from_vector<int32_t>({4}, {7, -7, 7, -7});
  const Tensor b = Tensor::from_vector<int32_t>({4}, {2, 2, -2, -2});
  CHECK(values<int32_t>(run_first_output(single_node("Div", {a, b}))) == std::vector<int32_t>{3, -3, -3, 3});
  CHECK(values<int32_t>(run_first_output(single_node("Mod", {a, b}))) == std::vector<int32_t>{1, 1, -1, -1});
  CHECK(values<int32_t>(run_first_output(single_node("Mod", {a, b}, {Attribute::make_int("fmod", 1)}))) ==
        std::vector<int32_t>{1, -1, 1, -1});
  const Tensor u = Tensor::from_vector<uint8_t>({2}, {250, 3});
  CHECK(values<uint8_t>(run_first_output(single_node("Add", {u, Tensor::from_vector<uint8_t>({2}, {10, 4})}))) ==
        std::vector<uint8_t>{4, 7});
  check_close(run_first_output(single_node("Mod", {f32({2}, {-4.5f, 5.5f}), f32({2}, {2, -2})}, {Attribute::make_int("fmod", 1)})),
              {-0.5f, 1.5f});
}

TEST_CASE("Pow with mixed base and exponent types") {
  const Tensor base = Tensor::from_vector<int64_t>({3}, {1, 2, 3});
  CHECK(values<int64_t>(run_first_output(single_node("Pow", {base, Tensor::from_vector<int64_t>({3}, {4, 5, 6})}))) ==
        std::vector<int64_t>{1, 32, 729});
  CHECK(values<int64_t>(run_first_output(single_node("Pow", {base, Tensor::from_vector<float>({3}, {4, 5, 6})}))) ==
        std::vector<int64_t>{1, 32, 729});
  check_close(run_first_output(single_node("Pow", {f32({3}, {1, 2, 4}), Tensor::from_vector<int32_t>({1}, {2})})), {1, 4, 16});
  check_close(run_first_output(single_node("Pow", {f32({2}, {4, 9}), f32({}, {0.5f})})), {2, 3});
}

TEST_CASE("PRelu broadcasts the slope onto X") {
  const Tensor x = f32({1, 2, 2}, {-1, 1, -2, 2});
  check_close(run_first_output(single_node("PRelu", {x, f32({2, 1}, {0.5f, 0.25f})})), {-0.5f, 1, -0.5f, 2});
  // A per-channel vector as older exporters wrote it.
  check_close(run_first_output(single_node("PRelu", {x, f32({2}, {0.5f, 0.25f})}, {}, 6)), {-0.5f, 1, -0.5f, 2});
}

TEST_CASE("BitShift and variadic Min/Max/Sum/Mean") {
  const Tensor a = Tensor::from_vector<uint8_t>({3}, {16, 4, 1});
  const Tensor s = Tensor::from_vector<uint8_t>({3}, {1, 2, 3});
  CHECK(values<uint8_t>(run_first_output(single_node("BitShift", {a, s}, {Attribute::make_string("direction", "RIGHT")}))) ==
        std::vector<uint8_t>{8, 1, 0});
  CHECK(values<uint8_t>(run_first_output(single_node("BitShift", {a, s}, {Attribute::make_string("direction", "LEFT")}))) ==
        std::vector<uint8_t>{32, 16, 8});

  const Tensor x = f32({3}, {3, 2, 1});
  const Tensor y = f32({3}, {1, 4, 3});
  const Tensor z = f32({1}, {2});
  check_close(run_first_output(single_node("Max", {x, y, z})), {3, 4, 3});
  check_close(run_first_output(single_node("Min", {x, y, z})), {1, 2, 1});
  check_close(run_first_output(single_node("Sum", {x, y, z})), {6, 8, 6});
  check_close(run_first_output(single_node("Mean", {x, y, z})), {2, 8.0f / 3, 2});
  check_close(run_first_output(single_node("Max", {x})), {3, 2, 1});
  CHECK(std::isnan(run_first_output(single_node("Max", {f32({1}, {std::nanf("")}), f32({1}, {1})})).data<float>()[0]));
}

TEST_CASE("comparisons, logic and Where") {
  const Tensor a = f32({2, 2}, {1, 2, 3, 4});
  const Tensor b = f32({2}, {2, 3});
  CHECK(values<bool>(run_first_output(single_node("Equal", {a, f32({}, {3})}))) == std::vector<bool>{false, false, true, false});
  CHECK(values<bool>(run_first_output(single_node("Less", {a, b}))) == std::vector<bool>{true, true, false, false});
  CHECK(values<bool>(run_first_output(single_node("Greater", {a, b}))) == std::vector<bool>{false, false, true, true});
  CHECK(values<bool>(run_first_output(single_node("LessOrEqual", {a, b}))) == std::vector<bool>{true, true, false, false});
  CHECK(values<bool>(run_first_output(single_node("GreaterOrEqual", {a, b}))) == std::vector<bool>{false, false, true, true});
  CHECK(values<bool>(run_first_output(single_node("Equal", {Tensor::from_vector<int64_t>({2}, {5, 6}), Tensor::scalar<int64_t>(6)}))) ==
        std::vector<bool>{false, true});

  const Tensor p = Tensor::from_vector<bool>({4}, {true, true, false, false});
  const Tensor q = Tensor::from_vector<bool>({4}, {true, false, true, false});
  CHECK(values<bool>(run_first_output(single_node("And", {p, q}))) == std::vector<bool>{true, false, false, false});
  CHECK(values<bool>(run_first_output(single_node("Or", {p, q}))) == std::vector<bool>{true, true, true, false});
  CHECK(values<bool>(run_first_output(single_node("Xor", {p, q}))) == std::vector<bool>{false, true, true, false});
  CHECK(values<bool>(run_first_output(single_node("Not", {p}))) == std::vector<bool>{false, false, true, true});

  // Condition [2,1], X [1,3], Y scalar: all three broadcast to [2,3].
  const Tensor cond = Tensor::from_vector<bool>({2, 1}, {true, false});
  const Tensor w = run_first_output(single_node("Where", {cond, f32({1, 3}, {1, 2, 3}), f32({}, {-1})}));
  CHECK(w.shape() == Shape{2, 3});
  check_close(w, {1, 2, 3, -1, -1, -1});
}

TEST_CASE("float16 inputs compute in single precision") {
  const Tensor a = f32({3}, {1.5f, -2.0f, 4.0f}).cast(DType::Float16);
  const Tensor b = f32({3}, {0.5f, 3.0f, -1.0f}).cast(DType::Float16);
  const Tensor out = run_first_output(single_node("Max", {a, b}));
  CHECK(out.dtype() == DType::Float16);
  check_close(out.cast(DType::Float32), {1.5f, 3.0f, 4.0f});
}

TEST_CASE("errors name the problem") {
  auto r = run_single_node(single_node("Add", {f32({2}, {1, 2}), f32({3}, {1, 2, 3})}));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.status().message().find("cannot broadcast") != std::string::npos);
  auto t = run_single_node(single_node("Add", {f32({2}, {1, 2}), Tensor::from_vector<int32_t>({2}, {1, 2})}));
  REQUIRE_FALSE(t.has_value());
  CHECK(t.status().message().find("different element types") != std::string::npos);
}

TEST_CASE("unsupported element types name the node") {
  auto r = run_single_node(single_node("Sigmoid", {Tensor::from_vector<int32_t>({1}, {1})}));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.status().code() == StatusCode::Unsupported);
  CHECK(r.status().message().find("Sigmoid 'node'") != std::string::npos);
}
