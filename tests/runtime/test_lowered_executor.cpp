// The lowered-model executor's integer ops: each equals the direct qflow::fx call, conv2d
// stays within 1 LSB of the float reference, broadcasting equals a hand-expanded call, the
// quantized-input path equals the float path, and bad inputs are refused with a message.
#include <cmath>
#include <random>
#include <thread>

#include "tests/runtime/test_lowered_common.h"

using namespace qflow::lowered;
using qflow::Status;
using namespace qflow::lowered::test;
namespace fx = qflow::fx;

namespace {

std::vector<int64_t> random_ints(std::mt19937& rng, size_t n, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<int32_t> narrow(const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

Value quantized_value(ElemType type, std::vector<int64_t> shape, std::vector<int32_t> ints) {
  Value v;
  v.type = type;
  v.shape = std::move(shape);
  v.ints.assign(ints.begin(), ints.end());
  return v;
}

// Runs with (possibly quantized) input values and maps output 0 back to integers of `out`.
std::vector<int32_t> run_ints(const Model& model, const std::vector<Value>& inputs, const fx::QParams& out) {
  auto ex = Executor::create(model);
  REQUIRE_MESSAGE(ex.has_value(), ex.message());
  std::vector<std::vector<float>> outputs;
  const Status s = ex->run_values(inputs, outputs);
  REQUIRE_MESSAGE(s.is_ok(), s.message());
  REQUIRE(outputs.size() >= 1);
  std::vector<int32_t> q(outputs[0].size());
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = static_cast<int32_t>(std::lround(static_cast<double>(outputs[0][i]) / out.scale)) + out.zero_point;
  return q;
}

// input f32 -> quantize (type, quant) -> [the op under test] -> y (ytype, yquant) -> dequantize.
struct Chain {
  Builder b;
  std::vector<int32_t> quantized;  // the quantize ops' outputs
  int32_t y = -1;
};

int32_t quantized_input(Chain& c, const std::string& name, ElemType type, std::vector<int64_t> shape, Quant q) {
  const int32_t x = c.b.input(name, shape);
  const int32_t xq = c.b.tensor(name + "_q", type, shape, q);
  c.b.bpu("quantize", {x}, {xq});
  c.quantized.push_back(xq);
  return xq;
}

void finish(Chain& c, std::vector<int64_t> shape) {
  const int32_t out = c.b.output("out", shape);
  c.b.bpu("dequantize", {c.y}, {out});
}

}  // namespace

TEST_CASE("lowered conv2d equals fx::conv2d and stays within 1 LSB of the float reference") {
  struct Case {
    int64_t c, m, group, k, stride;
    std::vector<int64_t> pads;
    ElemType xt;
  };
  const std::vector<Case> cases = {{3, 4, 1, 3, 2, {1, 1, 1, 1}, ElemType::i8},
                                   {4, 4, 4, 3, 1, {0, 1, 2, 1}, ElemType::u8},
                                   {4, 6, 2, 2, 1, {1, 0, 0, 1}, ElemType::i16}};
  std::mt19937 rng(7);
  for (const Case& cs : cases) {
    CAPTURE(cs.group);
    const Quant qx{0.05, cs.xt == ElemType::u8 ? 128 : (cs.xt == ElemType::i8 ? 3 : 0)};
    const Quant qy{0.1, cs.xt == ElemType::u8 ? 100 : -5};
    const ElemType yt = cs.xt == ElemType::u8 ? ElemType::u8 : cs.xt;
    const std::vector<int64_t> xs{1, cs.c, 6, 5};
    const std::vector<int64_t> ws{cs.m, cs.c / cs.group, cs.k, cs.k};
    const auto wn = static_cast<size_t>(ws[0] * ws[1] * ws[2] * ws[3]);
    const std::vector<int64_t> w = random_ints(rng, wn, -127, 127);
    const std::vector<int64_t> bias = random_ints(rng, static_cast<size_t>(cs.m), -2000, 2000);
    std::vector<double> sw(static_cast<size_t>(cs.m));
    std::vector<fx::Multiplier> mults;
    for (size_t i = 0; i < sw.size(); ++i) {
      sw[i] = 0.002 * static_cast<double>(i + 1);
      mults.push_back(make_mult(qx.scale * sw[i] / qy.scale));
    }
    fx::Conv2DParams p;
    p.batch = 1;
    p.in_channels = cs.c;
    p.in_h = 6;
    p.in_w = 5;
    p.out_channels = cs.m;
    p.kernel_h = p.kernel_w = cs.k;
    p.group = cs.group;
    p.strides = {cs.stride, cs.stride};
    p.pads = {cs.pads[0], cs.pads[1], cs.pads[2], cs.pads[3]};
    p.input = qp(cs.xt, qx);
    p.output = qp(yt, qy);
    p.multipliers = mults;
    const int64_t oh = fx::conv_out_h(p), ow = fx::conv_out_w(p);
    const std::vector<int64_t> ys{1, cs.m, oh, ow};

    Chain c;
    const int32_t xq = quantized_input(c, "x", cs.xt, xs, qx);
    const int32_t wt = c.b.constant_ints("w", ElemType::i8, ws, w, Quant{0.01, 0});
    const int32_t bt = c.b.constant_ints("b", ElemType::i32, {cs.m}, bias);
    c.y = c.b.tensor("y", yt, ys, qy);
    std::vector<int64_t> mm, ms;
    for (const auto& m : mults) {
      mm.push_back(m.mantissa);
      ms.push_back(m.shift);
    }
    const fx::Range r = fx::range_of(qtype_of(yt));
    c.b.bpu("conv2d", {xq, wt, bt}, {c.y},
            {ints("group", {cs.group}), ints("strides", {cs.stride, cs.stride}), ints("pads", cs.pads),
             ints("dilations", {1, 1}), ints("multiplier_mantissa", mm), ints("multiplier_shift", ms),
             ints("clamp", {r.min, r.max})});
    finish(c, ys);

    // Float input: real values in the input's range, quantized by the model's quantize op.
    const fx::Range rx = fx::range_of(qtype_of(cs.xt));
    std::vector<float> xf(static_cast<size_t>(xs[1] * 30));
    std::uniform_real_distribution<double> d(qx.scale * (rx.min - qx.zero_point), qx.scale * (rx.max - qx.zero_point));
    for (auto& v : xf) v = static_cast<float>(d(rng));
    std::vector<int32_t> xq_values(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) xq_values[i] = fx::quantize(static_cast<double>(xf[i]), p.input);

    std::vector<int32_t> expected(static_cast<size_t>(cs.m * oh * ow));
    REQUIRE(fx::conv2d(p, xq_values, narrow(w), narrow(bias), expected).is_ok());
    Value in;
    in.type = ElemType::f32;
    in.floats = xf;
    const std::vector<int32_t> got = run_ints(c.b.model, {in}, p.output);
    CHECK(got == expected);

    // Float reference: dequantize -> float conv in double -> quantize.
    const int64_t cg = cs.c / cs.group, mg = cs.m / cs.group;
    int64_t worst = 0;
    for (int64_t m = 0; m < cs.m; ++m)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = qx.scale * sw[static_cast<size_t>(m)] * static_cast<double>(bias[static_cast<size_t>(m)]);
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < cs.k; ++ky)
              for (int64_t kx = 0; kx < cs.k; ++kx) {
                const int64_t iy = oy * cs.stride - cs.pads[0] + ky, ix = ox * cs.stride - cs.pads[1] + kx;
                if (iy < 0 || iy >= 6 || ix < 0 || ix >= 5) continue;
                const int64_t ch = (m / mg) * cg + ci;
                const double xv = fx::dequantize(xq_values[static_cast<size_t>((ch * 6 + iy) * 5 + ix)], p.input);
                sum += xv * sw[static_cast<size_t>(m)] * static_cast<double>(w[static_cast<size_t>(((m * cg + ci) * cs.k + ky) * cs.k + kx)]);
              }
          const int32_t ref = fx::quantize(sum, p.output);
          worst = std::max<int64_t>(worst, std::llabs(int64_t{ref} - got[static_cast<size_t>((m * oh + oy) * ow + ox)]));
        }
    CHECK(worst <= 1);
  }
}

