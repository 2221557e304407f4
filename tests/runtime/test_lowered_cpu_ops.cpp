// The float kernels of CPU segments against hand-computed values on small inputs.
#include <cmath>
#include <cstring>
#include <random>

#include "qflow/runtime/cpu_ops.h"
#include "qflow/runtime/isa_cap.h"
#include "tests/runtime/test_lowered_common.h"

using namespace qflow::lowered;
using namespace qflow::lowered::test;

namespace {

// One input of the op under test: a model input (f32), a constant (f32 or i64) or absent (-1).
struct In {
  std::vector<int64_t> shape;
  std::vector<float> f;
  std::vector<int64_t> l;
  enum Kind { Input, ConstF32, ConstI64, Absent } kind = Input;
};
In input(std::vector<int64_t> shape, std::vector<float> v) { return In{std::move(shape), std::move(v), {}, In::Input}; }
In cf32(std::vector<int64_t> shape, std::vector<float> v) { return In{std::move(shape), std::move(v), {}, In::ConstF32}; }
In ci64(std::vector<int64_t> shape, std::vector<int64_t> v) { return In{std::move(shape), {}, std::move(v), In::ConstI64}; }
In absent() { return In{{}, {}, {}, In::Absent}; }

Model single_op(const std::string& type, const std::vector<In>& ins, const std::vector<std::vector<int64_t>>& outs,
                std::vector<Attribute> attrs) {
  Builder b;
  std::vector<int32_t> in_ids;
  for (size_t i = 0; i < ins.size(); ++i) {
    const In& x = ins[i];
    const std::string name = "in" + std::to_string(i);
    switch (x.kind) {
      case In::Input: in_ids.push_back(b.input(name, x.shape)); break;
      case In::ConstF32: in_ids.push_back(b.constant_f32(name, x.shape, x.f)); break;
      case In::ConstI64: in_ids.push_back(b.constant_ints(name, ElemType::i64, x.shape, x.l)); break;
      case In::Absent: in_ids.push_back(-1); break;
    }
  }
  std::vector<int32_t> out_ids;
  for (size_t i = 0; i < outs.size(); ++i) out_ids.push_back(b.output("out" + std::to_string(i), outs[i]));
  b.cpu(type, in_ids, out_ids, std::move(attrs));
  return b.model;
}

std::vector<std::vector<float>> feeds(const std::vector<In>& ins) {
  std::vector<std::vector<float>> f;
  for (const In& x : ins)
    if (x.kind == In::Input) f.push_back(x.f);
  return f;
}

// Runs one CPU op and returns its outputs.
std::vector<std::vector<float>> run_all(const std::string& type, const std::vector<In>& ins,
                                        const std::vector<std::vector<int64_t>>& outs, std::vector<Attribute> attrs = {}) {
  return run(single_op(type, ins, outs, std::move(attrs)), feeds(ins));
}

std::vector<float> run1(const std::string& type, const std::vector<In>& ins, std::vector<int64_t> out,
                        std::vector<Attribute> attrs = {}) {
  return run_all(type, ins, {std::move(out)}, std::move(attrs))[0];
}

std::string error1(const std::string& type, const std::vector<In>& ins, std::vector<int64_t> out,
                   std::vector<Attribute> attrs = {}) {
  return run_error(single_op(type, ins, {std::move(out)}, std::move(attrs)), feeds(ins));
}

void check_close(const std::vector<float>& got, const std::vector<double>& expected, double tol = 1e-5) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(static_cast<double>(got[i]) == doctest::Approx(expected[i]).epsilon(tol));
  }
}

const std::vector<float> kSample = {-3.0f, -0.5f, 0.0f, 0.5f, 3.0f};

}  // namespace

TEST_CASE("cpu op list: sorted, the implemented kernels, queried by name") {
  const auto& types = cpu_op_types();
  CHECK(std::is_sorted(types.begin(), types.end()));
  CHECK(types.size() == 60);
  for (const char* t : {"Relu", "Clip", "Conv", "ConvTranspose", "Resize", "Gemm", "Split", "Pad", "LSTM"}) CHECK(cpu_op_supported(t));
  CHECK_FALSE(cpu_op_supported("NonMaxSuppression"));
  CHECK_FALSE(cpu_op_supported("relu"));
}

