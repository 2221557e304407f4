// The fast int8 kernels (fast_kernels.h) against the scalar reference: requantize, conv2d and
// matmul on random shapes and values, on every instruction set this CPU runs; results and
// errors must be identical.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/fixed_point/fast_kernels.h"
#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using qflow::fx::test::random_values;

namespace {

std::vector<fast::Isa> isas() {
  std::vector<fast::Isa> out;
  for (const fast::Isa isa : {fast::Isa::Portable, fast::Isa::Avx2, fast::Isa::AvxVnni, fast::Isa::Avx512Vnni})
    if (fast::isa_supported(isa)) out.push_back(isa);
  return out;
}

QType random_8bit(std::mt19937& rng) { return rng() % 2 ? QType::Int8 : QType::UInt8; }

int32_t random_in(std::mt19937& rng, int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }

Multiplier random_multiplier(std::mt19937& rng) {
  switch (rng() % 8) {
    case 0: return Multiplier{0, random_in(rng, kMinShift, kMaxShift)};
    case 1: return Multiplier{random_in(rng, 1 << 30, INT32_MAX), random_in(rng, kMinShift, kMaxShift)};
    case 2: return Multiplier{INT32_MAX, random_in(rng, -2, 2)};
    case 3: return Multiplier{1 << 30, random_in(rng, -1, 4)};  // 2^-k: every odd accumulator is a tie
    default: return Multiplier{random_in(rng, 1 << 30, INT32_MAX), random_in(rng, 0, 20)};
  }
}

// Bias values that keep the reduction of length k within the accumulator.
std::vector<int32_t> random_bias(std::mt19937& rng, size_t n, int64_t k, int64_t max_product) {
  const int64_t room = INT32_MAX - k * max_product;
  const auto limit = static_cast<int32_t>(std::min<int64_t>(room, 1 << 20));
  std::vector<int32_t> b(n);
  for (auto& v : b) v = random_in(rng, -limit, limit);
  return b;
}

Clamp random_clamp(std::mt19937& rng) {
  if (rng() % 2) return Clamp{};
  const int32_t a = random_in(rng, -140, 140), b = random_in(rng, -140, 140);
  return Clamp{std::min(a, b), std::max(a, b)};
}

}  // namespace

TEST_CASE("the instruction sets: portable always runs, the best is supported") {
  CHECK(fast::isa_supported(fast::Isa::Portable));
  CHECK(fast::isa_supported(fast::best_isa()));
  CHECK(std::string(fast::isa_name(fast::Isa::Avx2)) == "avx2");
  CHECK(fast::supports(QType::UInt8, QType::Int8));
  CHECK_FALSE(fast::supports(QType::Int16, QType::Int8));
  CHECK_FALSE(fast::supports(QType::Int16, QType::Int16));
}

TEST_CASE("fast requantize equals fx::requantize on extreme and random accumulators") {
  std::mt19937 rng(7);
  std::vector<int32_t> acc = {0, 1, -1, INT32_MAX, -INT32_MAX, 1 << 30, -(1 << 30), 3, -3, 12345, -12345};
  for (int i = 0; i < 2000; ++i) acc.push_back(static_cast<int32_t>(rng()) / (1 << (rng() % 31)));
  for (const fast::Isa isa : isas())
    for (int trial = 0; trial < 400; ++trial) {
      const Multiplier m = random_multiplier(rng);
      const QType type = rng() % 3 == 0 ? QType::UInt16 : (rng() % 2 ? QType::Int8 : QType::Int16);
      const Range r = range_of(type);
      const int32_t zp = random_in(rng, r.min, r.max);
      const Clamp c = random_clamp(rng);
      const int32_t lo = std::max(r.min, c.min), hi = std::min(r.max, c.max);
      if (lo > hi) continue;
      const int64_t n = static_cast<int64_t>(acc.size()) - random_in(rng, 0, 9);  // odd tails
      std::vector<int32_t> got(static_cast<size_t>(n)), strided(static_cast<size_t>(2 * n));
      fast::requantize_row(isa, acc.data(), n, m, zp, lo, hi, got.data(), 1);
      fast::requantize_row(isa, acc.data(), n, m, zp, lo, hi, strided.data(), 2);
      for (int64_t i = 0; i < n; ++i) {
        const int32_t want = requantize(acc[static_cast<size_t>(i)], m, zp, lo, hi);
        REQUIRE_MESSAGE(got[static_cast<size_t>(i)] == want,
                        std::string(fast::isa_name(isa)) << " acc " << acc[static_cast<size_t>(i)] << " m " << m.mantissa << "/" << m.shift);
        REQUIRE(strided[static_cast<size_t>(2 * i)] == want);
      }
    }
}