TEST_CASE("lowered add, sub and mul broadcast like a hand-expanded fx call") {
  const Quant qa{0.04, 128}, qb{0.03, -3}, qy{0.05, 2};
  const fx::QParams pa = qp(ElemType::u8, qa), pb = qp(ElemType::i8, qb), py = qp(ElemType::i8, qy);
  std::mt19937 rng(3);
  const std::vector<int32_t> a = narrow(random_ints(rng, 24, 0, 255));      // [2, 3, 4]
  const std::vector<int32_t> bsmall = narrow(random_ints(rng, 3, -128, 127));  // [3, 1]
  std::vector<int32_t> bfull(24);
  for (size_t n = 0; n < 2; ++n)
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < 4; ++j) bfull[(n * 3 + i) * 4 + j] = bsmall[i];

  for (const std::string type : {"add", "sub", "mul"}) {
    CAPTURE(type);
    Chain c;
    const int32_t at = quantized_input(c, "a", ElemType::u8, {2, 3, 4}, qa);
    const int32_t bt = quantized_input(c, "b", ElemType::i8, {3, 1}, qb);
    c.y = c.b.tensor("y", ElemType::i8, {2, 3, 4}, qy);
    std::vector<int32_t> expected(24);
    if (type == "mul") {
      fx::MulParams p;
      REQUIRE(fx::make_mul_params(pa, pb, py, p).is_ok());
      p.clamp = {-100, 100};
      REQUIRE(fx::mul(p, a, bfull, expected).is_ok());
      c.b.bpu("mul", {at, bt}, {c.y}, {multiplier("multiplier", p.multiplier), ints("clamp", {-100, 100})});
    } else {
      fx::AddParams p;
      REQUIRE(fx::make_add_params(pa, pb, py, type == "sub", p).is_ok());
      REQUIRE(fx::add(p, a, bfull, expected).is_ok());
      c.b.bpu(type, {at, bt}, {c.y},
              {ints("left_shift", {p.left_shift}), multiplier("a_multiplier", p.a_multiplier),
               multiplier("b_multiplier", p.b_multiplier), multiplier("output_multiplier", p.output_multiplier),
               ints("clamp", {-128, 127})});
    }
    finish(c, {2, 3, 4});
    const auto got = run_ints(c.b.model,
                              {quantized_value(ElemType::u8, {2, 3, 4}, a), quantized_value(ElemType::i8, {3, 1}, bsmall)}, py);
    CHECK(got == expected);
  }
}

