// Quantization kernels against hand-computed values: rounding, saturation, per-axis, int16, QLinear ops.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "framework/interpreter/kernel_isa.h"
#include "qflow/runtime/isa_cap.h"
#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_single_node;
using qflow::testing::SingleNode;

namespace {

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  REQUIRE(t.dtype() == dtype_of_v<T>);
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

Tensor run_one(const SingleNode& spec) {
  auto out = run_single_node(spec);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return out->at(0);
}

// Deterministic small integers for the reference comparisons.
struct Lcg {
  uint32_t state = 12345;
  int next(int lo, int hi) {
    state = state * 1664525u + 1013904223u;
    return lo + static_cast<int>((state >> 8) % static_cast<uint32_t>(hi - lo + 1));
  }
};

// Direct-loop 2-D integer convolution, the definition ConvInteger must match.
template <typename X, typename W>
std::vector<int32_t> reference_conv2d(const std::vector<X>& x, const Shape& xs, int32_t xz,
                                      const std::vector<W>& w, const Shape& ws, const std::vector<int32_t>& wz,
                                      int64_t group, const Shape& strides, const Shape& dilations, const Shape& pads,
                                      const Shape& out_hw) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], m = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  const int64_t mg = m / group, oh = out_hw[0], ow = out_hw[1];
  std::vector<int32_t> y(static_cast<std::size_t>(n * m * oh * ow), 0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int32_t acc = 0;
          const int64_t g = oc / mg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t yy = i * strides[0] - pads[0] + p * dilations[0];
                const int64_t xx = j * strides[1] - pads[1] + q * dilations[1];
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                const int32_t xv = x[static_cast<std::size_t>(((b * c + g * cg + ic) * h + yy) * wd + xx)] - xz;
                const int32_t wv = w[static_cast<std::size_t>(((oc * cg + ic) * kh + p) * kw + q)] -
                                   wz[wz.size() == 1 ? 0 : static_cast<std::size_t>(oc)];
                acc += xv * wv;
              }
          y[static_cast<std::size_t>(((b * m + oc) * oh + i) * ow + j)] = acc;
        }
  return y;
}

// Direct-loop integer matmul, the definition MatMulInteger must match.
template <typename A, typename B>
std::vector<int32_t> reference_matmul(const std::vector<A>& a, int32_t za, const std::vector<B>& b, int32_t zb,
                                      int64_t m, int64_t k, int64_t n) {
  std::vector<int32_t> c(static_cast<std::size_t>(m * n), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[static_cast<std::size_t>(i * n + j)] +=
            (a[static_cast<std::size_t>(i * k + p)] - za) * (b[static_cast<std::size_t>(p * n + j)] - zb);
  return c;
}

}  // namespace

TEST_CASE("QuantizeLinear rounds half to even before adding the zero point") {
  SingleNode spec;
  spec.op_type = "QuantizeLinear";
  spec.inputs = {Tensor::from_vector<float>({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.4f, 3.6f}),
                 Tensor::scalar<float>(1.0f), Tensor::scalar<int8_t>(0)};
  CHECK(values_of<int8_t>(run_one(spec)) == std::vector<int8_t>{0, 2, 2, 0, -2, -2, 3, 4});

  // x / scale lands on .5 exactly; the zero point is added after rounding.
  spec.inputs = {Tensor::from_vector<float>({3}, {1.0f, 3.0f, 5.0f}), Tensor::scalar<float>(2.0f),
                 Tensor::scalar<uint8_t>(11)};
  CHECK(values_of<uint8_t>(run_one(spec)) == std::vector<uint8_t>{11, 13, 13});
}