TEST_CASE("cpu activations: Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Sqrt, Exp, Erf") {
  const std::vector<int64_t> s{5};
  check_close(run1("Relu", {input(s, kSample)}, s), {0, 0, 0, 0.5, 3});
  check_close(run1("LeakyRelu", {input(s, kSample)}, s, {floats("alpha", {0.1})}), {-0.3, -0.05, 0, 0.5, 3});
  check_close(run1("LeakyRelu", {input(s, kSample)}, s), {-0.03, -0.005, 0, 0.5, 3});
  check_close(run1("Sigmoid", {input(s, kSample)}, s),
              {0.04742587317756678, 0.3775406687981454, 0.5, 0.6224593312018546, 0.9525741268224334});
  check_close(run1("Tanh", {input(s, kSample)}, s),
              {-0.9950547536867305, -0.46211715726000974, 0, 0.46211715726000974, 0.9950547536867305});
  // max(0, min(1, 0.5 x + 0.25))
  check_close(run1("HardSigmoid", {input(s, kSample)}, s, {floats("alpha", {0.5}), floats("beta", {0.25})}),
              {0, 0, 0.25, 0.5, 1});
  check_close(run1("HardSigmoid", {input(s, kSample)}, s), {0, 0.4, 0.5, 0.6, 1});
  // x * max(0, min(1, x / 6 + 0.5))
  check_close(run1("HardSwish", {input(s, kSample)}, s), {0, -0.5 * (0.5 - 0.5 / 6), 0, 0.5 * (0.5 + 0.5 / 6), 3});
  check_close(run1("Sqrt", {input({3}, {0, 4, 2.25})}, {3}), {0, 2, 1.5});
  check_close(run1("Exp", {input({3}, {0, 1, -2})}, {3}), {1, 2.718281828459045, 0.1353352832366127});
  check_close(run1("Erf", {input({3}, {0, 0.5, -1})}, {3}), {0, 0.5204998778130465, -0.8427007929497149});
  CHECK(contains(error1("Relu", {input({5}, kSample)}, {4}), "cpu.Relu 'n0': produces shape [5]"));
}

TEST_CASE("cpu Clip: bounds from constant inputs, from attributes, one bound absent") {
  const std::vector<int64_t> s{5};
  check_close(run1("Clip", {input(s, kSample), cf32({}, {-1}), cf32({}, {0.25})}, s), {-1, -0.5, 0, 0.25, 0.25});
  check_close(run1("Clip", {input(s, kSample), absent(), cf32({}, {0.25})}, s), {-3, -0.5, 0, 0.25, 0.25});
  check_close(run1("Clip", {input(s, kSample), cf32({}, {0})}, s), {0, 0, 0, 0.5, 3});
  check_close(run1("Clip", {input(s, kSample)}, s, {floats("max", {6}), floats("min", {-0.4})}), {-0.4, -0.4, 0, 0.5, 3});
}

TEST_CASE("cpu Add, Sub, Mul, Div, Pow broadcast like numpy") {
  const In a = input({2, 3}, {1, 2, 3, 4, 5, 6});
  check_close(run1("Add", {a, cf32({3}, {10, 20, 30})}, {2, 3}), {11, 22, 33, 14, 25, 36});
  // [2, 1] - [1, 3] -> [2, 3]
  check_close(run1("Sub", {input({2, 1}, {1, 2}), input({1, 3}, {10, 20, 30})}, {2, 3}), {-9, -19, -29, -8, -18, -28});
  check_close(run1("Mul", {a, cf32({2, 1}, {2, -1})}, {2, 3}), {2, 4, 6, -4, -5, -6});
  check_close(run1("Div", {a, cf32({}, {4})}, {2, 3}), {0.25, 0.5, 0.75, 1, 1.25, 1.5});
  check_close(run1("Pow", {a, cf32({}, {2})}, {2, 3}), {1, 4, 9, 16, 25, 36});
  check_close(run1("Pow", {input({3}, {4, 9, 2}), cf32({3}, {0.5, 0.5, 3})}, {3}), {2, 3, 8});
  check_close(run1("Pow", {input({2}, {2, 3}), ci64({1}, {3})}, {2}), {8, 27});
  CHECK(contains(error1("Add", {a, cf32({2}, {1, 2})}, {2, 3}), "do not broadcast"));
}