TEST_CASE("lowered matmul: constant B, transposed B and activation B equal fx::matmul per batch") {
  const Quant qa{0.02, 5}, qy{0.08, -1};
  const fx::QParams pa = qp(ElemType::i8, qa), py = qp(ElemType::i8, qy);
  std::mt19937 rng(11);
  const std::vector<int32_t> a = narrow(random_ints(rng, 2 * 3 * 4, -128, 127));  // [2, 3, 4]
  const std::vector<int64_t> w = random_ints(rng, 4 * 5, -127, 127);
  const std::vector<int64_t> bias = random_ints(rng, 5, -500, 500);
  const fx::Multiplier m = make_mult(0.02 * 0.01 / 0.08);

  for (const bool transposed : {false, true}) {
    CAPTURE(transposed);
    // [K, N] or [N, K]
    std::vector<int64_t> wl = w;
    if (transposed)
      for (size_t k = 0; k < 4; ++k)
        for (size_t n = 0; n < 5; ++n) wl[n * 4 + k] = w[k * 5 + n];
    Chain c;
    const int32_t at = quantized_input(c, "a", ElemType::i8, {2, 3, 4}, qa);
    const int32_t wt = c.b.constant_ints("w", ElemType::i8, transposed ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{4, 5}, wl);
    const int32_t bt = c.b.constant_ints("bias", ElemType::i32, {5}, bias);
    c.y = c.b.tensor("y", ElemType::i8, {2, 3, 5}, qy);
    c.b.bpu("matmul", {at, wt, bt}, {c.y},
            {ints("b_transposed", {transposed ? 1 : 0}), ints("multiplier_mantissa", {m.mantissa}),
             ints("multiplier_shift", {m.shift}), ints("clamp", {-128, 127})});
    finish(c, {2, 3, 5});
    fx::MatMulParams p;
    p.m = 3;
    p.k = 4;
    p.n = 5;
    p.b_transposed = transposed;
    p.a = pa;
    p.output = py;
    p.multipliers = {m};
    std::vector<int32_t> expected(30);
    const auto wv = narrow(wl), bv = narrow(bias);
    for (size_t i = 0; i < 2; ++i)
      REQUIRE(fx::matmul(p, std::span(a).subspan(i * 12, 12), wv, bv, std::span(expected).subspan(i * 15, 15)).is_ok());
    CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, {2, 3, 4}, a)}, py) == expected);
  }

  // activation x activation: B [2, 4, 5] with its own zero point
  const Quant qb{0.03, 4};
  const std::vector<int32_t> b = narrow(random_ints(rng, 40, -128, 127));
  Chain c;
  const int32_t at = quantized_input(c, "a", ElemType::i8, {2, 3, 4}, qa);
  const int32_t bt = quantized_input(c, "b", ElemType::i8, {2, 4, 5}, qb);
  c.y = c.b.tensor("y", ElemType::i8, {2, 3, 5}, qy);
  const fx::Multiplier mb = make_mult(0.02 * 0.03 / 0.08);
  c.b.bpu("matmul", {at, bt, -1}, {c.y},
          {ints("multiplier_mantissa", {mb.mantissa}), ints("multiplier_shift", {mb.shift}), ints("clamp", {-128, 127})});
  finish(c, {2, 3, 5});
  fx::MatMulParams p;
  p.m = 3;
  p.k = 4;
  p.n = 5;
  p.a = pa;
  p.output = py;
  p.b_zero_point = 4;
  p.multipliers = {mb};
  std::vector<int32_t> expected(30);
  for (size_t i = 0; i < 2; ++i)
    REQUIRE(fx::matmul(p, std::span(a).subspan(i * 12, 12), std::span(b).subspan(i * 20, 20), {},
                       std::span(expected).subspan(i * 15, 15))
                .is_ok());
  CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, {2, 3, 4}, a), quantized_value(ElemType::i8, {2, 4, 5}, b)},
                 py) == expected);
}

TEST_CASE("lowered requantize: hand-computed values with a clamp") {
  Chain c;
  const int32_t xq = quantized_input(c, "x", ElemType::i8, {6}, Quant{1.0, 10});
  c.y = c.b.tensor("y", ElemType::u8, {6}, Quant{2.0, 128});
  c.b.bpu("requantize", {xq}, {c.y}, {multiplier("multiplier", make_mult(0.5)), ints("clamp", {120, 140})});
  finish(c, {6});
  // y = clamp(round_half_away((x - 10) / 2) + 128, 120, 140)
  const auto got = run_ints(c.b.model, {quantized_value(ElemType::i8, {6}, {10, 13, 7, 127, -128, 11})},
                            fx::QParams{2.0, 128, fx::QType::UInt8});
  CHECK(got == std::vector<int32_t>{128, 130, 126, 140, 120, 129});
}