TEST_CASE("QuantizeLinear saturates and defaults to uint8 without a zero point") {
  SingleNode spec;
  spec.op_type = "QuantizeLinear";
  spec.inputs = {Tensor::from_vector<float>({3}, {-200.0f, 200.0f, 127.5f}), Tensor::scalar<float>(1.0f),
                 Tensor::scalar<uint8_t>(128)};
  CHECK(values_of<uint8_t>(run_one(spec)) == std::vector<uint8_t>{0, 255, 255});

  spec.inputs = {Tensor::from_vector<float>({3}, {-1000.0f, 1000.0f, -128.4f}), Tensor::scalar<float>(1.0f),
                 Tensor::scalar<int8_t>(0)};
  CHECK(values_of<int8_t>(run_one(spec)) == std::vector<int8_t>{-128, 127, -128});

  spec.inputs = {Tensor::from_vector<float>({3}, {-3.0f, 6.0f, 1000.0f}), Tensor::scalar<float>(2.0f)};
  CHECK(values_of<uint8_t>(run_one(spec)) == std::vector<uint8_t>{0, 3, 255});
}

TEST_CASE("QuantizeLinear and DequantizeLinear per axis") {
  SingleNode q;
  q.op_type = "QuantizeLinear";
  q.inputs = {Tensor::from_vector<float>({2, 3}, {1, 2, 4, -3, 5, -8}), Tensor::from_vector<float>({3}, {1, 2, 4}),
              Tensor::from_vector<int8_t>({3}, {0, 10, -5})};
  const Tensor quantized = run_one(q);
  CHECK(values_of<int8_t>(quantized) == std::vector<int8_t>{1, 11, -4, -3, 12, -7});

  SingleNode dq;
  dq.op_type = "DequantizeLinear";
  dq.inputs = {quantized, q.inputs[1], q.inputs[2]};
  CHECK(values_of<float>(run_one(dq)) == std::vector<float>{1, 2, 4, -3, 4, -8});

  // Explicit axis 0 and a negative axis that names the same dimension.
  q.inputs = {Tensor::from_vector<float>({2, 2}, {1, 2, 15, 25}), Tensor::from_vector<float>({2}, {1, 10}),
              Tensor::from_vector<uint8_t>({2}, {0, 100})};
  for (int64_t axis : {0, -2}) {
    q.attributes = {Attribute::make_int("axis", axis)};
    CHECK(values_of<uint8_t>(run_one(q)) == std::vector<uint8_t>{1, 2, 102, 102});
  }

  // Per-axis parameters must match the axis length.
  q.attributes = {Attribute::make_int("axis", 1)};
  q.inputs[1] = Tensor::from_vector<float>({3}, {1, 2, 3});
  q.inputs[2] = Tensor::from_vector<uint8_t>({3}, {0, 0, 0});
  auto bad = run_single_node(q);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().message().find("axis 1") != std::string::npos);

  // Opset 10 knows only per-tensor parameters.
  q.opset = 10;
  q.attributes.clear();
  q.inputs = {Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4}), Tensor::from_vector<float>({2}, {1, 2}),
              Tensor::from_vector<uint8_t>({2}, {0, 0})};
  CHECK_FALSE(run_single_node(q).has_value());
}

TEST_CASE("DequantizeLinear per tensor, int32 and without zero point") {
  SingleNode dq;
  dq.op_type = "DequantizeLinear";
  dq.inputs = {Tensor::from_vector<uint8_t>({4}, {0, 3, 128, 255}), Tensor::scalar<float>(0.5f),
               Tensor::scalar<uint8_t>(128)};
  CHECK(values_of<float>(run_one(dq)) == std::vector<float>{-64.0f, -62.5f, 0.0f, 63.5f});

  dq.inputs = {Tensor::from_vector<int32_t>({3}, {-5, 7, 100000}), Tensor::scalar<float>(0.5f)};
  CHECK(values_of<float>(run_one(dq)) == std::vector<float>{-2.5f, 3.5f, 50000.0f});

  // The zero point must have the input's type.
  dq.inputs = {Tensor::from_vector<uint8_t>({1}, {3}), Tensor::scalar<float>(1.0f), Tensor::scalar<int8_t>(1)};
  CHECK_FALSE(run_single_node(dq).has_value());
}