TEST_CASE("fast conv2d equals fx::conv2d on random shapes, strides, pads, dilations and groups") {
  std::mt19937 rng(11);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Conv2DParams p;
    p.batch = random_in(rng, 1, 2);
    const int kind = trial % 3;  // 0 dense, 1 depthwise, 2 grouped
    p.group = kind == 0 ? 1 : kind == 1 ? random_in(rng, 1, 9) : random_in(rng, 2, 3);
    p.in_channels = p.group * (kind == 1 ? 1 : random_in(rng, 1, 7));
    p.out_channels = p.group * (kind == 1 ? random_in(rng, 1, 2) : random_in(rng, 1, 9));
    p.in_h = random_in(rng, 1, 13);
    p.in_w = random_in(rng, 1, 13);
    p.kernel_h = random_in(rng, 1, 5);
    p.kernel_w = random_in(rng, 1, 5);
    p.strides = {random_in(rng, 1, 3), random_in(rng, 1, 3)};
    p.dilations = {random_in(rng, 1, 2), random_in(rng, 1, 2)};
    p.pads = {random_in(rng, 0, 2), random_in(rng, 0, 2), random_in(rng, 0, 2), random_in(rng, 0, 2)};
    if (conv_out_h(p) < 1 || conv_out_w(p) < 1) continue;
    p.input = QParams{0.1, 0, random_8bit(rng)};
    p.input.zero_point = random_in(rng, range_of(p.input.type).min, range_of(p.input.type).max);
    p.output = QParams{0.1, 0, random_8bit(rng)};
    p.output.zero_point = random_in(rng, range_of(p.output.type).min, range_of(p.output.type).max);
    p.clamp = random_clamp(rng);
    if (std::max(range_of(p.output.type).min, p.clamp.min) > std::min(range_of(p.output.type).max, p.clamp.max)) continue;
    const int64_t k = p.in_channels / p.group * p.kernel_h * p.kernel_w;
    const size_t per_channel = rng() % 2 ? static_cast<size_t>(p.out_channels) : 1;
    for (size_t i = 0; i < per_channel; ++i) p.multipliers.push_back(random_multiplier(rng));
    std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w), p.input.type);
    std::vector<int32_t> w = random_values(rng, static_cast<size_t>(p.out_channels * k), QType::Int8);
    if (trial % 10 == 0) {  // the extremes: the largest products the accumulator takes
      for (auto& v : x) v = range_of(p.input.type).min;
      for (auto& v : w) v = -128;
    }
    const std::vector<int32_t> bias =
        rng() % 4 == 0 ? std::vector<int32_t>{} : random_bias(rng, static_cast<size_t>(p.out_channels), k, 255 * 128);
    std::vector<int32_t> want(static_cast<size_t>(p.batch * p.out_channels * conv_out_h(p) * conv_out_w(p)));
    REQUIRE(conv2d(p, x, w, bias, want).ok());
    fast::PackedConv2D packed;
    REQUIRE(fast::pack_conv2d(p, w, bias, packed).ok());
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(want.size(), -999);
      REQUIRE(fast::conv2d(packed, isa, x, got).ok());
      INFO(std::string(fast::isa_name(isa)), " trial ", trial, " group ", p.group, " C ", p.in_channels, " M ",
           p.out_channels, " H ", p.in_h, " W ", p.in_w, " k ", p.kernel_h, "x", p.kernel_w, " s ", p.strides[0], ",",
           p.strides[1], " d ", p.dilations[0], ",", p.dilations[1], " pads ", p.pads[0], ",", p.pads[1], ",", p.pads[2],
           ",", p.pads[3], " batch ", p.batch);
      REQUIRE(got == want);
      ++compared;
    }
  }
  CHECK(compared > 200);
}