TEST_CASE("lowered pooling, resize, lut, softmax, layernorm and concat equal the fx calls") {
  std::mt19937 rng(5);
  const Quant q8{0.1, -2}, q16{0.001, 0};
  const fx::QParams p8 = qp(ElemType::i8, q8);
  const std::vector<int32_t> x = narrow(random_ints(rng, 2 * 3 * 5 * 4, -128, 127));  // [2, 3, 5, 4]
  const std::vector<int64_t> xs{2, 3, 5, 4};

  SUBCASE("max_pool and average_pool") {
    for (const bool max : {true, false}) {
      Chain c;
      const int32_t xq = quantized_input(c, "x", ElemType::i8, xs, q8);
      const Quant qo = max ? q8 : Quant{0.07, 1};
      c.y = c.b.tensor("y", ElemType::i8, {2, 3, 3, 2}, qo);
      std::vector<Attribute> attrs{ints("kernel", {3, 2}), ints("strides", {2, 2}), ints("pads", {1, 0, 1, 1})};
      if (!max) attrs.push_back(ints("count_include_pad", {1}));
      c.b.bpu(max ? "max_pool" : "average_pool", {xq}, {c.y}, attrs);
      finish(c, {2, 3, 3, 2});
      fx::Pool2DParams p;
      p.batch = 2;
      p.channels = 3;
      p.in_h = 5;
      p.in_w = 4;
      p.kernel_h = 3;
      p.kernel_w = 2;
      p.strides = {2, 2};
      p.pads = {1, 0, 1, 1};
      p.count_include_pad = !max;
      p.input = p8;
      p.output = qp(ElemType::i8, qo);
      REQUIRE(fx::pool_out_h(p) == 3);
      REQUIRE(fx::pool_out_w(p) == 2);
      std::vector<int32_t> expected(36);
      REQUIRE((max ? fx::max_pool(p, x, expected) : fx::average_pool(p, x, expected)).is_ok());
      CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, xs, x)}, p.output) == expected);
    }
  }
  SUBCASE("global_average_pool") {
    Chain c;
    const int32_t xq = quantized_input(c, "x", ElemType::i8, xs, q8);
    const Quant qo{0.02, 0};
    c.y = c.b.tensor("y", ElemType::i8, {2, 3, 1, 1}, qo);
    c.b.bpu("global_average_pool", {xq}, {c.y});
    finish(c, {2, 3, 1, 1});
    std::vector<int32_t> expected(6);
    REQUIRE(fx::global_average_pool(2, 3, 5, 4, p8, qp(ElemType::i8, qo), x, expected).is_ok());
    CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, xs, x)}, qp(ElemType::i8, qo)) == expected);
  }
  SUBCASE("resize nearest and linear") {
    for (const std::string mode : {"nearest", "linear"}) {
      Chain c;
      const int32_t xq = quantized_input(c, "x", ElemType::i8, xs, q8);
      c.y = c.b.tensor("y", ElemType::i8, {2, 3, 9, 7}, q8);
      c.b.bpu("resize", {xq}, {c.y},
              {strings("mode", {mode}), strings("coordinate_mode", {"align_corners"}),
               strings("nearest_mode", {"round_prefer_ceil"})});
      finish(c, {2, 3, 9, 7});
      fx::ResizeParams p;
      p.batch = 2;
      p.channels = 3;
      p.in_h = 5;
      p.in_w = 4;
      p.out_h = 9;
      p.out_w = 7;
      p.coordinate_mode = fx::CoordinateMode::AlignCorners;
      p.nearest_mode = fx::NearestMode::RoundPreferCeil;
      std::vector<int32_t> expected(2 * 3 * 9 * 7);
      REQUIRE((mode == "linear" ? fx::resize_bilinear(p, x, expected) : fx::resize_nearest(p, x, expected)).is_ok());
      CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, xs, x)}, p8) == expected);
    }
  }
  SUBCASE("lut: 8-bit direct and 16-bit segmented") {
    for (const bool wide : {false, true}) {
      const ElemType t = wide ? ElemType::i16 : ElemType::i8;
      const Quant qi = wide ? Quant{8.0 / 32768, 0} : q8;
      const Quant qo = wide ? Quant{1.0 / 32768, 0} : Quant{1.0 / 255, -128};
      fx::Lut lut;
      REQUIRE(fx::build_sigmoid_lut(qp(t, qi), qp(t, qo), wide ? 7 : 0, lut).is_ok());
      Chain c;
      const int32_t xq = quantized_input(c, "x", t, {40}, qi);
      std::vector<int64_t> entries(lut.entries.begin(), lut.entries.end());
      const int32_t table = c.b.constant_ints("table", ElemType::i32, {static_cast<int64_t>(entries.size())}, entries);
      c.y = c.b.tensor("y", t, {40}, qo);
      c.b.bpu("lut", {xq, table}, {c.y}, {ints("segment_bits", {wide ? 7 : 0})});
      finish(c, {40});
      const fx::Range r = fx::range_of(qtype_of(t));
      const std::vector<int32_t> xv = narrow(random_ints(rng, 40, r.min, r.max));
      std::vector<int32_t> expected(40);
      REQUIRE(fx::apply_lut(lut, xv, expected).is_ok());
      CHECK(run_ints(c.b.model, {quantized_value(t, {40}, xv)}, qp(t, qo)) == expected);
    }
  }
  SUBCASE("softmax and layernorm over the last axis") {
    const std::vector<int32_t> xv = narrow(random_ints(rng, 4 * 16, -3000, 3000));
    const fx::QParams pi = qp(ElemType::i16, q16);
    {
      const Quant qo{1.0 / 32767, 0};
      fx::SoftmaxParams sp;
      REQUIRE(fx::make_softmax_params(pi, qp(ElemType::i16, qo), sp).is_ok());
      Chain c;
      const int32_t xq = quantized_input(c, "x", ElemType::i16, {4, 16}, q16);
      const int32_t table = c.b.constant_ints("exp", ElemType::i32, {fx::kSoftmaxEntries},
                                              std::vector<int64_t>(sp.exp_table.begin(), sp.exp_table.end()));
      c.y = c.b.tensor("y", ElemType::i16, {4, 16}, qo);
      c.b.bpu("softmax", {xq, table}, {c.y},
              {ints("segment_bits", {sp.segment_bits}), multiplier("output_multiplier", sp.output_multiplier)});
      finish(c, {4, 16});
      std::vector<int32_t> expected(64);
      REQUIRE(fx::softmax(sp, 16, xv, expected).is_ok());
      CHECK(run_ints(c.b.model, {quantized_value(ElemType::i16, {4, 16}, xv)}, qp(ElemType::i16, qo)) == expected);
    }
    {
      const Quant qo{8.0 / 32767, 3};
      std::vector<double> gamma(16), beta(16);
      for (size_t i = 0; i < 16; ++i) {
        gamma[i] = 0.5 + 0.06 * static_cast<double>(i);
        beta[i] = -0.3 + 0.04 * static_cast<double>(i);
      }
      fx::LayerNormParams lp;
      REQUIRE(fx::make_layernorm_params(pi, qp(ElemType::i16, qo), gamma, beta, 1e-5, lp).is_ok());
      Chain c;
      const int32_t xq = quantized_input(c, "x", ElemType::i16, {4, 16}, q16);
      const int32_t g = c.b.constant_ints("gamma", ElemType::i32, {16}, std::vector<int64_t>(lp.gamma.begin(), lp.gamma.end()));
      const int32_t be = c.b.constant_ints("beta", ElemType::i32, {16}, std::vector<int64_t>(lp.beta.begin(), lp.beta.end()));
      c.y = c.b.tensor("y", ElemType::i16, {4, 16}, qo);
      c.b.bpu("layernorm", {xq, g, be}, {c.y},
              {ints("epsilon", {lp.epsilon}), multiplier("output_multiplier", lp.output_multiplier)});
      finish(c, {4, 16});
      std::vector<int32_t> expected(64);
      REQUIRE(fx::layernorm(lp, xv, expected).is_ok());
      CHECK(run_ints(c.b.model, {quantized_value(ElemType::i16, {4, 16}, xv)}, qp(ElemType::i16, qo)) == expected);
    }
  }
  SUBCASE("concat rescales its inputs to the output") {
    const Quant qa{0.1, -2}, qb{0.05, 7};
    Chain c;
    const int32_t at = quantized_input(c, "a", ElemType::i8, {2, 2, 3}, qa);
    const int32_t bt = quantized_input(c, "b", ElemType::i8, {2, 1, 3}, qb);
    c.y = c.b.tensor("y", ElemType::i8, {2, 3, 3}, qa);
    c.b.bpu("concat", {at, bt}, {c.y}, {ints("axis", {1})});
    finish(c, {2, 3, 3});
    const std::vector<int32_t> a = narrow(random_ints(rng, 12, -128, 127)), b = narrow(random_ints(rng, 6, -128, 127));
    std::vector<int32_t> expected(18);
    REQUIRE(fx::concat({fx::ConcatInput{a, 2, qp(ElemType::i8, qa)}, fx::ConcatInput{b, 1, qp(ElemType::i8, qb)}}, 2, 3,
                       qp(ElemType::i8, qa), expected)
                .is_ok());
    CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, {2, 2, 3}, a), quantized_value(ElemType::i8, {2, 1, 3}, b)},
                   qp(ElemType::i8, qa)) == expected);
  }
}