TEST_CASE("QuantizeLinear and DequantizeLinear with int16 and uint16") {
  SingleNode q;
  q.op_type = "QuantizeLinear";
  q.inputs = {Tensor::from_vector<float>({4}, {0.25f, 0.75f, 20000.0f, -20000.0f}), Tensor::scalar<float>(0.5f),
              Tensor::scalar<int16_t>(1000)};
  CHECK(values_of<int16_t>(run_one(q)) == std::vector<int16_t>{1000, 1002, 32767, -32768});

  q.inputs = {Tensor::from_vector<float>({4}, {-1.0f, 70000.0f, 32768.5f, 32769.5f}), Tensor::scalar<float>(1.0f),
              Tensor::scalar<uint16_t>(0)};
  CHECK(values_of<uint16_t>(run_one(q)) == std::vector<uint16_t>{0, 65535, 32768, 32770});

  SingleNode dq;
  dq.op_type = "DequantizeLinear";
  dq.inputs = {Tensor::from_vector<int16_t>({3}, {1000, 1002, -32768}), Tensor::scalar<float>(0.5f),
               Tensor::scalar<int16_t>(1000)};
  CHECK(values_of<float>(run_one(dq)) == std::vector<float>{0.0f, 1.0f, -16884.0f});

  dq.inputs = {Tensor::from_vector<uint16_t>({2}, {65535, 0}), Tensor::scalar<float>(2.0f),
               Tensor::scalar<uint16_t>(32768)};
  CHECK(values_of<float>(run_one(dq)) == std::vector<float>{65534.0f, -65536.0f});
}

TEST_CASE("DynamicQuantizeLinear extends the range to zero") {
  SingleNode spec;
  spec.op_type = "DynamicQuantizeLinear";
  spec.outputs = 3;
  spec.inputs = {Tensor::from_vector<float>({4}, {-0.5f, 0.0f, 1.0f, 2.0f})};
  auto out = run_single_node(spec);
  REQUIRE(out.has_value());
  CHECK(out->at(1).data<float>()[0] == doctest::Approx(2.5 / 255.0).epsilon(1e-6));
  CHECK(values_of<uint8_t>(out->at(2)) == std::vector<uint8_t>{51});
  CHECK(values_of<uint8_t>(out->at(0)) == std::vector<uint8_t>{0, 51, 153, 255});

  // All positive: the minimum becomes 0 and so does the zero point.
  spec.inputs = {Tensor::from_vector<float>({2}, {0.5f, 2.0f})};
  out = run_single_node(spec);
  REQUIRE(out.has_value());
  CHECK(out->at(1).data<float>()[0] == 2.0f / 255.0f);
  CHECK(values_of<uint8_t>(out->at(2)) == std::vector<uint8_t>{0});
  CHECK(values_of<uint8_t>(out->at(0)) == std::vector<uint8_t>{64, 255});

  // Range [0, 63.75]: scale 0.25 exactly, so x / scale lands on halves, which go to even;
  // NaN quantizes to the zero point. 4096 values exercise the split over threads.
  std::vector<float> x(4096, 0.0f);
  x[0] = 63.75f, x[1] = 0.125f, x[2] = 0.375f, x[3] = 0.625f, x[4] = std::nanf("");
  spec.inputs = {Tensor::from_vector<float>({4096}, x)};
  spec.threads = 2;
  out = run_single_node(spec);
  REQUIRE(out.has_value());
  CHECK(out->at(1).data<float>()[0] == 0.25f);
  const std::vector<uint8_t> q = values_of<uint8_t>(out->at(0));
  CHECK(std::vector<uint8_t>(q.begin(), q.begin() + 6) == std::vector<uint8_t>{255, 0, 2, 2, 0, 0});
}

