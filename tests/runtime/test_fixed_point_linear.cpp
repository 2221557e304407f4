// Conv2D and MatMul: hand-computed cases, randomized comparison with "dequantize -> float op ->
// quantize" (bound: 1 LSB), fused clamps and accumulator bounds.
#include <doctest/doctest.h>

#include "qflow/runtime/isa_cap.h"
#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using qflow::Status;
using namespace qflow::fx::test;

namespace {

// The float reference of a quantized convolution: real inputs, real weights, real bias.
std::vector<int32_t> conv_reference(const Conv2DParams& p, const std::vector<int32_t>& x, const std::vector<int32_t>& w,
                                    const std::vector<int32_t>& bias, const std::vector<double>& w_scales) {
  const int64_t oh = conv_out_h(p), ow = conv_out_w(p);
  const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group;
  std::vector<int32_t> y(static_cast<size_t>(p.batch * p.out_channels * oh * ow));
  const Range r = range_of(p.output.type);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t m = 0; m < p.out_channels; ++m)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const double sw = w_scales[static_cast<size_t>(m)];
          double sum = bias.empty() ? 0.0 : p.input.scale * sw * bias[static_cast<size_t>(m)];
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < p.kernel_h; ++ky)
              for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                const int64_t iy = oy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
                const int64_t ix = ox * p.strides[1] - p.pads[1] + kx * p.dilations[1];
                if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) continue;
                const int64_t ci = (m / mg) * cg + c;
                const double xv = dequantize(x[static_cast<size_t>(((n * p.in_channels + ci) * p.in_h + iy) * p.in_w + ix)], p.input);
                const double wv = sw * w[static_cast<size_t>(((m * cg + c) * p.kernel_h + ky) * p.kernel_w + kx)];
                sum += xv * wv;
              }
          int32_t q = quantize(sum, p.output);
          q = std::clamp(q, std::max(r.min, p.clamp.min), std::min(r.max, p.clamp.max));
          y[static_cast<size_t>(((n * p.out_channels + m) * oh + oy) * ow + ox)] = q;
        }
  return y;
}

QParams random_params(std::mt19937& rng, QType type, bool symmetric) {
  QParams q;
  q.type = type;
  q.scale = random_log_uniform(rng, 1e-3, 1.0);
  const Range r = range_of(type);
  if (!symmetric) q.zero_point = std::uniform_int_distribution<int32_t>(r.min, r.max)(rng);
  return q;
}

void random_conv_case(std::mt19937& rng, QType act, QType wt, int64_t& worst) {
  std::uniform_int_distribution<int> small(1, 3);
  Conv2DParams p;
  p.batch = small(rng);
  const int64_t group = std::uniform_int_distribution<int>(0, 2)(rng);
  const int64_t cg = small(rng);
  const bool depthwise = group == 0;
  p.group = depthwise ? 3 : group;
  p.in_channels = depthwise ? 3 : p.group * cg;
  p.out_channels = p.group * small(rng);
  p.in_h = std::uniform_int_distribution<int>(4, 8)(rng);
  p.in_w = std::uniform_int_distribution<int>(4, 8)(rng);
  p.kernel_h = small(rng);
  p.kernel_w = small(rng);
  p.strides = {small(rng), small(rng)};
  p.dilations = {small(rng) == 3 ? 2 : 1, small(rng) == 3 ? 2 : 1};
  for (auto& pad : p.pads) pad = std::uniform_int_distribution<int>(0, 2)(rng);
  if (conv_out_h(p) < 1 || conv_out_w(p) < 1) p.pads = {2, 2, 2, 2};
  p.input = random_params(rng, act, rng() % 2 == 0);
  p.output = random_params(rng, act, rng() % 2 == 0);
  p.output.scale *= 20.0;
  p.weight_type = wt;
  const int64_t k = (p.in_channels / p.group) * p.kernel_h * p.kernel_w;
  const Range wr = range_of(wt);
  std::uniform_int_distribution<int32_t> wd(-wr.max, wr.max);  // symmetric weights
  std::vector<int32_t> w(static_cast<size_t>(p.out_channels * k));
  for (auto& v : w) v = wd(rng);
  std::vector<double> w_scales(static_cast<size_t>(p.out_channels));
  std::vector<int32_t> bias(static_cast<size_t>(p.out_channels));
  std::uniform_int_distribution<int32_t> bd(-100000, 100000);
  for (size_t c = 0; c < w_scales.size(); ++c) {
    w_scales[c] = random_log_uniform(rng, 1e-4, 1e-2) / (is_16bit(wt) ? 256.0 : 1.0);
    bias[c] = bd(rng);
    p.multipliers.push_back(multiplier(p.input.scale * w_scales[c] / p.output.scale));
  }
  if (rng() % 3 == 0) {  // a fused Relu6 in quantized units
    p.clamp.min = p.output.zero_point;
    p.clamp.max = p.output.zero_point + static_cast<int32_t>(std::lround(6.0 / p.output.scale));
  }
  const auto x = random_values(rng, static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w), act);
  std::vector<int32_t> y(static_cast<size_t>(p.batch * p.out_channels * conv_out_h(p) * conv_out_w(p)));
  const Status s = conv2d(p, x, w, bias, y);
  REQUIRE_MESSAGE(s.is_ok(), s.message());
  std::vector<int32_t> again(y.size());
  REQUIRE(conv2d(p, x, w, bias, again).is_ok());
  CHECK(again == y);
  worst = std::max(worst, max_abs_diff(y, conv_reference(p, x, w, bias, w_scales)));
}

}  // namespace