TEST_CASE("lowered reshape, transpose and slice move integers exactly") {
  const Quant q{1.0, 0};
  const fx::QParams p = qp(ElemType::i8, q);
  std::vector<int32_t> x(24);
  for (size_t i = 0; i < 24; ++i) x[i] = static_cast<int32_t>(i);
  {
    Chain c;
    const int32_t xq = quantized_input(c, "x", ElemType::i8, {2, 3, 4}, q);
    c.y = c.b.tensor("y", ElemType::i8, {4, 2, 3}, q);
    c.b.bpu("transpose", {xq}, {c.y}, {ints("perm", {2, 0, 1})});
    finish(c, {4, 2, 3});
    const auto got = run_ints(c.b.model, {quantized_value(ElemType::i8, {2, 3, 4}, x)}, p);
    // y[k][i][j] = x[i][j][k]
    CHECK(got[0] == 0);
    CHECK(got[1] == 4);
    CHECK(got[3] == 12);
    CHECK(got[6] == 1);
    CHECK(got[23] == 23);
  }
  {
    Chain c;
    const int32_t xq = quantized_input(c, "x", ElemType::i8, {2, 3, 4}, q);
    c.y = c.b.tensor("y", ElemType::i8, {2, 2, 2}, q);
    c.b.bpu("slice", {xq}, {c.y}, {ints("starts", {1, 0}), ints("ends", {3, 4}), ints("axes", {1, 2}), ints("steps", {1, 2})});
    finish(c, {2, 2, 2});
    CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, {2, 3, 4}, x)}, p) ==
          std::vector<int32_t>{4, 6, 8, 10, 16, 18, 20, 22});
  }
  {
    Chain c;
    const int32_t xq = quantized_input(c, "x", ElemType::i8, {2, 3, 4}, q);
    c.y = c.b.tensor("y", ElemType::i8, {6, 4}, q);
    c.b.bpu("reshape", {xq}, {c.y});
    finish(c, {6, 4});
    CHECK(run_ints(c.b.model, {quantized_value(ElemType::i8, {2, 3, 4}, x)}, p) == x);
  }
  {  // negative steps are refused in BPU slices
    Chain c;
    const int32_t xq = quantized_input(c, "x", ElemType::i8, {2, 3, 4}, q);
    c.y = c.b.tensor("y", ElemType::i8, {2, 3, 2}, q);
    c.b.bpu("slice", {xq}, {c.y}, {ints("starts", {3}), ints("ends", {0}), ints("axes", {2}), ints("steps", {-2})});
    finish(c, {2, 3, 2});
    const std::string e = run_error(c.b.model, {std::vector<float>(24, 0.0f)});
    CHECK(contains(e, "slice 'n1'"));
    CHECK(contains(e, "steps must be positive"));
  }
}