TEST_CASE("fast matmul equals fx::matmul with transposed B, B zero points, bias and clamps") {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    MatMulParams p;
    p.m = random_in(rng, 1, 40);
    p.k = random_in(rng, 1, 70);
    p.n = random_in(rng, 1, 23);
    p.b_transposed = rng() % 2;
    p.a = QParams{0.1, 0, random_8bit(rng)};
    p.a.zero_point = random_in(rng, range_of(p.a.type).min, range_of(p.a.type).max);
    p.b_zero_point = rng() % 2 ? 0 : random_in(rng, -128, 127);
    p.output = QParams{0.1, 0, random_8bit(rng)};
    p.output.zero_point = random_in(rng, range_of(p.output.type).min, range_of(p.output.type).max);
    p.clamp = random_clamp(rng);
    if (std::max(range_of(p.output.type).min, p.clamp.min) > std::min(range_of(p.output.type).max, p.clamp.max)) continue;
    const size_t per_column = rng() % 2 ? static_cast<size_t>(p.n) : 1;
    for (size_t i = 0; i < per_column; ++i) p.multipliers.push_back(random_multiplier(rng));
    const std::vector<int32_t> a = random_values(rng, static_cast<size_t>(p.m * p.k), p.a.type);
    const std::vector<int32_t> b = random_values(rng, static_cast<size_t>(p.k * p.n), QType::Int8);
    const std::vector<int32_t> bias =
        rng() % 4 == 0 ? std::vector<int32_t>{} : random_bias(rng, static_cast<size_t>(p.n), p.k, 255 * 255);
    std::vector<int32_t> want(static_cast<size_t>(p.m * p.n));
    REQUIRE(matmul(p, a, b, bias, want).ok());
    fast::PackedMatMul packed;
    REQUIRE(fast::pack_matmul(p, b, bias, packed).ok());
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(want.size(), -999);
      REQUIRE(fast::matmul(packed, isa, a, got).ok());
      REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
    }
  }
}

TEST_CASE("fast kernels report the reference's errors and refuse what they do not compute") {
  Conv2DParams p;
  p.in_channels = 2;
  p.in_h = p.in_w = 3;
  p.out_channels = 1;
  p.multipliers = {Multiplier{1 << 30, 0}};
  const std::vector<int32_t> w(2, 1);
  fast::PackedConv2D packed;
  REQUIRE(fast::pack_conv2d(p, w, {}, packed).ok());
  std::vector<int32_t> x(18, 0), y(9), y_ref(9);
  x[4] = 300;  // outside int8
  const Status want = conv2d(p, x, w, {}, y_ref);
  const Status got = fast::conv2d(packed, fast::best_isa(), x, y);
  REQUIRE_FALSE(want.ok());
  CHECK(got.message == want.message);
  CHECK_FALSE(fast::conv2d(packed, fast::best_isa(), std::vector<int32_t>(17, 0), y).ok());

  // The reference refuses a reduction that could overflow int32; so does packing.
  Conv2DParams big = p;
  const std::vector<int32_t> huge_bias{INT32_MAX - 10};
  CHECK(fast::pack_conv2d(big, w, huge_bias, packed).message == conv2d(big, std::vector<int32_t>(18, 0), w, huge_bias, y_ref).message);

  Conv2DParams wide = p;
  wide.input.type = QType::Int16;
  CHECK_FALSE(fast::pack_conv2d(wide, w, {}, packed).ok());
  Conv2DParams bad_weight = p;
  CHECK_FALSE(fast::pack_conv2d(bad_weight, std::vector<int32_t>{1, 200}, {}, packed).ok());

  MatMulParams mp;
  mp.k = 3;
  mp.multipliers = {Multiplier{-5, 0}};
  fast::PackedMatMul mpacked;
  CHECK_FALSE(fast::pack_matmul(mp, std::vector<int32_t>(3, 1), {}, mpacked).ok());
}