TEST_CASE("conv2d: hand-computed 3x3 input, 2x2 kernel, zero point, pad and bias") {
  Conv2DParams p;
  p.in_h = p.in_w = 3;
  p.kernel_h = p.kernel_w = 2;
  p.input = {0.5, 1, QType::Int8};
  p.output = {1.0, -3, QType::Int8};
  p.multipliers = {multiplier(0.5)};  // s_in * s_w / s_out with s_w = 1
  const std::vector<int32_t> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int32_t> w = {1, 0, 0, -1};
  const std::vector<int32_t> bias = {5};
  std::vector<int32_t> y(4);
  REQUIRE(conv2d(p, x, w, bias, y).is_ok());
  // acc = (x00 - 1) - (x11 - 1) + 5 = x00 - x11 + 5 = 1; 0.5 * 1 = 0.5 rounds away to 1; + zp -3.
  CHECK(y == std::vector<int32_t>{-2, -2, -2, -2});
  p.pads = {1, 1, 0, 0};  // top-left padding: the first output sees only x00 in its last tap
  std::vector<int32_t> y2(9);
  REQUIRE(conv2d(p, x, w, bias, y2).is_ok());
  // out(0,0) = -(x00 - 1) + 5 = 5 -> 2.5 -> 3 -> 0; out(1,1) = x00 - x11 + 5 = 1 -> 1 -> -2.
  CHECK(y2[0] == 0);
  CHECK(y2[4] == -2);
}

TEST_CASE("conv2d: depthwise with stride and dilation against direct sums") {
  Conv2DParams p;
  p.in_channels = p.out_channels = p.group = 2;
  p.in_h = p.in_w = 5;
  p.kernel_h = p.kernel_w = 2;
  p.strides = {2, 2};
  p.dilations = {2, 2};
  p.input = {1.0, 0, QType::Int8};
  p.output = {1.0, 0, QType::Int8};
  p.multipliers = {multiplier(1.0), multiplier(0.25)};
  std::vector<int32_t> x(50);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i) - 25;
  const std::vector<int32_t> w = {1, 1, 1, 1, 2, 0, 0, -2};
  std::vector<int32_t> y(8);
  REQUIRE(conv2d(p, x, w, {}, y).is_ok());
  // channel 0, out (0,0): x[0] + x[2] + x[10] + x[12] = -25 - 23 - 15 - 13 = -76
  CHECK(y[0] == -76);
  // channel 1, out (1,1): taps (2,2),(2,4),(4,2),(4,4) -> 2 * x[25+12] - 2 * x[25+24] = 2*12 - 2*24 = -24; /4 = -6
  CHECK(y[7] == -6);
}