TEST_CASE("the quantized-input path gives the float path's outputs bit for bit") {
  // x (scale 1/8) -> quantize -> requantize -> dequantize, and a second consumer quantize with
  // the same parameters.
  Builder b;
  const Quant q{0.125, 3};
  const int32_t x = b.input("x", {2, 4});
  const int32_t xq1 = b.tensor("xq1", ElemType::i8, {2, 4}, q);
  const int32_t xq2 = b.tensor("xq2", ElemType::i8, {2, 4}, q);
  const int32_t y = b.tensor("y", ElemType::u8, {2, 4}, Quant{0.1, 128});
  const int32_t s = b.tensor("s", ElemType::i8, {2, 4}, Quant{0.3, 0});
  const int32_t out1 = b.output("out1", {2, 4});
  const int32_t out2 = b.output("out2", {2, 4});
  b.bpu("quantize", {x}, {xq1});
  b.bpu("quantize", {x}, {xq2});
  b.bpu("requantize", {xq1}, {y}, {multiplier("multiplier", make_mult(1.25)), ints("clamp", {0, 255})});
  fx::AddParams ap;
  REQUIRE(fx::make_add_params(qp(ElemType::i8, q), qp(ElemType::u8, Quant{0.1, 128}), qp(ElemType::i8, Quant{0.3, 0}), false, ap).is_ok());
  b.bpu("add", {xq2, y}, {s},
        {ints("left_shift", {ap.left_shift}), multiplier("a_multiplier", ap.a_multiplier),
         multiplier("b_multiplier", ap.b_multiplier), multiplier("output_multiplier", ap.output_multiplier)});
  b.bpu("dequantize", {y}, {out1});
  b.bpu("dequantize", {s}, {out2});
  auto ex = Executor::create(b.model);
  REQUIRE_MESSAGE(ex.has_value(), ex.message());
  ElemType t;
  Quant got_q;
  REQUIRE(ex->quantized_input(0, t, got_q));
  CHECK(t == ElemType::i8);
  CHECK(got_q == q);
  CHECK_FALSE(ex->quantized_input(1, t, got_q));

  const std::vector<int32_t> ints = {-128, -1, 0, 3, 4, 50, 126, 127};
  std::vector<float> floats(ints.size());
  for (size_t i = 0; i < ints.size(); ++i) floats[i] = static_cast<float>((ints[i] - 3) * 0.125);
  std::vector<std::vector<float>> from_float, from_ints;
  REQUIRE(ex->run({std::span<const float>(floats)}, from_float).is_ok());
  const Status st = ex->run_values({quantized_value(ElemType::i8, {2, 4}, ints)}, from_ints);
  REQUIRE_MESSAGE(st.is_ok(), st.message());
  CHECK(from_float == from_ints);

  // Wrong quantized type, out-of-range values and wrong sizes are refused.
  CHECK_FALSE(ex->run_values({quantized_value(ElemType::u8, {2, 4}, std::vector<int32_t>(8, 0))}, from_ints).is_ok());
  CHECK_FALSE(ex->run_values({quantized_value(ElemType::i8, {2, 4}, std::vector<int32_t>(8, 200))}, from_ints).is_ok());
  CHECK_FALSE(ex->run_values({quantized_value(ElemType::i8, {2, 4}, std::vector<int32_t>(7, 0))}, from_ints).is_ok());
  // The executor decides which tensors are known in range; a caller's claim is not taken.
  Value claimed = quantized_value(ElemType::i8, {2, 4}, std::vector<int32_t>(8, 200));
  claimed.in_range = true;
  CHECK_FALSE(ex->run_values({claimed}, from_ints).is_ok());
}

TEST_CASE("quantized_input is false when an input has another consumer or differing quantize ops") {
  Builder b;
  const int32_t x = b.input("x", {4});
  const int32_t q1 = b.tensor("q1", ElemType::i8, {4}, Quant{0.1, 0});
  const int32_t q2 = b.tensor("q2", ElemType::i8, {4}, Quant{0.2, 0});
  const int32_t o1 = b.output("o1", {4});
  const int32_t o2 = b.output("o2", {4});
  b.bpu("quantize", {x}, {q1});
  b.bpu("quantize", {x}, {q2});
  b.bpu("dequantize", {q1}, {o1});
  b.bpu("dequantize", {q2}, {o2});
  auto ex = Executor::create(b.model);
  REQUIRE(ex.has_value());
  ElemType t;
  Quant q;
  CHECK_FALSE(ex->quantized_input(0, t, q));

  Builder c;
  const int32_t y = c.input("y", {4});
  const int32_t out = c.output("out", {4});
  c.cpu("Relu", {y}, {out});
  auto ey = Executor::create(c.model);
  REQUIRE(ey.has_value());
  CHECK_FALSE(ey->quantized_input(0, t, q));
  CHECK_FALSE(ey->quantized_input(5, t, q));
}

TEST_CASE("run refuses wrong input counts and sizes and names the op of a shape mismatch") {
  Builder b;
  const int32_t x = b.input("x", {2, 3});
  const int32_t out = b.output("out", {2, 3});
  b.cpu("Relu", {x}, {out});
  auto ex = Executor::create(b.model);
  REQUIRE(ex.has_value());
  std::vector<std::vector<float>> outputs;
  const std::vector<float> five(5, 1.0f), six(6, -1.0f);
  Status s = ex->run({std::span<const float>(five)}, outputs);
  CHECK_FALSE(s.is_ok());
  CHECK(contains(s.message(), "has 5 values, expected 6"));
  s = ex->run({}, outputs);
  CHECK(contains(s.message(), "expected 1 inputs, got 0"));
  s = ex->run({std::span<const float>(six)}, outputs);
  REQUIRE(s.is_ok());
  CHECK(outputs == std::vector<std::vector<float>>{std::vector<float>(6, 0.0f)});

  // conv2d whose declared output shape is not what the op produces
  Builder c;
  const Quant q{0.1, 0};
  const int32_t xi = c.input("x", {1, 1, 4, 4});
  const int32_t xq = c.tensor("xq", ElemType::i8, {1, 1, 4, 4}, q);
  const int32_t w = c.constant_ints("w", ElemType::i8, {1, 1, 3, 3}, std::vector<int64_t>(9, 1));
  const int32_t y = c.tensor("y", ElemType::i8, {1, 1, 4, 4}, q);
  const int32_t o = c.output("o", {1, 1, 4, 4});
  c.bpu("quantize", {xi}, {xq});
  Op& conv = c.bpu("conv2d", {xq, w, -1}, {y}, {ints("multiplier_mantissa", {1 << 30}), ints("multiplier_shift", {0})});
  conv.name = "Conv_7";
  c.bpu("dequantize", {y}, {o});
  const std::string e = run_error(c.model, {std::vector<float>(16, 0.5f)});
  CHECK(contains(e, "conv2d 'Conv_7'"));
  CHECK(contains(e, "produces shape [1, 1, 2, 2]"));
}