TEST_CASE("QLinearConv per output channel with bias and half-to-even requantization") {
  // x' = x - 1 = [[0,1,2],[3,4,5],[6,7,8]].
  // Channel 0: w' = [[1,0],[0,1]], acc = [4,6,10,12] + 2, multiplier 0.5*1/0.5 = 1 -> +10.
  // Channel 1: w' = all ones, acc = [8,12,20,24] - 2, multiplier 0.5*0.25/0.5 = 0.25:
  //   1.5 -> 2, 2.5 -> 2, 4.5 -> 4, 5.5 -> 6, then +10.
  SingleNode spec;
  spec.op_type = "QLinearConv";
  spec.inputs = {Tensor::from_vector<uint8_t>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                 Tensor::scalar<float>(0.5f),
                 Tensor::scalar<uint8_t>(1),
                 Tensor::from_vector<uint8_t>({2, 1, 2, 2}, {1, 0, 0, 1, 3, 3, 3, 3}),
                 Tensor::from_vector<float>({2}, {1.0f, 0.25f}),
                 Tensor::from_vector<uint8_t>({2}, {0, 2}),
                 Tensor::scalar<float>(0.5f),
                 Tensor::scalar<uint8_t>(10),
                 Tensor::from_vector<int32_t>({2}, {2, -2})};
  const Tensor y = run_one(spec);
  CHECK(y.shape() == Shape{1, 2, 2, 2});
  CHECK(values_of<uint8_t>(y) == std::vector<uint8_t>{16, 18, 22, 24, 12, 12, 14, 16});

  // Parameters bound as initializers and two threads give the same bytes.
  spec.constant_inputs = {false, true, true, true, true, true, true, true, true};
  spec.threads = 2;
  CHECK(run_one(spec).bitwise_equal(y));
}

TEST_CASE("QLinearConv int8 with padding saturates") {
  // x' = x (zp 0), w = 100 everywhere, pads 1: the centre sums all nine 1s -> 900 * 1 -> 127.
  SingleNode spec;
  spec.op_type = "QLinearConv";
  spec.inputs = {Tensor::from_vector<int8_t>({1, 1, 3, 3}, std::vector<int8_t>(9, 1)),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<int8_t>(0),
                 Tensor::from_vector<int8_t>({1, 1, 3, 3}, std::vector<int8_t>(9, 100)),
                 Tensor::scalar<float>(0.01f),
                 Tensor::scalar<int8_t>(0),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<int8_t>(-100)};
  spec.attributes = {Attribute::make_ints("pads", {1, 1, 1, 1})};
  // Corner sees 4 ones: 400 * 0.01 = 4 -> -96; edge 6 -> -94; centre 9 -> -91.
  CHECK(values_of<int8_t>(run_one(spec)) == std::vector<int8_t>{-96, -94, -96, -94, -91, -94, -96, -94, -96});
  spec.inputs[6] = Tensor::scalar<float>(0.01f);
  CHECK(values_of<int8_t>(run_one(spec)) == std::vector<int8_t>{127, 127, 127, 127, 127, 127, 127, 127, 127});
}