TEST_CASE("conv2d: randomized against the float reference, int8 x int8, int16 x int8, int16 x int16") {
  std::mt19937 rng(10);
  for (const auto& [act, wt] : {std::pair{QType::Int8, QType::Int8}, std::pair{QType::UInt8, QType::Int8},
                                std::pair{QType::Int16, QType::Int8}, std::pair{QType::Int16, QType::Int16}}) {
    int64_t worst = 0;
    for (int i = 0; i < 150; ++i) random_conv_case(rng, act, wt, worst);
    CHECK(worst <= 1);
    MESSAGE("conv2d max |int - float reference| = " << worst << " LSB");
  }
}

TEST_CASE("conv2d equals direct integer sums, requantized, under every instruction-set cap") {
  // conv2d adds tap by tap over output rows (vectorized under the cap); the sums must be the
  // direct per-output ones: 16-bit activations with int16 and int8 weights, pads, strides,
  // dilations, groups, 1x1 planes and zero points at the ends of the type.
  struct Reset {
    ~Reset() { qflow::isa::reset_cap(); }
  } reset;
  std::mt19937 rng(12);
  const auto random_in = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    CAPTURE(trial);
    Conv2DParams p;
    p.group = trial % 3 == 0 ? 3 : 1;
    p.in_channels = 3 * random_in(1, 2);
    p.out_channels = p.group == 3 ? p.in_channels : random_in(1, 4);
    if (p.group == 3 && p.out_channels % 3 != 0) p.out_channels = 3;
    p.in_h = random_in(3, 9);
    p.in_w = random_in(3, 27);
    p.kernel_h = random_in(1, 3);
    p.kernel_w = random_in(1, 5);
    p.strides = {random_in(1, 2), random_in(1, 3)};
    p.dilations = {random_in(1, 2), random_in(1, 2)};
    p.pads = {random_in(0, 2), random_in(0, 3), random_in(0, 2), random_in(0, 3)};
    if (trial % 4 == 3) {  // 1x1, stride 1, no padding: whole planes at once
      p.kernel_h = p.kernel_w = 1;
      p.strides = {1, 1};
      p.pads = {0, 0, 0, 0};
    }
    const QType act = trial % 2 ? QType::Int16 : QType::UInt16;
    p.weight_type = trial % 4 < 2 ? QType::Int16 : QType::Int8;
    const auto zp = static_cast<int32_t>(trial % 5 == 0 ? range_of(act).min : random_in(range_of(act).min, range_of(act).max));
    p.input = {0.01, zp, act};
    p.output = {0.5, 0, QType::Int16};
    p.multipliers = {multiplier(random_log_uniform(rng, 1e-6, 1e-3))};
    if (conv_out_h(p) < 1 || conv_out_w(p) < 1) continue;
    const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group;
    const std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.in_channels * p.in_h * p.in_w), act);
    const std::vector<int32_t> w =
        random_values(rng, static_cast<size_t>(p.out_channels * cg * p.kernel_h * p.kernel_w), p.weight_type);
    std::vector<int32_t> bias(static_cast<size_t>(p.out_channels));
    for (int32_t& b : bias) b = static_cast<int32_t>(random_in(-100000, 100000));
    const int64_t oh = conv_out_h(p), ow = conv_out_w(p);
    std::vector<int32_t> want(static_cast<size_t>(p.out_channels * oh * ow));
    for (int64_t m = 0; m < p.out_channels; ++m)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t acc = bias[static_cast<size_t>(m)];
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < p.kernel_h; ++ky)
              for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                const int64_t iy = oy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
                const int64_t ix = ox * p.strides[1] - p.pads[1] + kx * p.dilations[1];
                if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) continue;
                acc += int64_t{x[static_cast<size_t>(((m / mg * cg + c) * p.in_h + iy) * p.in_w + ix)] - zp} *
                       w[static_cast<size_t>(((m * cg + c) * p.kernel_h + ky) * p.kernel_w + kx)];
              }
          want[static_cast<size_t>((m * oh + oy) * ow + ox)] = requantize(acc, p.multipliers[0], 0, -32768, 32767);
        }
    for (const qflow::isa::Level cap : {qflow::isa::Level::portable, qflow::isa::Level::avx2, qflow::isa::Level::avx512}) {
      if (!qflow::isa::cpu_has(cap)) continue;
      REQUIRE(qflow::isa::set_cap(qflow::isa::level_name(cap), "QFLOW_ISA").is_ok());
      std::vector<int32_t> y(want.size(), -1);
      REQUIRE(conv2d(p, x, w, bias, y).is_ok());
      CHECK_MESSAGE(y == want, qflow::isa::level_name(cap));
    }
  }
}