TEST_CASE("validate refuses malformed models with a message naming the problem") {
  // A valid base: x -> quantize -> requantize -> dequantize -> out.
  auto base = [] {
    Builder b;
    const Quant q{0.1, 0};
    const int32_t x = b.input("x", {4});
    const int32_t xq = b.tensor("xq", ElemType::i8, {4}, q);
    const int32_t y = b.tensor("y", ElemType::i8, {4}, q);
    const int32_t out = b.output("out", {4});
    b.bpu("quantize", {x}, {xq});
    b.bpu("requantize", {xq}, {y}, {ints("clamp", {-128, 127}), ints("multiplier", {1 << 30, -1})});
    b.bpu("dequantize", {y}, {out});
    return b;
  };
  REQUIRE(validate(base().model).is_ok());
  auto error_of = [](const Model& m) { return validate(m).message(); };

  {
    Builder b = base();
    b.model.segments[0].ops[1].inputs[0] = 17;
    CHECK(contains(error_of(b.model), "requantize 'n1': input index 17 is out of range"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].outputs[0] = 1;  // xq, already written by quantize
    CHECK(contains(error_of(b.model), "is written twice"));
  }
  {
    Builder b = base();
    std::swap(b.model.segments[0].ops[1], b.model.segments[0].ops[2]);
    CHECK(contains(error_of(b.model), "reads tensor 'y' before it is written"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].attributes.pop_back();  // multiplier
    CHECK(contains(error_of(b.model), "requantize 'n1': missing attribute 'multiplier'"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].attributes[1].ints = {1 << 30};
    CHECK(contains(error_of(b.model), "attribute 'multiplier' has 1 ints, expected 2"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].attributes[1].ints = {12345, 0};
    CHECK(contains(error_of(b.model), "mantissa 12345 outside [2^30, 2^31)"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].attributes[1].ints = {1 << 30, 63};
    CHECK(contains(error_of(b.model), "shift 63 outside"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].attributes[0].ints = {-200, 127};
    CHECK(contains(error_of(b.model), "clamp [-200, 127] is empty or outside"));
  }
  {
    Builder b = base();
    b.constant_ints("c", ElemType::i16, {3}, {1, 2});
    CHECK(contains(error_of(b.model), "tensor 'c': constant data has 4 bytes, expected 6"));
  }
  {
    Builder b = base();
    const int32_t o = b.tensor("o", ElemType::f32, {4});
    b.cpu("Relu", {b.model.outputs[0]}, {o});
    b.model.segments.back().kind = SegmentKind::bpu;
    CHECK(contains(error_of(b.model), "cpu.Relu 'n0': a CPU op in BPU segment"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].type = "frobnicate";
    CHECK(contains(error_of(b.model), "unknown op type: frobnicate 'n1'"));
  }
  {
    Builder b = base();
    const int32_t o = b.tensor("o", ElemType::f32, {4});
    b.cpu("NoSuchOp", {b.model.outputs[0]}, {o});
    CHECK(contains(error_of(b.model), "unknown op type: cpu.NoSuchOp"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[1].inputs.push_back(1);
    CHECK(contains(error_of(b.model), "has 2 inputs, expected 1"));
  }
  {
    Builder b = base();
    b.model.tensors[0].type = ElemType::i8;
    CHECK(contains(error_of(b.model), "must be a non-constant f32 or u8 tensor"));
  }
  {
    Builder b = base();
    b.model.tensors[1].shape = {-4};
    CHECK(contains(error_of(b.model), "negative dimension"));
  }
  {
    Builder b = base();
    b.model.tensors[1].shape = {1 << 20, 1 << 20};
    CHECK(contains(error_of(b.model), "2^40 elements"));
  }
  {
    Builder b = base();
    b.model.segments[0].ops[0].outputs[0] = 0;  // quantize writing f32 -> the model input
    CHECK_FALSE(validate(b.model).is_ok());
  }
  {
    Builder b = base();
    b.model.segments[0].ops.pop_back();
    CHECK(contains(error_of(b.model), "model output tensor 'out' is never written"));
  }
  {  // conv2d with float weights
    Builder b = base();
    const int32_t xi = b.tensor("x4", ElemType::i8, {1, 1, 2, 2}, Quant{0.1, 0});
    b.model.tensors[static_cast<size_t>(xi)].constant = true;
    b.model.tensors[static_cast<size_t>(xi)].data.assign(4, 0);
    const int32_t w = b.constant_f32("wf", {1, 1, 1, 1}, {1.0f});
    const int32_t y = b.tensor("y4", ElemType::i8, {1, 1, 2, 2}, Quant{0.1, 0});
    b.bpu("conv2d", {xi, w, -1}, {y}, {ints("multiplier_mantissa", {1 << 30}), ints("multiplier_shift", {0})});
    CHECK(contains(error_of(b.model), "weights must be a constant i8 or i16 tensor"));
  }
}

TEST_CASE("run refuses a NaN to quantize and a float CPU op writing i64") {
  Builder b;
  const int32_t x = b.input("x", {2});
  const int32_t xq = b.tensor("xq", ElemType::i8, {2}, Quant{0.1, 0});
  const int32_t out = b.output("out", {2});
  b.bpu("quantize", {x}, {xq});
  b.bpu("dequantize", {xq}, {out});
  const std::string e = run_error(b.model, {{1.0f, std::nanf("")}});
  CHECK(contains(e, "quantize 'n0': input element 1 is NaN"));

  Builder c;
  const int32_t y = c.input("y", {2});
  const int32_t mid = c.tensor("mid", ElemType::i64, {2});
  const int32_t o = c.output("o", {2});
  c.cpu("Relu", {y}, {mid});
  c.cpu("Cast", {mid}, {o}, {ints("to", {1})});
  CHECK(contains(run_error(c.model, {{1.0f, 2.0f}}), "cpu.Relu 'n0': outputs must be f32 tensors"));
}

TEST_CASE("one executor runs in parallel threads with identical results") {
  Builder b;
  const Quant q{0.05, 0};
  const int32_t x = b.input("x", {1, 2, 6, 6});
  const int32_t xq = b.tensor("xq", ElemType::i8, {1, 2, 6, 6}, q);
  const int32_t w = b.constant_ints("w", ElemType::i8, {3, 2, 3, 3}, std::vector<int64_t>(54, 3));
  const int32_t y = b.tensor("y", ElemType::i8, {1, 3, 4, 4}, Quant{0.2, 0});
  const int32_t yf = b.tensor("yf", ElemType::f32, {1, 3, 4, 4});
  const int32_t out = b.output("out", {1, 3, 4, 4});
  const fx::Multiplier m = make_mult(0.05 * 0.01 / 0.2);
  b.bpu("quantize", {x}, {xq});
  b.bpu("conv2d", {xq, w, -1}, {y}, {ints("multiplier_mantissa", {m.mantissa}), ints("multiplier_shift", {m.shift})});
  b.bpu("dequantize", {y}, {yf});
  b.cpu("Sigmoid", {yf}, {out});
  auto ex = Executor::create(b.model);
  REQUIRE(ex.has_value());
  const Executor& e = *ex;
  std::vector<std::vector<float>> inputs(4, std::vector<float>(72));
  for (size_t t = 0; t < inputs.size(); ++t)
    for (size_t i = 0; i < 72; ++i) inputs[t][i] = static_cast<float>(std::sin(0.1 * static_cast<double>(i * (t + 1))));
  std::vector<std::vector<float>> serial(inputs.size()), parallel(inputs.size());
  for (size_t t = 0; t < inputs.size(); ++t) {
    std::vector<std::vector<float>> o;
    REQUIRE(e.run({std::span<const float>(inputs[t])}, o).is_ok());
    serial[t] = o[0];
  }
  std::vector<std::thread> threads;
  std::vector<int> ok(inputs.size(), 0);
  for (size_t t = 0; t < inputs.size(); ++t)
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 20; ++repeat) {
        std::vector<std::vector<float>> o;
        ok[t] = e.run({std::span<const float>(inputs[t])}, o).is_ok() && o[0] == serial[t] ? ok[t] + 1 : -1000;
      }
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < inputs.size(); ++t) CHECK(ok[t] == 20);
}

TEST_CASE("an executor run after runs on other inputs gives a first run's outputs") {
  // The inputs are copied into storage the thread keeps between runs: nothing of an earlier,
  // larger or other input may reach a later run.
  Builder b;
  const Quant q{0.05, 0};
  const int32_t x = b.input("x", {1, 2, 9, 7});
  const int32_t xq = b.tensor("xq", ElemType::i16, {1, 2, 9, 7}, q);
  const int32_t w = b.constant_ints("w", ElemType::i8, {3, 2, 3, 3}, std::vector<int64_t>(54, -5));
  const int32_t y = b.tensor("y", ElemType::i8, {1, 3, 7, 5}, Quant{0.2, 0});
  const int32_t out = b.output("out", {1, 3, 7, 5});
  const fx::Multiplier m = make_mult(0.05 * 0.01 / 0.2);
  b.bpu("quantize", {x}, {xq});
  b.bpu("conv2d", {xq, w, -1}, {y}, {ints("multiplier_mantissa", {m.mantissa}), ints("multiplier_shift", {m.shift})});
  b.bpu("dequantize", {y}, {out});
  std::vector<std::vector<float>> inputs(3, std::vector<float>(126));
  for (size_t t = 0; t < inputs.size(); ++t)
    for (size_t i = 0; i < 126; ++i) inputs[t][i] = static_cast<float>(std::cos(0.3 * static_cast<double>(i * (t + 2))));
  // Each input's first run: a fresh thread, so fresh thread storage too.
  std::vector<std::vector<float>> first(inputs.size());
  for (size_t t = 0; t < inputs.size(); ++t)
    std::thread([&, t] {
      auto ex = Executor::create(b.model);
      std::vector<std::vector<float>> o;
      if (ex.has_value() && ex->run({std::span<const float>(inputs[t])}, o).is_ok()) first[t] = o[0];
    }).join();
  auto ex = Executor::create(b.model);
  REQUIRE(ex.has_value());
  std::vector<std::vector<float>> o;
  for (const size_t t : {0, 1, 2, 2, 0, 1}) {
    REQUIRE_FALSE(first[t].empty());
    REQUIRE(ex->run({std::span<const float>(inputs[t])}, o).is_ok());
    CHECK(o[0] == first[t]);
    std::vector<Value> values(1);
    values[0].type = ElemType::f32;
    values[0].floats = inputs[t];
    REQUIRE(ex->run_values(values, o).is_ok());
    CHECK(o[0] == first[t]);
  }
}

TEST_CASE("messages stay on one line and bounded whatever the names hold") {
  Builder b;
  const int32_t x = b.input("x\nwith a newline", {2});
  const int32_t out = b.output(std::string(5000, 'o'), {2});
  Op& op = b.cpu("Relu", {x}, {out});
  op.name = "line one\nline two\r";
  b.model.name = "model\n";
  b.model.tensors[static_cast<size_t>(out)].shape = {3};
  const std::string e = run_error(b.model, {{1.0f, 2.0f}});
  CHECK(contains(e, "cpu.Relu 'line one?line two?'"));
  CHECK(e.find('\n') == std::string::npos);
  CHECK(e.find('\r') == std::string::npos);

  b.model.segments[0].ops[0].inputs[0] = 9;
  const std::string v = validate(b.model).message();
  CHECK(contains(v, "lowered model 'model?'"));
  CHECK(v.find('\n') == std::string::npos);

  b.model.segments[0].ops[0].inputs[0] = x;
  b.model.tensors[static_cast<size_t>(out)].shape = {2};
  b.model.segments[0].ops[0].outputs[0] = x;  // writes the model input: named, truncated
  const std::string w = validate(b.model).message();
  CHECK(contains(w, "is written twice"));
  b.model.segments[0].ops[0].outputs[0] = out;
  b.model.tensors[static_cast<size_t>(out)].type = ElemType::i64;
  const std::string t = validate(b.model).message();
  CHECK(contains(t, "ooo..."));
  CHECK(t.size() < 600);
}