TEST_CASE("ConvInteger matches a direct loop with groups, strides, dilations and padding") {
  Lcg rng;
  const Shape xs{2, 4, 7, 6}, ws{6, 2, 3, 2};
  std::vector<int8_t> x(static_cast<std::size_t>(shape_numel(xs))), w(static_cast<std::size_t>(shape_numel(ws)));
  for (auto& v : x) v = static_cast<int8_t>(rng.next(-128, 127));
  for (auto& v : w) v = static_cast<int8_t>(rng.next(-128, 127));
  const std::vector<int8_t> wz = {3, -7, 0, 12, -128, 127};
  SingleNode spec;
  spec.op_type = "ConvInteger";
  spec.inputs = {Tensor::from_vector<int8_t>(xs, x), Tensor::from_vector<int8_t>(ws, w), Tensor::scalar<int8_t>(-5),
                 Tensor::from_vector<int8_t>({6}, wz)};
  spec.attributes = {Attribute::make_int("group", 2), Attribute::make_ints("strides", {2, 1}),
                     Attribute::make_ints("dilations", {1, 2}), Attribute::make_ints("pads", {1, 2, 0, 1})};
  // Output: H = (7 + 1 - 3) / 2 + 1 = 3, W = (6 + 3 - 3) / 1 + 1 = 7.
  const std::vector<int32_t> wz32(wz.begin(), wz.end());
  const auto expected = reference_conv2d(x, xs, -5, w, ws, wz32, 2, {2, 1}, {1, 2}, {1, 2}, {3, 7});
  for (int threads : {1, 2}) {
    spec.threads = threads;
    const Tensor y = run_one(spec);
    CHECK(y.shape() == Shape{2, 6, 3, 7});
    CHECK(values_of<int32_t>(y) == expected);
  }

  spec.attributes = {Attribute::make_int("group", 2), Attribute::make_ints("strides", {2, 2}),
                     Attribute::make_string("auto_pad", "SAME_UPPER")};
  // H: out 4, total = (4-1)*2 + 3 - 7 = 2 -> pads 1/1. W: out 3, total = (3-1)*2 + 2 - 6 = 0.
  const auto same = reference_conv2d(x, xs, -5, w, ws, wz32, 2, {2, 2}, {1, 1}, {1, 0}, {4, 3});
  const Tensor y = run_one(spec);
  CHECK(y.shape() == Shape{2, 6, 4, 3});
  CHECK(values_of<int32_t>(y) == same);
}

TEST_CASE("ConvInteger uint8 over several column blocks and a ragged last block") {
  // 20 x 29 = 580 output pixels: blocks of 256, 256 and 68 columns; uint8 x and w.
  Lcg rng;
  const Shape xs{1, 3, 20, 29}, ws{5, 3, 3, 3};
  std::vector<uint8_t> x(static_cast<std::size_t>(shape_numel(xs))), w(static_cast<std::size_t>(shape_numel(ws)));
  for (auto& v : x) v = static_cast<uint8_t>(rng.next(0, 255));
  for (auto& v : w) v = static_cast<uint8_t>(rng.next(0, 255));
  SingleNode spec;
  spec.op_type = "ConvInteger";
  spec.inputs = {Tensor::from_vector<uint8_t>(xs, x), Tensor::from_vector<uint8_t>(ws, w), Tensor::scalar<uint8_t>(131),
                 Tensor::scalar<uint8_t>(7)};
  spec.attributes = {Attribute::make_ints("pads", {1, 1, 1, 1})};
  const auto expected = reference_conv2d(x, xs, 131, w, ws, {7}, 1, {1, 1}, {1, 1}, {1, 1}, {20, 29});
  for (int threads : {1, 2}) {
    spec.threads = threads;
    const Tensor y = run_one(spec);
    CHECK(y.shape() == Shape{1, 5, 20, 29});
    CHECK(values_of<int32_t>(y) == expected);
  }
}

TEST_CASE("ConvInteger pointwise and without zero points") {
  // 1x1 kernel: each output channel is a weighted sum of the input channels.
  SingleNode spec;
  spec.op_type = "ConvInteger";
  spec.inputs = {Tensor::from_vector<uint8_t>({1, 2, 1, 3}, {1, 2, 3, 10, 20, 30}),
                 Tensor::from_vector<uint8_t>({2, 2, 1, 1}, {1, 1, 2, 0})};
  CHECK(values_of<int32_t>(run_one(spec)) == std::vector<int32_t>{11, 22, 33, 2, 4, 6});
}