TEST_CASE("cpu Softmax over the given axis (opset 13)") {
  const In x = input({2, 3}, {1, 2, 3, 1, 1, 1});
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  check_close(run1("Softmax", {x}, {2, 3}), {e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  check_close(run1("Softmax", {x}, {2, 3}, {ints("axis", {-1})}), {e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  // axis 0: columns (1, 1), (2, 1), (3, 1)
  const double a = 1.0 / (1 + std::exp(-1.0)), b = 1.0 / (1 + std::exp(-2.0));
  check_close(run1("Softmax", {x}, {2, 3}, {ints("axis", {0})}), {0.5, a, b, 0.5, 1 - a, 1 - b});
}

TEST_CASE("cpu Flatten, Reshape, Squeeze, Unsqueeze, Identity keep the data, Transpose permutes") {
  const std::vector<float> v{1, 2, 3, 4, 5, 6};
  const std::vector<double> d{1, 2, 3, 4, 5, 6};
  check_close(run1("Flatten", {input({1, 2, 3}, v)}, {1, 6}, {ints("axis", {1})}), d);
  check_close(run1("Reshape", {input({2, 3}, v), ci64({2}, {3, -1})}, {3, 2}), d);
  check_close(run1("Squeeze", {input({1, 6, 1}, v), ci64({2}, {0, 2})}, {6}), d);
  check_close(run1("Unsqueeze", {input({6}, v)}, {1, 6}, {ints("axes", {0})}), d);
  check_close(run1("Identity", {input({2, 3}, v)}, {2, 3}), d);
  CHECK(contains(error1("Reshape", {input({2, 3}, v)}, {7}), "differ in element count"));
  check_close(run1("Transpose", {input({2, 3}, v)}, {3, 2}), {1, 4, 2, 5, 3, 6});
  // [1, 2, 3] perm (2, 0, 1) -> [3, 1, 2]
  check_close(run1("Transpose", {input({1, 2, 3}, v)}, {3, 1, 2}, {ints("perm", {2, 0, 1})}), {1, 4, 2, 5, 3, 6});
}

TEST_CASE("cpu Concat and Split along an axis") {
  check_close(run1("Concat", {input({2, 1}, {1, 2}), cf32({2, 2}, {3, 4, 5, 6})}, {2, 3}, {ints("axis", {1})}),
              {1, 3, 4, 2, 5, 6});
  check_close(run1("Concat", {input({1, 2}, {1, 2}), input({2, 2}, {3, 4, 5, 6})}, {3, 2}, {ints("axis", {-2})}),
              {1, 2, 3, 4, 5, 6});
  const auto parts = run_all("Split", {input({2, 3}, {1, 2, 3, 4, 5, 6})}, {{2, 1}, {2, 2}}, {ints("axis", {1})});
  check_close(parts[0], {1, 4});
  check_close(parts[1], {2, 3, 5, 6});
  const auto rows = run_all("Split", {input({3, 2}, {1, 2, 3, 4, 5, 6}), ci64({2}, {2, 1})}, {{2, 2}, {1, 2}});
  check_close(rows[0], {1, 2, 3, 4});
  check_close(rows[1], {5, 6});
}

TEST_CASE("cpu Gemm (alpha, beta, transA, transB) and batched MatMul") {
  const In a = input({2, 3}, {1, 2, 3, 4, 5, 6});
  // B^T given as [N=2, K=3]
  const In bt = cf32({2, 3}, {1, 0, 1, 0, 1, 0});
  // A B = [[1+3, 2], [4+6, 5]] = [[4, 2], [10, 5]]; 2 * AB + 0.5 * [1, -2]
  check_close(run1("Gemm", {a, bt, cf32({2}, {1, -2})}, {2, 2},
                   {floats("alpha", {2.0}), floats("beta", {0.5}), ints("transB", {1})}),
              {8.5, 3, 20.5, 9});
  // transA: A given as [K=2, M=2]
  check_close(run1("Gemm", {input({2, 2}, {1, 2, 3, 4}), cf32({2, 2}, {1, 0, 0, 1})}, {2, 2}, {ints("transA", {1})}),
              {1, 3, 2, 4});
  // MatMul [2, 2, 3] x [3, 2] (B shared across the batch)
  const In b = cf32({3, 2}, {1, 0, 0, 1, 1, 1});
  check_close(run1("MatMul", {input({2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0}), b}, {2, 2, 2}),
              {4, 5, 10, 11, 1, 1, 1, 0});
  // vector x matrix
  check_close(run1("MatMul", {input({3}, {1, 2, 3}), b}, {2}), {4, 5});
  // [2, 1, 2] x [1, 2, 1] -> [2, 1, 1] with broadcast batches
  check_close(run1("MatMul", {input({2, 1, 2}, {1, 2, 3, 4}), cf32({1, 2, 1}, {10, 1})}, {2, 1, 1}), {12, 34});
  CHECK(contains(error1("MatMul", {input({2, 3}, {1, 2, 3, 4, 5, 6}), b}, {2, 3}), "produces shape [2, 2]"));
}

TEST_CASE("cpu Conv: strides, pads, groups, bias") {
  const std::vector<float> x9{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const In w = cf32({1, 1, 2, 2}, {1, 0, 0, 1});
  check_close(run1("Conv", {input({1, 1, 3, 3}, x9), w}, {1, 1, 2, 2}), {6, 8, 12, 14});
  check_close(run1("Conv", {input({1, 1, 3, 3}, x9), w}, {1, 1, 2, 2}, {ints("pads", {1, 1, 1, 1}), ints("strides", {2, 2})}),
              {1, 3, 7, 14});
  // two groups: channel 0 with the diagonal kernel, channel 1 (all ones) with a ones kernel; bias
  std::vector<float> x2 = x9;
  x2.insert(x2.end(), 9, 1.0f);
  check_close(run1("Conv", {input({1, 2, 3, 3}, x2), cf32({2, 1, 2, 2}, {1, 0, 0, 1, 1, 1, 1, 1}), cf32({2}, {0.5, -1})},
                   {1, 2, 2, 2}, {ints("group", {2})}),
              {6.5, 8.5, 12.5, 14.5, 3, 3, 3, 3});
  // dilation 2 on a 3x3 input with a 2x2 kernel: one output, x[0][0] + x[2][2]
  check_close(run1("Conv", {input({1, 1, 3, 3}, x9), w}, {1, 1, 1, 1}, {ints("dilations", {2, 2})}), {10});
  // SAME_UPPER keeps the size: pads (0, 0, 1, 1)
  check_close(run1("Conv", {input({1, 1, 3, 3}, x9), w}, {1, 1, 3, 3}, {strings("auto_pad", {"SAME_UPPER"})}),
              {6, 8, 3, 12, 14, 6, 7, 8, 9});
  CHECK(contains(error1("Conv", {input({1, 1, 3, 3}, x9), w}, {1, 1, 3, 3}), "produces shape [1, 1, 2, 2]"));
}

TEST_CASE("cpu Conv 1x1 and padded, strided ones give the scalar chain's bits under every instruction-set cap") {
  // Bias, then + w * x per input channel in turn, each product rounded: outputs in blocks of
  // 6, pixels in vector blocks and a tail (35 pixels), and taps that fall into the padding.
  struct Reset {
    ~Reset() { qflow::isa::reset_cap(); }
  } reset;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  const int64_t c = 13, m = 14, h = 5, w = 7;
  std::vector<float> x(static_cast<size_t>(c * h * w)), wt(static_cast<size_t>(m * c)), b(static_cast<size_t>(m)),
      w3(static_cast<size_t>(m * c * 9));
  for (std::vector<float>* v : {&x, &wt, &b, &w3})
    for (float& e : *v) e = dist(rng);
  std::vector<float> want(static_cast<size_t>(m * h * w));
  for (int64_t o = 0; o < m; ++o)
    for (int64_t i = 0; i < h * w; ++i) {
      float acc = b[static_cast<size_t>(o)];
      for (int64_t k = 0; k < c; ++k) {
        const volatile float product = wt[static_cast<size_t>(o * c + k)] * x[static_cast<size_t>(k * h * w + i)];
        acc = acc + product;
      }
      want[static_cast<size_t>(o * h * w + i)] = acc;
    }
  // 3x3, pads 1 and 2, stride 2 along W: the padded taps are skipped, not added as zeros.
  const int64_t oh = 5, ow = 5;
  std::vector<float> want3(static_cast<size_t>(m * oh * ow));
  for (int64_t o = 0; o < m; ++o)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        float acc = 0.0f;
        for (int64_t k = 0; k < c; ++k)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = oy - 1 + ky, ix = ox * 2 - 2 + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              const volatile float product =
                  w3[static_cast<size_t>(((o * c + k) * 3 + ky) * 3 + kx)] * x[static_cast<size_t>((k * h + iy) * w + ix)];
              acc = acc + product;
            }
        want3[static_cast<size_t>((o * oh + oy) * ow + ox)] = acc;
      }
  for (const qflow::isa::Level cap : {qflow::isa::Level::portable, qflow::isa::Level::avx2, qflow::isa::Level::avx512}) {
    if (!qflow::isa::cpu_has(cap)) continue;
    REQUIRE(qflow::isa::set_cap(qflow::isa::level_name(cap), "QFLOW_ISA").is_ok());
    CAPTURE(qflow::isa::level_name(cap));
    const std::vector<float> got = run1("Conv", {input({1, c, h, w}, x), cf32({m, c, 1, 1}, wt), cf32({m}, b)}, {1, m, h, w});
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    const std::vector<float> got3 = run1("Conv", {input({1, c, h, w}, x), cf32({m, c, 3, 3}, w3)}, {1, m, oh, ow},
                                         {ints("pads", {1, 2, 1, 2}), ints("strides", {1, 2})});
    CHECK(std::memcmp(got3.data(), want3.data(), want3.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("cpu MatMul sums exact double products in k order under every instruction-set cap") {
  // Column blocks of 4 vectors, of 1 vector and a scalar tail (45 columns), rows of a batch
  // sharing B: each output is float(sum over p in order of double(a) * double(b)).
  struct Reset {
    ~Reset() { qflow::isa::reset_cap(); }
  } reset;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  const int64_t batch = 2, m = 3, k = 17, n = 45;
  std::vector<float> a(static_cast<size_t>(batch * m * k)), b(static_cast<size_t>(k * n));
  for (std::vector<float>* v : {&a, &b})
    for (float& e : *v) e = dist(rng);
  std::vector<float> want(static_cast<size_t>(batch * m * n));
  for (int64_t r = 0; r < batch * m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const volatile double product =
            static_cast<double>(a[static_cast<size_t>(r * k + p)]) * static_cast<double>(b[static_cast<size_t>(p * n + j)]);
        sum = sum + product;
      }
      want[static_cast<size_t>(r * n + j)] = static_cast<float>(sum);
    }
  for (const qflow::isa::Level cap : {qflow::isa::Level::portable, qflow::isa::Level::avx2, qflow::isa::Level::avx512}) {
    if (!qflow::isa::cpu_has(cap)) continue;
    REQUIRE(qflow::isa::set_cap(qflow::isa::level_name(cap), "QFLOW_ISA").is_ok());
    CAPTURE(qflow::isa::level_name(cap));
    const std::vector<float> got = run1("MatMul", {input({batch, m, k}, a), cf32({k, n}, b)}, {batch, m, n});
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("cpu ConvTranspose: strides, pads, output shape") {
  const In x = input({1, 1, 2, 2}, {1, 2, 3, 4});
  const In w = cf32({1, 1, 2, 2}, {1, 1, 1, 1});
  check_close(run1("ConvTranspose", {x, w}, {1, 1, 3, 3}), {1, 3, 2, 4, 10, 6, 3, 7, 4});
  check_close(run1("ConvTranspose", {x, w}, {1, 1, 4, 4}, {ints("strides", {2, 2})}),
              {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // pads crop the full 3x3 result to its center
  check_close(run1("ConvTranspose", {x, w, cf32({1}, {0.5})}, {1, 1, 1, 1}, {ints("pads", {1, 1, 1, 1})}), {10.5});
  // two output channels from one input channel
  check_close(run1("ConvTranspose", {input({1, 1, 1, 1}, {2}), cf32({1, 2, 1, 1}, {3, -1})}, {1, 2, 1, 1}), {6, -2});
}

TEST_CASE("cpu MaxPool, AveragePool (count_include_pad), GlobalAveragePool") {
  const In x = input({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const std::vector<Attribute> geo{ints("kernel_shape", {2, 2}), ints("pads", {1, 1, 1, 1}), ints("strides", {2, 2})};
  check_close(run1("MaxPool", {x}, {1, 1, 2, 2}, geo), {1, 3, 7, 9});
  check_close(run1("AveragePool", {x}, {1, 1, 2, 2}, geo), {1, 2.5, 5.5, 7});
  auto incl = geo;
  incl.push_back(ints("count_include_pad", {1}));
  check_close(run1("AveragePool", {x}, {1, 1, 2, 2}, incl), {0.25, 1.25, 2.75, 7});
  check_close(run1("MaxPool", {x}, {1, 1, 2, 2}, {ints("kernel_shape", {2, 2})}), {5, 6, 8, 9});
  // ceil_mode: 3x3 input, kernel 2, stride 2 -> 2x2 with partial windows
  check_close(run1("MaxPool", {x}, {1, 1, 2, 2}, {ints("ceil_mode", {1}), ints("kernel_shape", {2, 2}), ints("strides", {2, 2})}),
              {5, 6, 8, 9});
  check_close(run1("GlobalAveragePool", {input({1, 2, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 8})}, {1, 2, 1, 1}), {2.5, 2});
}

TEST_CASE("cpu Resize: nearest and linear, coordinate modes, sizes from the output") {
  // nearest asymmetric floor: every pixel doubled
  check_close(run1("Resize", {input({1, 1, 2, 2}, {1, 2, 3, 4}), absent(), cf32({4}, {1, 1, 2, 2})}, {1, 1, 4, 4},
                   {strings("coordinate_transformation_mode", {"asymmetric"}), strings("mode", {"nearest"}),
                    strings("nearest_mode", {"floor"})}),
              {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // linear half_pixel on one axis: positions -0.25, 0.25, 0.75, 1.25 clamped to [0, 1]
  check_close(run1("Resize", {input({1, 1, 1, 2}, {0, 1}), absent(), absent(), ci64({4}, {1, 1, 1, 4})}, {1, 1, 1, 4},
                   {strings("mode", {"linear"})}),
              {0, 0.25, 0.75, 1});
  // align_corners: 2 -> 3 gives the midpoint
  check_close(run1("Resize", {input({1, 1, 2, 2}, {0, 2, 4, 6})}, {1, 1, 3, 3},
                   {strings("coordinate_transformation_mode", {"align_corners"}), strings("mode", {"linear"})}),
              {0, 1, 2, 2, 3, 4, 4, 5, 6});
  // nearest half_pixel round_prefer_floor, 3 -> 2: positions 0.25, 1.75 -> indices 0, 2
  check_close(run1("Resize", {input({1, 1, 1, 3}, {10, 20, 30})}, {1, 1, 1, 2}), {10, 30});
  // opset-10 form (X, scales) defaults to asymmetric: 2 -> 4 nearest gives 0, 0, 1, 1
  check_close(run1("Resize", {input({1, 1, 1, 2}, {5, 7}), cf32({4}, {1, 1, 1, 2})}, {1, 1, 1, 4}), {5, 5, 7, 7});
  CHECK(contains(error1("Resize", {input({1, 1, 1, 2}, {5, 7})}, {1, 1, 1, 4}, {strings("mode", {"cubic"})}),
                 "mode 'cubic' is not supported"));
}

TEST_CASE("cpu Slice with constant starts, ends, axes and steps (negative steps too)") {
  const In x = input({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  check_close(run1("Slice", {x, ci64({2}, {0, 1}), ci64({2}, {1, 3})}, {1, 2}), {1, 2});
  check_close(run1("Slice", {x, ci64({1}, {-1}), ci64({1}, {INT64_MAX}), ci64({1}, {1})}, {2, 1}), {3, 7});
  check_close(run1("Slice", {x, ci64({1}, {0}), ci64({1}, {4}), ci64({1}, {1}), ci64({1}, {2})}, {2, 2}), {0, 2, 4, 6});
  // reverse the columns
  check_close(run1("Slice", {x, ci64({1}, {-1}), ci64({1}, {INT64_MIN}), ci64({1}, {1}), ci64({1}, {-1})}, {2, 4}),
              {3, 2, 1, 0, 7, 6, 5, 4});
  check_close(run1("Slice", {x}, {1, 4}, {ints("axes", {0}), ints("ends", {2}), ints("starts", {1})}), {4, 5, 6, 7});
}

TEST_CASE("cpu ReduceMean and LayerNormalization") {
  const In x = input({2, 3}, {1, 2, 3, 4, 5, 6});
  check_close(run1("ReduceMean", {x}, {2, 1}, {ints("axes", {1})}), {2, 5});
  check_close(run1("ReduceMean", {x}, {3}, {ints("axes", {0}), ints("keepdims", {0})}), {2.5, 3.5, 4.5});
  check_close(run1("ReduceMean", {x, ci64({1}, {-1})}, {2}, {ints("keepdims", {0})}), {2, 5});
  check_close(run1("ReduceMean", {x}, {1, 1}), {3.5});
  // rows (1, 2, 3, 4): mean 2.5, variance 1.25
  const double inv = 1.0 / std::sqrt(1.25 + 1e-5);
  check_close(run1("LayerNormalization", {input({1, 4}, {1, 2, 3, 4}), cf32({4}, {1, 1, 2, 1}), cf32({4}, {0, 0, 0, 1})},
                   {1, 4}),
              {-1.5 * inv, -0.5 * inv, 2 * 0.5 * inv, 1.5 * inv + 1});
  // axis 0 over a [2, 2] tensor: one group of 4
  check_close(run1("LayerNormalization", {input({2, 2}, {1, 2, 3, 4}), cf32({2, 2}, {1, 1, 1, 1})}, {2, 2}, {ints("axis", {0})}),
              {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv});
}

TEST_CASE("cpu Gather, Cast, Pad") {
  const In x = input({2, 3}, {1, 2, 3, 4, 5, 6});
  check_close(run1("Gather", {x, ci64({2}, {2, -3})}, {2, 2}, {ints("axis", {1})}), {3, 1, 6, 4});
  check_close(run1("Gather", {x, ci64({}, {1})}, {3}), {4, 5, 6});
  CHECK(contains(error1("Gather", {x, ci64({1}, {3})}, {1, 3}), "index 3 is out of range"));

  // Cast f32 -> i64 (truncation) -> f32
  Builder b;
  const int32_t in = b.input("x", {4});
  const int32_t mid = b.tensor("mid", ElemType::i64, {4});
  const int32_t out = b.output("y", {4});
  b.cpu("Cast", {in}, {mid}, {ints("to", {7})});
  b.cpu("Cast", {mid}, {out}, {ints("to", {1})});
  check_close(run(b.model, {{1.7f, -1.7f, 0.2f, 100.0f}})[0], {1, -1, 0, 100});

  check_close(run1("Pad", {input({2, 2}, {1, 2, 3, 4}), ci64({4}, {0, 1, 1, 0}), cf32({}, {9})}, {3, 3}),
              {9, 1, 2, 9, 3, 4, 9, 9, 9});
  check_close(run1("Pad", {input({1, 3}, {1, 2, 3}), ci64({4}, {0, 2, 0, 2})}, {1, 7}, {strings("mode", {"reflect"})}),
              {3, 2, 1, 2, 3, 2, 1});
  check_close(run1("Pad", {input({1, 3}, {1, 2, 3}), ci64({4}, {0, 2, 0, 1})}, {1, 6}, {strings("mode", {"edge"})}),
              {1, 1, 1, 2, 3, 3});
  // opset-2 form: pads and value as attributes
  check_close(run1("Pad", {input({2}, {1, 2})}, {4}, {ints("pads", {1, 1}), floats("value", {-1})}), {-1, 1, 2, -1});
}

TEST_CASE("cpu segments between BPU segments: quantize -> dequantize -> cpu.Relu -> quantize -> dequantize") {
  Builder b;
  const Quant q{0.5, 0};
  const int32_t x = b.input("x", {4});
  const int32_t xq = b.tensor("xq", ElemType::i8, {4}, q);
  const int32_t xf = b.tensor("xf", ElemType::f32, {4});
  const int32_t r = b.tensor("r", ElemType::f32, {4});
  const int32_t rq = b.tensor("rq", ElemType::i8, {4}, q);
  const int32_t out = b.output("out", {4});
  b.bpu("quantize", {x}, {xq});
  b.bpu("dequantize", {xq}, {xf});
  b.cpu("Relu", {xf}, {r});
  b.bpu("quantize", {r}, {rq});
  b.bpu("dequantize", {rq}, {out});
  REQUIRE(b.model.segments.size() == 3);
  // 1.25 and -0.75 are ties at scale 0.5: round half to even gives 1.0 and -1.0
  check_close(run(b.model, {{1.25f, -0.75f, 100.0f, 0.3f}})[0], {1.0, 0, 63.5, 0.5});
}

TEST_CASE("cpu ops accept absent optional outputs (-1)") {
  Builder b;
  const int32_t x = b.input("x", {1, 1, 2, 2});
  const int32_t y = b.output("y", {1, 1, 1, 1});
  b.cpu("MaxPool", {x}, {y, -1}, {ints("kernel_shape", {2, 2})});
  check_close(run(b.model, {{1, 4, 3, 2}})[0], {4});

  Builder c;
  const int32_t xi = c.input("x", {1, 4});
  const int32_t scale = c.constant_f32("scale", {4}, {1, 1, 1, 1});
  const int32_t yo = c.output("y", {1, 4});
  const int32_t inv = c.output("inv", {1, 1});
  c.cpu("LayerNormalization", {xi, scale}, {yo, -1, inv});
  const auto outs = run(c.model, {{1, 2, 3, 4}});
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);
  check_close(outs[0], {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r});
  check_close(outs[1], {r});

  Builder d;
  const int32_t xd = d.input("x", {2});
  const int32_t yd = d.output("y", {2});
  d.cpu("Relu", {xd}, {-1, yd});
  CHECK(contains(validate(d.model).message(), "output index -1 is out of range"));
}

TEST_CASE("cpu 1-D Conv, ConvTranspose, MaxPool, AveragePool run as H = 1") {
  check_close(run1("Conv", {input({1, 1, 5}, {1, 2, 3, 4, 5}), cf32({1, 1, 2}, {1, 1})}, {1, 1, 3},
                   {ints("pads", {1, 0}), ints("strides", {2})}),
              {1, 5, 9});
  check_close(run1("ConvTranspose", {input({1, 1, 2}, {1, 2}), cf32({1, 1, 2}, {1, 1})}, {1, 1, 4}, {ints("strides", {2})}),
              {1, 1, 2, 2});
  const In x = input({1, 1, 5}, {1, 3, 2, 5, 4});
  check_close(run1("MaxPool", {x}, {1, 1, 2}, {ints("kernel_shape", {2}), ints("strides", {2})}), {3, 5});
  check_close(run1("AveragePool", {x}, {1, 1, 5}, {ints("kernel_shape", {3}), ints("pads", {1, 1})}),
              {2, 2, 10.0 / 3, 11.0 / 3, 4.5});
  CHECK(contains(error1("Conv", {input({1, 1, 5}, {1, 2, 3, 4, 5}), cf32({1, 1, 2}, {1, 1})}, {1, 1, 3}), "produces shape [1, 1, 4]"));
}

TEST_CASE("cpu Abs, Neg, Log, Reciprocal, Floor, Ceil, Elu, Selu, Softplus, Gelu, Dropout, PRelu") {
  const std::vector<int64_t> s{5};
  check_close(run1("Abs", {input(s, kSample)}, s), {3, 0.5, 0, 0.5, 3});
  check_close(run1("Neg", {input(s, kSample)}, s), {3, 0.5, 0, -0.5, -3});
  check_close(run1("Log", {input({2}, {1, 2.718281828459045f})}, {2}), {0, 1});
  check_close(run1("Reciprocal", {input({2}, {4, -0.5})}, {2}), {0.25, -2});
  check_close(run1("Floor", {input(s, kSample)}, s), {-3, -1, 0, 0, 3});
  check_close(run1("Ceil", {input(s, kSample)}, s), {-3, 0, 0, 1, 3});
  check_close(run1("Elu", {input(s, kSample)}, s, {floats("alpha", {2.0})}),
              {2 * (std::exp(-3.0) - 1), 2 * (std::exp(-0.5) - 1), 0, 0.5, 3});
  const double sa = 1.67326319217681884765625, sg = 1.05070102214813232421875;
  check_close(run1("Selu", {input({2}, {-1, 2})}, {2}), {sg * sa * (std::exp(-1.0) - 1), sg * 2});
  check_close(run1("Softplus", {input({3}, {0, 2, -30})}, {3}), {std::log(2.0), std::log(1 + std::exp(2.0)), std::exp(-30.0)});
  // GELU(1) = 0.5 (1 + erf(1 / sqrt 2)) = 0.8413447460685429
  check_close(run1("Gelu", {input({3}, {1, 0, -1})}, {3}), {0.8413447460685429, 0, -0.15865525393145707});
  check_close(run1("Gelu", {input({1}, {1})}, {1}, {strings("approximate", {"tanh"})}), {0.8411919906082768});
  check_close(run1("Dropout", {input(s, kSample)}, s, {floats("ratio", {0.5})}), {-3, -0.5, 0, 0.5, 3});
  // PRelu with a per-channel slope [2, 1, 1] on [1, 2, 1, 2]
  check_close(run1("PRelu", {input({1, 2, 1, 2}, {-1, 2, -3, 4}), cf32({2, 1, 1}, {0.5, 0.25})}, {1, 2, 1, 2}),
              {-0.5, 2, -0.75, 4});
}

TEST_CASE("cpu BatchNormalization, ReduceSum, ReduceMax, ReduceMin, Max, Min") {
  // y = scale * (x - mean) / sqrt(var + eps) + B per channel
  check_close(run1("BatchNormalization",
                   {input({1, 2, 2}, {1, 3, 10, 20}), cf32({2}, {2, 1}), cf32({2}, {0, 5}), cf32({2}, {2, 10}), cf32({2}, {4, 1})},
                   {1, 2, 2}, {floats("epsilon", {0.0})}),
              {-1, 1, 5, 15});
  const In x = input({2, 3}, {1, 5, 3, 4, 2, 6});
  check_close(run1("ReduceSum", {x, ci64({1}, {1})}, {2, 1}), {9, 12});
  check_close(run1("ReduceMax", {x}, {3}, {ints("axes", {0}), ints("keepdims", {0})}), {4, 5, 6});
  check_close(run1("ReduceMin", {x}, {1, 1}), {1});
  check_close(run1("Max", {x, cf32({3}, {2, 2, 2}), cf32({}, {4.5})}, {2, 3}), {4.5, 5, 4.5, 4.5, 4.5, 6});
  check_close(run1("Min", {x, cf32({2, 1}, {2, 5})}, {2, 3}), {1, 2, 2, 4, 2, 5});
}

TEST_CASE("cpu Shape, Expand, Tile") {
  Builder b;
  const int32_t x = b.input("x", {2, 3, 4});
  const int32_t shape = b.tensor("shape", ElemType::i64, {2});
  const int32_t out = b.output("out", {2});
  b.cpu("Shape", {x}, {shape}, {ints("start", {1})});
  b.cpu("Cast", {shape}, {out}, {ints("to", {1})});
  check_close(run(b.model, {std::vector<float>(24, 0.0f)})[0], {3, 4});

  check_close(run1("Expand", {input({3, 1}, {1, 2, 3}), ci64({3}, {2, 1, 2})}, {2, 3, 2}),
              {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(contains(error1("Expand", {input({3, 1}, {1, 2, 3}), ci64({2}, {1, 2})}, {3, 3}), "produces shape [3, 2]"));
  check_close(run1("Tile", {input({2, 2}, {1, 2, 3, 4}), ci64({2}, {1, 2})}, {2, 4}), {1, 2, 1, 2, 3, 4, 3, 4});
}