TEST_CASE("fast add / sub equals fx::add on random 8-bit operands, scales, clamps and aliasing") {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    const QType ta = random_8bit(rng), tb = random_8bit(rng), ty = random_8bit(rng);
    const auto qparams = [&](QType t) {
      return QParams{std::exp2(std::uniform_real_distribution<double>(-12.0, 4.0)(rng)),
                     random_in(rng, range_of(t).min, range_of(t).max), t};
    };
    AddParams p;
    REQUIRE(make_add_params(qparams(ta), qparams(tb), qparams(ty), rng() % 2 == 0, p).ok());
    p.clamp = random_clamp(rng);
    if (trial % 7 == 0) p.left_shift = random_in(rng, 0, 20);  // other valid encodings
    REQUIRE(fast::add_supported(p));
    const size_t n = static_cast<size_t>(random_in(rng, 1, 700));
    const std::vector<int32_t> a = random_values(rng, n, ta), b = random_values(rng, n, tb);
    std::vector<int32_t> want(n);
    const Status ws = add(p, a, b, want);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(n, -999);
      const Status gs = fast::add(p, isa, a, b, got);
      REQUIRE(gs.message == ws.message);
      if (ws.ok()) REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
      std::vector<int32_t> in_place = a;  // y aliasing a
      if (ws.ok()) {
        REQUIRE(fast::add(p, isa, in_place, b, in_place).ok());
        REQUIRE(in_place == want);
      }
    }
  }
  AddParams wide;
  REQUIRE(make_add_params(QParams{0.1, 0, QType::Int16}, QParams{0.1, 0, QType::Int8}, QParams{0.1, 0, QType::Int8},
                          false, wide).ok());
  CHECK_FALSE(fast::add_supported(wide));
  std::vector<int32_t> y(2);
  CHECK(fast::add(wide, fast::best_isa(), std::vector<int32_t>{40000, 1}, std::vector<int32_t>{1, 1}, y).message ==
        add(wide, std::vector<int32_t>{40000, 1}, std::vector<int32_t>{1, 1}, y).message);
}

TEST_CASE("fast mul equals fx::mul on random operands of 8 and 16 bits, clamps and aliasing") {
  std::mt19937 rng(19);
  const std::vector<QType> types{QType::Int8, QType::UInt8, QType::Int16, QType::UInt16};
  for (int trial = 0; trial < 300; ++trial) {
    const QType ta = types[rng() % 4], tb = types[rng() % 4], ty = types[rng() % 4];
    const auto qparams = [&](QType t) {
      return QParams{std::exp2(std::uniform_real_distribution<double>(-12.0, 2.0)(rng)),
                     random_in(rng, range_of(t).min, range_of(t).max), t};
    };
    MulParams p;
    REQUIRE(make_mul_params(qparams(ta), qparams(tb), qparams(ty), p).ok());
    p.clamp = random_clamp(rng);
    const size_t n = static_cast<size_t>(random_in(rng, 1, 700));
    const std::vector<int32_t> a = random_values(rng, n, ta), b = random_values(rng, n, tb);
    std::vector<int32_t> want(n);
    const Status ws = mul(p, a, b, want);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(n, -999);
      REQUIRE(fast::mul(p, isa, a, b, got).message == ws.message);
      if (!ws.ok()) continue;
      REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
      std::vector<int32_t> in_place = b;
      REQUIRE(fast::mul(p, isa, a, in_place, in_place).ok());
      REQUIRE(in_place == want);
    }
  }
  MulParams both16;
  REQUIRE(make_mul_params(QParams{0.1, 0, QType::UInt16}, QParams{0.1, 0, QType::UInt16}, QParams{0.1, 0, QType::Int8},
                          both16).ok());
  CHECK_FALSE(fast::mul_supported(both16));
}