TEST_CASE("MatMulInteger with per-row and per-column zero points") {
  // A' = [[0,1,2],[1,2,3]], B' = [[1,0],[3,2],[5,4]].
  SingleNode spec;
  spec.op_type = "MatMulInteger";
  spec.inputs = {Tensor::from_vector<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6}),
                 Tensor::from_vector<uint8_t>({3, 2}, {1, 2, 3, 4, 5, 6}), Tensor::from_vector<uint8_t>({2}, {1, 3}),
                 Tensor::from_vector<uint8_t>({2}, {0, 2})};
  const Tensor y = run_one(spec);
  CHECK(y.shape() == Shape{2, 2});
  CHECK(values_of<int32_t>(y) == std::vector<int32_t>{13, 10, 22, 16});

  // A 1-element zero point is per tensor.
  spec.inputs[2] = Tensor::from_vector<uint8_t>({1}, {1});
  spec.inputs[3] = Tensor();
  CHECK(values_of<int32_t>(run_one(spec)) == std::vector<int32_t>{13, 16, 40, 52});

  // 1-D A drops the row dimension.
  spec.inputs = {Tensor::from_vector<uint8_t>({3}, {1, 2, 3}), Tensor::from_vector<uint8_t>({3, 2}, {1, 2, 3, 4, 5, 6}),
                 Tensor::scalar<uint8_t>(1)};
  const Tensor v = run_one(spec);
  CHECK(v.shape() == Shape{2});
  CHECK(values_of<int32_t>(v) == std::vector<int32_t>{13, 16});

  // Batch broadcasting with int8.
  spec.inputs = {Tensor::from_vector<int8_t>({2, 1, 2}, {1, -1, 2, 3}),
                 Tensor::from_vector<int8_t>({2, 2}, {1, 2, 3, 4})};
  const Tensor b = run_one(spec);
  CHECK(b.shape() == Shape{2, 1, 2});
  CHECK(values_of<int32_t>(b) == std::vector<int32_t>{-2, -2, 11, 16});

  // A per-row zero point with the wrong length is refused.
  spec.inputs = {Tensor::from_vector<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6}),
                 Tensor::from_vector<uint8_t>({3, 2}, {1, 2, 3, 4, 5, 6}),
                 Tensor::from_vector<uint8_t>({3}, {1, 2, 3})};
  CHECK_FALSE(run_single_node(spec).has_value());
}

TEST_CASE("MatMulInteger over several row and column blocks with zero points on both sides") {
  // 300 rows and 600 columns: blocks of 256 and a ragged rest on both sides (whichever side
  // the CPU's kernel tiles); int8 A and uint8 B, each with a zero point; k not a multiple of 4.
  Lcg rng;
  const int64_t m = 300, k = 41, n = 600;
  std::vector<int8_t> a(static_cast<std::size_t>(m * k));
  std::vector<uint8_t> b(static_cast<std::size_t>(k * n));
  for (auto& v : a) v = static_cast<int8_t>(rng.next(-128, 127));
  for (auto& v : b) v = static_cast<uint8_t>(rng.next(0, 255));
  const std::vector<int32_t> expected = reference_matmul(a, -7, b, 200, m, k, n);
  SingleNode spec;
  spec.op_type = "MatMulInteger";
  spec.inputs = {Tensor::from_vector<int8_t>({m, k}, a), Tensor::from_vector<uint8_t>({k, n}, b),
                 Tensor::scalar<int8_t>(-7), Tensor::scalar<uint8_t>(200)};
  for (int threads : {1, 2}) {
    spec.threads = threads;
    CHECK(values_of<int32_t>(run_one(spec)) == expected);
  }
  // B and its zero point as initializers: packed once when the kernel is made, as byte quads
  // on VNNI CPUs and as int16 rows below them (each cap this CPU has), A also with a batch axis.
  spec.constant_inputs = {false, true, false, true};
  struct CapGuard {
    ~CapGuard() { reset_kernel_isa_cap(); }
  } guard;
  for (const isa::Level level : {isa::Level::portable, isa::Level::avx2, isa::Level::avxvnni, isa::Level::avx512}) {
    if (!isa::cpu_has(level)) continue;
    REQUIRE(set_kernel_isa_cap(isa::level_name(level), "--isa").is_ok());
    INFO("cap ", isa::level_name(level));
    spec.inputs[0] = Tensor::from_vector<int8_t>({m, k}, a);
    CHECK(values_of<int32_t>(run_one(spec)) == expected);
    std::vector<int8_t> twice = a;
    twice.insert(twice.end(), a.begin(), a.end());
    spec.inputs[0] = Tensor::from_vector<int8_t>({2, m, k}, twice);
    std::vector<int32_t> expected_twice = expected;
    expected_twice.insert(expected_twice.end(), expected.begin(), expected.end());
    CHECK(values_of<int32_t>(run_one(spec)) == expected_twice);
  }
}