TEST_CASE("conv2d: fused clamp, argument errors, accumulator bounds") {
  Conv2DParams p;
  p.input = {1.0, 0, QType::Int8};
  p.output = {1.0, 0, QType::Int8};
  p.multipliers = {multiplier(1.0)};
  p.clamp = {0, 6};  // Relu6 with scale 1
  std::vector<int32_t> y(1);
  const std::vector<int32_t> w = {1};
  REQUIRE(conv2d(p, std::vector<int32_t>{-5}, w, {}, y).is_ok());
  CHECK(y[0] == 0);
  REQUIRE(conv2d(p, std::vector<int32_t>{9}, w, {}, y).is_ok());
  CHECK(y[0] == 6);
  p.clamp = {};
  REQUIRE(conv2d(p, std::vector<int32_t>{127}, std::vector<int32_t>{127}, {}, y).is_ok());
  CHECK(y[0] == 127);  // saturation
  CHECK_FALSE(conv2d(p, std::vector<int32_t>{128}, w, {}, y).is_ok());  // outside int8
  p.weight_type = QType::Int16;
  CHECK_FALSE(conv2d(p, std::vector<int32_t>{1}, w, {}, y).is_ok());  // int8 x int16 unsupported
  p.weight_type = QType::Int8;
  p.multipliers = {multiplier(1.0), multiplier(1.0)};
  CHECK_FALSE(conv2d(p, std::vector<int32_t>{1}, w, {}, y).is_ok());

  CHECK(max_reduction(QType::Int8, 0, QType::Int8, 0) == 131071);
  CHECK(max_reduction(QType::Int8, -128, QType::Int8, 0) == 65793);
  CHECK(max_reduction(QType::UInt8, 0, QType::Int8, 0) == 65793);
  CHECK(max_reduction(QType::Int16, 0, QType::Int16, 0) == 131071);
  CHECK(max_reduction(QType::UInt16, 0, QType::Int16, 0) == 65537);
  CHECK(max_reduction(QType::Int16, 0, QType::Int8, 0) == 33554431);
  CHECK(max_reduction(QType::UInt16, 0, QType::Int8, 0) == 16777472);
  CHECK(max_reduction(QType::Int8, 0, QType::Int8, 16384) == 131070);
  CHECK(max_reduction(QType::Int8, 0, QType::Int8, INT32_MAX) == 0);

  // A 1 x 1 convolution over 131072 channels could overflow int32: refused.
  Conv2DParams big;
  big.in_channels = 131072;
  big.input = {1.0, 0, QType::Int8};
  big.output = {1.0, 0, QType::Int8};
  big.multipliers = {multiplier(1.0)};
  std::vector<int32_t> bx(131072, -128), bw(131072, -128);
  CHECK_FALSE(conv2d(big, bx, bw, {}, y).is_ok());
  big.in_channels = 131071;
  bx.resize(131071), bw.resize(131071);
  REQUIRE(conv2d(big, bx, bw, {}, y).is_ok());  // 131071 * 16384 = 2^31 - 16384 fits
  CHECK(y[0] == 127);
}