TEST_CASE("MatMulInteger exact int32 accumulation on a larger product") {
  Lcg rng;
  const int64_t m = 7, k = 300, n = 9;
  std::vector<uint8_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  for (auto& v : a) v = static_cast<uint8_t>(rng.next(0, 255));
  for (auto& v : b) v = static_cast<uint8_t>(rng.next(0, 255));
  const std::vector<int32_t> expected = reference_matmul(a, 0, b, 128, m, k, n);
  SingleNode spec;
  spec.op_type = "MatMulInteger";
  spec.inputs = {Tensor::from_vector<uint8_t>({m, k}, a), Tensor::from_vector<uint8_t>({k, n}, b), Tensor(),
                 Tensor::scalar<uint8_t>(128)};
  spec.threads = 2;
  CHECK(values_of<int32_t>(run_one(spec)) == expected);
}

TEST_CASE("QLinearMatMul with per-column b and half-to-even requantization") {
  // a' = [0, 10]; acc = [30, 40]; multipliers 0.5*1/2 = 0.25 and 0.5*0.5/2 = 0.125:
  // 7.5 -> 8 -> 13, 5 -> 10.
  SingleNode spec;
  spec.op_type = "QLinearMatMul";
  spec.inputs = {Tensor::from_vector<uint8_t>({1, 2}, {10, 20}),
                 Tensor::scalar<float>(0.5f),
                 Tensor::scalar<uint8_t>(10),
                 Tensor::from_vector<int8_t>({2, 2}, {1, 2, 3, 4}),
                 Tensor::from_vector<float>({2}, {1.0f, 0.5f}),
                 Tensor::from_vector<int8_t>({2}, {0, 0}),
                 Tensor::scalar<float>(2.0f),
                 Tensor::scalar<uint8_t>(5)};
  CHECK(values_of<uint8_t>(run_one(spec)) == std::vector<uint8_t>{13, 10});

  // Per-tensor int8 output that saturates at both ends.
  spec.inputs = {Tensor::from_vector<int8_t>({2, 1}, {100, -100}),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<int8_t>(0),
                 Tensor::from_vector<int8_t>({1, 1}, {100}),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<int8_t>(0),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<int8_t>(0)};
  CHECK(values_of<int8_t>(run_one(spec)) == std::vector<int8_t>{127, -128});
}

TEST_CASE("Integer convs refuse malformed parameters with a message naming the node") {
  SingleNode spec;
  spec.op_type = "QLinearConv";
  spec.inputs = {Tensor::from_vector<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4}),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<int8_t>(0),
                 Tensor::from_vector<uint8_t>({1, 1, 1, 1}, {1}),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<uint8_t>(0),
                 Tensor::scalar<float>(1.0f),
                 Tensor::scalar<uint8_t>(0)};
  auto out = run_single_node(spec);
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().message().find("QLinearConv 'node'") != std::string::npos);
  CHECK(out.status().message().find("x_zero_point type int8") != std::string::npos);

  spec.inputs[2] = Tensor::scalar<uint8_t>(0);
  spec.inputs.push_back(Tensor::from_vector<int32_t>({2}, {1, 2}));
  out = run_single_node(spec);
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().message().find("bias") != std::string::npos);

  spec.inputs.pop_back();
  spec.inputs[3] = Tensor::from_vector<uint8_t>({1, 1}, {1});
  CHECK_FALSE(run_single_node(spec).has_value());

  SingleNode ci;
  ci.op_type = "ConvInteger";
  ci.inputs = {Tensor::from_vector<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4}),
               Tensor::from_vector<uint8_t>({1, 1, 3, 3}, std::vector<uint8_t>(9, 1))};
  out = run_single_node(ci);
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().message().find("window") != std::string::npos);
}