TEST_CASE("matmul: hand case, transposed B, B zero point, randomized against float") {
  MatMulParams p;
  p.m = 2, p.k = 3, p.n = 2;
  p.a = {1.0, 0, QType::Int8};
  p.output = {1.0, 0, QType::Int8};
  p.multipliers = {multiplier(1.0), multiplier(0.5)};
  const std::vector<int32_t> a = {1, 2, 3, -1, 0, 4};
  const std::vector<int32_t> b = {1, 2, 3, 4, 5, 6};  // [3, 2]
  std::vector<int32_t> y(4);
  REQUIRE(matmul(p, a, b, std::vector<int32_t>{10, 1}, y).is_ok());
  // row 0: [1*1+2*3+3*5, 1*2+2*4+3*6] = [22, 28] + bias [10, 1] -> 32, 29 * 0.5 = 14.5 -> 15
  // row 1: [-1+0+20, -2+0+24] = [19, 22] -> 29, 23 * 0.5 = 11.5 -> 12
  CHECK(y == std::vector<int32_t>{32, 15, 29, 12});
  p.b_transposed = true;
  const std::vector<int32_t> bt = {1, 3, 5, 2, 4, 6};
  std::vector<int32_t> yt(4);
  REQUIRE(matmul(p, a, bt, std::vector<int32_t>{10, 1}, yt).is_ok());
  CHECK(yt == y);
  p.b_transposed = false;
  p.b_zero_point = 1;
  REQUIRE(matmul(p, a, b, {}, y).is_ok());
  // B - 1 = [[0,1],[2,3],[4,5]]: row 0 = [16, 22] -> [16, 11]; row 1 = [16, 19] -> [16, 9.5 -> 10]
  CHECK(y == std::vector<int32_t>{16, 11, 16, 10});

  std::mt19937 rng(11);
  for (const auto& [act, wt] : {std::pair{QType::Int8, QType::Int8}, std::pair{QType::Int16, QType::Int16}}) {
    int64_t worst = 0;
    for (int t = 0; t < 100; ++t) {
      MatMulParams q;
      q.m = std::uniform_int_distribution<int>(1, 6)(rng);
      q.k = std::uniform_int_distribution<int>(1, 64)(rng);
      q.n = std::uniform_int_distribution<int>(1, 6)(rng);
      q.b_transposed = rng() % 2 == 0;
      q.a = random_params(rng, act, false);
      q.output = random_params(rng, act, false);
      q.output.scale *= 10.0;
      q.b_type = wt;
      std::vector<double> sb(static_cast<size_t>(q.n));
      for (auto& s : sb) {
        s = random_log_uniform(rng, 1e-4, 1e-2) / (is_16bit(wt) ? 256.0 : 1.0);
        q.multipliers.push_back(multiplier(q.a.scale * s / q.output.scale));
      }
      const auto av = random_values(rng, static_cast<size_t>(q.m * q.k), act);
      auto bv = random_values(rng, static_cast<size_t>(q.k * q.n), wt);
      for (auto& v : bv) v = std::max(v, -range_of(wt).max);
      std::vector<int32_t> out(static_cast<size_t>(q.m * q.n)), ref(out.size());
      REQUIRE(matmul(q, av, bv, {}, out).is_ok());
      for (int64_t i = 0; i < q.m; ++i)
        for (int64_t j = 0; j < q.n; ++j) {
          double sum = 0.0;
          for (int64_t t2 = 0; t2 < q.k; ++t2) {
            const int32_t bq = q.b_transposed ? bv[static_cast<size_t>(j * q.k + t2)] : bv[static_cast<size_t>(t2 * q.n + j)];
            sum += dequantize(av[static_cast<size_t>(i * q.k + t2)], q.a) * sb[static_cast<size_t>(j)] * bq;
          }
          ref[static_cast<size_t>(i * q.n + j)] = quantize(sum, q.output);
        }
      worst = std::max(worst, max_abs_diff(out, ref));
    }
    CHECK(worst <= 1);
    MESSAGE("matmul max |int - float reference| = " << worst << " LSB");
  }
}

TEST_CASE("conv_transpose2d: hand case and randomized against a gather-form float reference") {
  ConvTranspose2DParams p;
  p.in_h = p.in_w = 2;
  p.kernel_h = p.kernel_w = 2;
  p.strides = {2, 2};
  p.input = {1.0, 1, QType::Int8};
  p.output = {1.0, 0, QType::Int8};
  p.multipliers = {multiplier(1.0)};
  const std::vector<int32_t> x = {2, 3, 4, 5};  // centered: 1, 2, 3, 4
  const std::vector<int32_t> w = {1, 0, 0, -1};
  std::vector<int32_t> y(16);
  REQUIRE(conv_transpose_out_h(p) == 4);
  REQUIRE(conv_transpose2d(p, x, w, std::vector<int32_t>{1}, y).is_ok());
  // Each input pixel v writes [[v, 0], [0, -v]] into its own 2x2 block, plus bias 1.
  CHECK(y == std::vector<int32_t>{2, 1, 3, 1, 1, 0, 1, -1, 4, 1, 5, 1, 1, -2, 1, -3});

  std::mt19937 rng(12);
  for (const auto& [act, wt] : {std::pair{QType::Int8, QType::Int8}, std::pair{QType::Int16, QType::Int16}}) {
    int64_t worst = 0;
    for (int t = 0; t < 100; ++t) {
      ConvTranspose2DParams q;
      std::uniform_int_distribution<int> small(1, 3);
      q.batch = small(rng);
      q.group = small(rng);
      q.in_channels = q.group * small(rng);
      q.out_channels = q.group * small(rng);
      q.in_h = small(rng) + 1, q.in_w = small(rng) + 1;
      q.kernel_h = small(rng), q.kernel_w = small(rng);
      q.strides = {small(rng), small(rng)};
      q.dilations = {small(rng) == 3 ? 2 : 1, 1};
      q.output_padding = {q.strides[0] > 1 ? 1 : 0, 0};
      q.pads = {std::uniform_int_distribution<int64_t>(0, 1)(rng), 0, 0, std::uniform_int_distribution<int64_t>(0, 1)(rng)};
      if (conv_transpose_out_h(q) < 1 || conv_transpose_out_w(q) < 1) q.pads = {0, 0, 0, 0};
      q.input = {random_log_uniform(rng, 1e-3, 1.0), std::uniform_int_distribution<int32_t>(-50, 50)(rng), act};
      q.output = {random_log_uniform(rng, 1e-2, 10.0), 3, act};
      q.weight_type = wt;
      const int64_t mg = q.out_channels / q.group, cg = q.in_channels / q.group;
      std::vector<double> sw(static_cast<size_t>(mg));
      for (auto& s : sw) s = random_log_uniform(rng, 1e-4, 1e-2) / (is_16bit(wt) ? 256.0 : 1.0);
      for (int64_t m = 0; m < q.out_channels; ++m)
        q.multipliers.push_back(multiplier(q.input.scale * sw[static_cast<size_t>(m % mg)] / q.output.scale));
      const auto xv = random_values(rng, static_cast<size_t>(q.batch * q.in_channels * q.in_h * q.in_w), act);
      auto wv = random_values(rng, static_cast<size_t>(q.in_channels * mg * q.kernel_h * q.kernel_w), wt);
      for (auto& v : wv) v = std::max(v, -range_of(wt).max);
      const int64_t oh = conv_transpose_out_h(q), ow = conv_transpose_out_w(q);
      std::vector<int32_t> out(static_cast<size_t>(q.batch * q.out_channels * oh * ow)), ref(out.size());
      const Status s = conv_transpose2d(q, xv, wv, {}, out);
      REQUIRE_MESSAGE(s.is_ok(), s.message());
      for (int64_t n = 0; n < q.batch; ++n)
        for (int64_t m = 0; m < q.out_channels; ++m)
          for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
              double sum = 0.0;
              const int64_t g = m / mg, mm = m % mg;
              for (int64_t c = 0; c < cg; ++c)
                for (int64_t ky = 0; ky < q.kernel_h; ++ky)
                  for (int64_t kx = 0; kx < q.kernel_w; ++kx) {
                    const int64_t ty = oy + q.pads[0] - ky * q.dilations[0], tx = ox + q.pads[1] - kx * q.dilations[1];
                    if (ty < 0 || tx < 0 || ty % q.strides[0] != 0 || tx % q.strides[1] != 0) continue;
                    const int64_t iy = ty / q.strides[0], ix = tx / q.strides[1];
                    if (iy >= q.in_h || ix >= q.in_w) continue;
                    const int64_t ci = g * cg + c;
                    sum += dequantize(xv[static_cast<size_t>(((n * q.in_channels + ci) * q.in_h + iy) * q.in_w + ix)], q.input) *
                           sw[static_cast<size_t>(mm)] *
                           wv[static_cast<size_t>(((ci * mg + mm) * q.kernel_h + ky) * q.kernel_w + kx)];
                  }
              ref[static_cast<size_t>(((n * q.out_channels + m) * oh + oy) * ow + ox)] = quantize(sum, q.output);
            }
      worst = std::max(worst, max_abs_diff(out, ref));
    }
    CHECK(worst <= 1);
    MESSAGE("conv_transpose2d max |int - float reference| = " << worst << " LSB");
  }
}
