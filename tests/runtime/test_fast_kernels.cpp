// The fast int8 kernels (fast_kernels.h) against the scalar reference: requantize, conv2d and
// matmul on random shapes and values, on every instruction set this CPU runs; results and
// errors must be identical.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fixed_point/fast_kernels.h"
#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using qflow::Status;
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

// fx::conv2d against fast::conv2d on every instruction set: the number of sets whose output
// differs (each named in a failed check).
int fast_conv2d_mismatches(const Conv2DParams& p, const std::vector<int32_t>& x, const std::vector<int32_t>& w,
                           const std::vector<int32_t>& bias) {
  std::vector<int32_t> want(static_cast<size_t>(p.batch * p.out_channels * conv_out_h(p) * conv_out_w(p)));
  REQUIRE(conv2d(p, x, w, bias, want).is_ok());
  fast::PackedConv2D packed;
  REQUIRE(fast::pack_conv2d(p, w, bias, packed).is_ok());
  int mismatches = 0;
  for (const fast::Isa isa : isas()) {
    std::vector<int32_t> got(want.size(), -999);
    REQUIRE(fast::conv2d(packed, isa, x, got).is_ok());
    INFO(fast::isa_name(isa));
    CHECK(got == want);
    mismatches += got == want ? 0 : 1;
  }
  return mismatches;
}

// A square-kernel layer of one batch: channels, groups, plane, kernel, stride and pad.
Conv2DParams square_layer(int64_t c, int64_t m, int64_t group, int64_t h, int64_t w, int64_t k, int64_t stride,
                          int64_t pad) {
  Conv2DParams p;
  p.batch = 1;
  p.group = group;
  p.in_channels = c;
  p.out_channels = m;
  p.in_h = h;
  p.in_w = w;
  p.kernel_h = p.kernel_w = k;
  p.strides = {stride, stride};
  p.pads = {pad, pad, pad, pad};
  return p;
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

TEST_CASE("wide requantize equals fx::requantize on 64-bit sums up to and past the reference's saturation") {
  std::mt19937_64 rng(17);
  std::vector<int64_t> acc = {0, 1, -1, INT32_MAX, -int64_t{INT32_MAX}, int64_t{1} << 47, -(int64_t{1} << 47),
                              (int64_t{1} << 62) + 5, -(int64_t{1} << 62) - 5, INT64_MAX, -INT64_MAX, INT64_MIN,
                              (int64_t{1} << 47) - 1, -(int64_t{1} << 47) + 1};
  for (int i = 0; i < 3000; ++i) acc.push_back(static_cast<int64_t>(rng()) >> (rng() % 63));
  for (int i = 0; i < 3000; ++i) acc.push_back(static_cast<int64_t>(rng()) >> (17 + rng() % 46));  // below 2^47
  std::mt19937 small(5);
  for (int trial = 0; trial < 400; ++trial) {
    Multiplier m = random_multiplier(small);
    if (trial % 5 == 0) m = Multiplier{random_in(small, 1 << 30, INT32_MAX), random_in(small, kMinShift, kMaxShift)};
    const QType type = small() % 3 == 0 ? QType::UInt16 : (small() % 2 ? QType::Int8 : QType::Int16);
    const Range r = range_of(type);
    const int32_t zp = random_in(small, r.min, r.max);
    const int32_t lo = r.min, hi = r.max;
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(acc.size()), strided(2 * acc.size());
      fast::requantize_wide_row(isa, acc.data(), static_cast<int64_t>(acc.size()), m, zp, lo, hi, got.data(), 1);
      fast::requantize_wide_row(isa, acc.data(), static_cast<int64_t>(acc.size()), m, zp, lo, hi, strided.data(), 2);
      for (size_t i = 0; i < acc.size(); ++i) {
        const int32_t want = requantize(acc[i], m, zp, lo, hi);
        REQUIRE_MESSAGE(got[i] == want, fast::isa_name(isa) << " acc " << acc[i] << " m " << m.mantissa << "/" << m.shift);
        REQUIRE(strided[2 * i] == want);
      }
    }
  }
}

TEST_CASE("halves requantize equals fx::requantize of bias + 256 * high + low") {
  std::mt19937 rng(23);
  std::vector<int32_t> high = {0, 1, -1, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 12345};
  std::vector<int32_t> low = {0, -1, 1, INT32_MAX, INT32_MIN, INT32_MIN, INT32_MAX, -54321};
  for (int i = 0; i < 1000; ++i) {
    const int bits = random_in(rng, 0, 31);
    high.push_back(static_cast<int32_t>(rng()) >> bits);
    low.push_back(static_cast<int32_t>(rng()) >> random_in(rng, 0, 31));
  }
  for (int trial = 0; trial < 300; ++trial) {
    Multiplier m = random_multiplier(rng);
    if (trial % 5 == 0) m = Multiplier{random_in(rng, 1 << 30, INT32_MAX), random_in(rng, kMinShift, kMaxShift)};
    const int64_t bias = trial % 7 == 0 ? (trial % 2 ? INT32_MIN : INT32_MAX) : random_in(rng, -(1 << 30), 1 << 30);
    const QType type = rng() % 3 == 0 ? QType::UInt16 : (rng() % 2 ? QType::Int8 : QType::Int16);
    const Range r = range_of(type);
    const int32_t zp = random_in(rng, r.min, r.max);
    const auto n = static_cast<int64_t>(high.size()) - random_in(rng, 0, 7);  // vector tails
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(high.size(), -999), strided(3 * high.size(), -999);
      fast::requantize_halves_row(isa, high.data(), low.data(), bias, n, m, zp, r.min, r.max, got.data(), 1);
      fast::requantize_halves_row(isa, high.data(), low.data(), bias, n, m, zp, r.min, r.max, strided.data(), 3);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t sum = bias + int64_t{high[static_cast<size_t>(i)]} * 256 + low[static_cast<size_t>(i)];
        const int32_t want = requantize(sum, m, zp, r.min, r.max);
        REQUIRE_MESSAGE(got[static_cast<size_t>(i)] == want,
                        fast::isa_name(isa) << " sum " << sum << " m " << m.mantissa << "/" << m.shift);
        REQUIRE(strided[static_cast<size_t>(3 * i)] == want);
      }
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
    if (kind == 1 && trial % 4 == 1) p.kernel_h = p.kernel_w = trial % 8 == 1 ? 7 : 5;  // the paired depthwise taps
    p.strides = {random_in(rng, 1, 3), random_in(rng, 1, 3)};
    p.dilations = {random_in(rng, 1, 2), random_in(rng, 1, 2)};
    p.pads = {random_in(rng, 0, 2), random_in(rng, 0, 2), random_in(rng, 0, 2), random_in(rng, 0, 2)};
    if (conv_out_h(p) < 1 || conv_out_w(p) < 1) continue;
    p.input = QParams{0.1, 0, random_8bit(rng)};
    p.input.zero_point = random_in(rng, range_of(p.input.type).min, range_of(p.input.type).max);
    // 16-bit activations: the zero points whose centered values fit int16.
    if (trial % 5 == 4) p.input = QParams{0.1, 0, QType::Int16};
    if (trial % 10 == 9) p.input = QParams{0.1, 32768, QType::UInt16};
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
    INFO("trial ", trial, " group ", p.group, " C ", p.in_channels, " M ", p.out_channels, " H ", p.in_h, " W ",
         p.in_w, " k ", p.kernel_h, "x", p.kernel_w, " s ", p.strides[0], ",", p.strides[1], " d ", p.dilations[0], ",",
         p.dilations[1], " pads ", p.pads[0], ",", p.pads[1], ",", p.pads[2], ",", p.pads[3], " batch ", p.batch);
    compared += fast_conv2d_mismatches(p, x, w, bias) == 0 ? static_cast<int>(isas().size()) : 0;
  }
  CHECK(compared > 200);
}

TEST_CASE("fast conv2d with pads far larger than its input reads im2col rows from the input, not a padded plane") {
  // A padded plane would be about 85 000 values for 6 input values: the rows come from the
  // input itself, with the same results.
  std::mt19937 rng(13);
  for (const QType t : {QType::Int16, QType::Int8}) {
    Conv2DParams p;
    p.in_channels = 3;
    p.out_channels = 5;
    p.in_h = 2;
    p.in_w = 1;
    p.kernel_h = p.kernel_w = 3;
    p.strides = {2, 3};
    p.dilations = {2, 1};
    p.pads = {150, 140, 130, 160};
    p.input = QParams{0.1, t == QType::Int8 ? 3 : 0, t};
    p.output = QParams{0.1, 0, QType::Int8};
    p.multipliers = {random_multiplier(rng)};
    const std::vector<int32_t> x = random_values(rng, 6, t);
    const std::vector<int32_t> w = random_values(rng, 5 * 27, QType::Int8);
    const std::vector<int32_t> bias = random_bias(rng, 5, 27, 255 * 128);
    CHECK(fast_conv2d_mismatches(p, x, w, bias) == 0);
  }
}

TEST_CASE("fast conv2d equals fx::conv2d on layers that span many pixel tiles") {
  // Tiles that start inside an output row, 1x1 runs merged across rows, strided gathers and
  // the quads' 8-row weight blocks with channel counts that do not fill them.
  struct Layer {
    int64_t c, m, h, w, k, stride, pad;
  };
  std::mt19937 rng(5);
  for (const Layer& l : {Layer{64, 24, 37, 41, 3, 1, 1}, Layer{48, 40, 29, 30, 1, 1, 0}, Layer{36, 12, 33, 35, 3, 2, 1},
                         Layer{20, 9, 26, 23, 5, 2, 2}}) {
    Conv2DParams p = square_layer(l.c, l.m, 1, l.h, l.w, l.k, l.stride, l.pad);
    for (const QType type : {QType::Int8, QType::UInt8}) {
      p.input = QParams{0.1, random_in(rng, range_of(type).min, range_of(type).max), type};
      p.output = QParams{0.1, 3, QType::Int8};
      p.multipliers = {Multiplier{random_in(rng, 1 << 30, INT32_MAX), 14}};
      const int64_t k = p.in_channels * p.kernel_h * p.kernel_w;
      const std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.in_channels * p.in_h * p.in_w), type);
      const std::vector<int32_t> w = random_values(rng, static_cast<size_t>(p.out_channels * k), QType::Int8);
      const std::vector<int32_t> bias = random_bias(rng, static_cast<size_t>(p.out_channels), k, 255 * 128);
      INFO("C ", l.c, " M ", l.m, " ", l.h, "x", l.w, " k ", l.k, " s ", l.stride);
      CHECK(fast_conv2d_mismatches(p, x, w, bias) == 0);
    }
  }
}

TEST_CASE("fast conv2d equals fx::conv2d on int16 layers: pointwise runs, split weights, depthwise vectors") {
  // Odd channel counts per group (a last pair with a zero row), groups, several pixel tiles,
  // and depthwise rows of more than one 16-pixel vector with a part-filled last one.
  struct Layer {
    int64_t c, m, group, h, w, k, stride, pad;
  };
  std::mt19937 rng(41);
  for (const Layer& l : {Layer{15, 20, 1, 9, 40, 1, 1, 0}, Layer{24, 36, 2, 12, 20, 1, 1, 0}, Layer{33, 9, 3, 5, 70, 1, 1, 0},
                         Layer{40, 40, 40, 12, 37, 3, 1, 1}, Layer{24, 24, 24, 13, 41, 3, 2, 1},
                         Layer{16, 16, 16, 12, 80, 5, 1, 2}, Layer{16, 32, 16, 7, 35, 5, 2, 2}}) {
    Conv2DParams p = square_layer(l.c, l.m, l.group, l.h, l.w, l.k, l.stride, l.pad);
    for (const QType weight : {QType::Int16, QType::Int8}) {
      p.input = QParams{0.1, 0, QType::Int16};
      p.weight_type = weight;
      p.output = QParams{0.1, random_in(rng, -5, 5), QType::Int16};
      p.multipliers = {Multiplier{random_in(rng, 1 << 30, INT32_MAX), random_in(rng, 20, 30)}};
      const int64_t k = p.in_channels / p.group * p.kernel_h * p.kernel_w;
      std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.in_channels * p.in_h * p.in_w), p.input.type);
      const std::vector<int32_t> w = random_values(rng, static_cast<size_t>(p.out_channels * k), weight);
      for (size_t i = 0; i < x.size(); i += 7) x[i] = range_of(p.input.type).min;  // the largest magnitudes
      std::vector<int32_t> bias(static_cast<size_t>(p.out_channels));
      for (auto& v : bias) v = random_in(rng, -(1 << 30), 1 << 30);
      INFO("C ", l.c, " M ", l.m, " g ", l.group, " ", l.h, "x", l.w, " k ", l.k, " s ", l.stride, " weights ",
           weight == QType::Int16 ? "int16" : "int8");
      CHECK(fast_conv2d_mismatches(p, x, w, bias) == 0);
    }
  }
}

TEST_CASE("fast depthwise conv2d equals fx::conv2d on byte windows and on geometry they do not hold") {
  // Several output rows per window, wide rows in chunks of 16 columns, strides, dilations,
  // channel multipliers and kernels of 1 to 3 quads per row; then a stride and a left pad
  // that leave the 64-byte window, which take the int32 path.
  struct Layer {
    int64_t c, mult, h, w, kh, kw, sy, sx, d, pad;
    bool windows;
  };
  std::mt19937 rng(23);
  for (const Layer& l : {Layer{5, 1, 7, 7, 3, 3, 1, 1, 1, 1, true}, Layer{4, 1, 14, 14, 3, 3, 2, 2, 1, 1, true},
                         Layer{3, 2, 24, 40, 5, 5, 1, 1, 1, 2, true}, Layer{3, 1, 23, 45, 3, 3, 2, 2, 1, 1, true},
                         Layer{2, 1, 9, 70, 3, 3, 1, 1, 2, 2, true}, Layer{3, 1, 5, 37, 7, 7, 1, 1, 1, 3, true},
                         Layer{2, 1, 20, 20, 9, 9, 1, 1, 1, 4, true}, Layer{3, 1, 4, 3, 3, 3, 1, 1, 1, 1, true},
                         Layer{2, 1, 6, 100, 1, 1, 1, 7, 1, 0, false}, Layer{2, 1, 5, 90, 3, 3, 1, 1, 1, 70, false}}) {
    Conv2DParams p;
    p.batch = 2;
    p.group = p.in_channels = l.c;
    p.out_channels = l.c * l.mult;
    p.in_h = l.h;
    p.in_w = l.w;
    p.kernel_h = l.kh;
    p.kernel_w = l.kw;
    p.strides = {l.sy, l.sx};
    p.dilations = {l.d, l.d};
    p.pads = {l.pad, l.pad, l.pad, l.pad};
    for (const QType type : {QType::Int8, QType::UInt8}) {
      p.input = QParams{0.1, random_in(rng, range_of(type).min, range_of(type).max), type};
      p.output = QParams{0.1, random_in(rng, -20, 20), QType::Int8};
      p.multipliers.clear();
      for (int64_t m = 0; m < p.out_channels; ++m) p.multipliers.push_back(Multiplier{random_in(rng, 1 << 30, INT32_MAX), 9});
      const int64_t k = p.kernel_h * p.kernel_w;
      const std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w), type);
      const std::vector<int32_t> w = random_values(rng, static_cast<size_t>(p.out_channels * k), QType::Int8);
      const std::vector<int32_t> bias = random_bias(rng, static_cast<size_t>(p.out_channels), k, 255 * 128);
      INFO("C ", l.c, " x", l.mult, " ", l.h, "x", l.w, " k ", l.kh, "x", l.kw, " s ", l.sy, ",", l.sx, " d ", l.d,
           " pad ", l.pad, " ", type == QType::Int8 ? "int8" : "uint8");
      fast::PackedConv2D packed;
      REQUIRE(fast::pack_conv2d(p, w, bias, packed).is_ok());
      CHECK(packed.windows.weights.empty() == !l.windows);
      CHECK(fast_conv2d_mismatches(p, x, w, bias) == 0);
    }
  }
}

TEST_CASE("gemm_quads_u8s8 wraps like int32 on every instruction set") {
  std::mt19937 rng(8);
  const int64_t rows = 2 * fast::kQuadRowBlock, cols = 2 * fast::kQuadPixelBlock, quads = 37;
  std::vector<int8_t> w(static_cast<size_t>(rows * quads * 4));
  std::vector<uint8_t> x(static_cast<size_t>(quads * cols * 4));
  for (auto& v : w) v = static_cast<int8_t>(random_in(rng, -128, 127));
  for (auto& v : x) v = static_cast<uint8_t>(random_in(rng, 0, 255));
  // Starting sums at the ends of int32: the lanes must wrap, not saturate.
  std::vector<int32_t> init(static_cast<size_t>(rows));
  for (size_t r = 0; r < init.size(); ++r) init[r] = r % 2 ? INT32_MAX - random_in(rng, 0, 1000) : INT32_MIN + random_in(rng, 0, 1000);
  std::vector<int32_t> want(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t sum = init[static_cast<size_t>(r)];
      for (int64_t q = 0; q < quads; ++q)
        for (int64_t j = 0; j < 4; ++j)
          sum += int64_t{w[static_cast<size_t>(((r / fast::kQuadRowBlock * quads + q) * fast::kQuadRowBlock + r % fast::kQuadRowBlock) * 4 + j)]} *
                 x[static_cast<size_t>((q * cols + c) * 4 + j)];
      want[static_cast<size_t>(r * cols + c)] = static_cast<int32_t>(static_cast<uint32_t>(sum));
    }
  for (const fast::Isa isa : isas()) {
    std::vector<int32_t> got(want.size(), -1);
    fast::gemm_quads_u8s8(isa, w.data(), rows, x.data(), cols, quads, init.data(), got.data(), cols);
    INFO(fast::isa_name(isa));
    CHECK(got == want);
  }
}

TEST_CASE("fast conv2d takes 16-bit activations only where int16 values and int32 sums are exact") {
  CHECK(fast::supports_conv2d(QType::Int8, 100, QType::Int8, 1 << 20, 0));
  CHECK(fast::supports_conv2d(QType::Int16, 0, QType::Int8, 511, 0));
  CHECK_FALSE(fast::supports_conv2d(QType::Int16, 0, QType::Int8, 512, 0));  // 512 * 2^15 * 2^7 = 2^31
  CHECK_FALSE(fast::supports_conv2d(QType::Int16, 0, QType::Int8, 511, 1 << 23));
  CHECK_FALSE(fast::supports_conv2d(QType::Int16, 5, QType::Int8, 9, 0));  // -32768 - 5 leaves int16
  CHECK(fast::supports_conv2d(QType::UInt16, 32768, QType::Int8, 9, 0));
  CHECK_FALSE(fast::supports_conv2d(QType::UInt16, 0, QType::Int8, 9, 0));
  CHECK_FALSE(fast::supports_conv2d(QType::Int16, 0, QType::Int16, 9, 0));
}

TEST_CASE("chunked reductions: 16-bit activations with long reductions or int16 weights equal the reference") {
  CHECK(fast::chunk_reduction(QType::Int16, 0, QType::Int16) == 511);  // 511 * 2^15 * 2^7 < 2^31
  CHECK(fast::chunk_reduction(QType::Int16, 0, QType::Int8) == 511);
  CHECK(fast::chunk_reduction(QType::UInt16, 32768, QType::Int16) == 511);
  CHECK(fast::chunk_reduction(QType::Int16, 5, QType::Int16) == 0);     // x - 5 leaves int16
  CHECK(fast::chunk_reduction(QType::Int16, 0, QType::Int16, 3) == 0);  // no split with a weight zero point
  for (const int32_t w : {-32768, -32767, -129, -128, -1, 0, 1, 127, 128, 255, 32767}) {
    CHECK(fast::weight_high(w) * 256 + fast::weight_low(w) == w);
    CHECK(std::abs(fast::weight_high(w)) <= 128);
    CHECK(std::abs(fast::weight_low(w)) <= 128);
  }
  std::mt19937 rng(29);
  int compared = 0;
  for (int trial = 0; trial < 80; ++trial) {
    Conv2DParams p;
    const bool depthwise = trial % 5 == 2;  // one input channel per group
    p.group = depthwise ? random_in(rng, 1, 6) : trial % 4 == 3 ? 2 : 1;
    // Reductions past one chunk (511 products) in a third of the trials.
    const int64_t cg = depthwise ? 1 : trial % 3 == 0 ? random_in(rng, 60, 140) : random_in(rng, 2, 24);
    p.in_channels = p.group * cg;
    p.out_channels = p.group * random_in(rng, 1, depthwise ? 2 : 9);
    p.in_h = random_in(rng, 1, 9);
    p.in_w = random_in(rng, 1, 9);
    p.kernel_h = depthwise ? random_in(rng, 3, 5) : trial % 2 ? 1 : random_in(rng, 1, 3);
    p.kernel_w = depthwise ? p.kernel_h : trial % 2 ? 1 : random_in(rng, 1, 3);
    p.strides = {random_in(rng, 1, 2), random_in(rng, 1, 2)};
    p.pads = {random_in(rng, 0, 1), random_in(rng, 0, 1), random_in(rng, 0, 1), random_in(rng, 0, 1)};
    if (conv_out_h(p) < 1 || conv_out_w(p) < 1) continue;
    p.input = trial % 5 == 4 ? QParams{0.1, 32768, QType::UInt16} : QParams{0.1, 0, QType::Int16};
    p.weight_type = trial % 4 == 1 ? QType::Int8 : QType::Int16;
    p.output = QParams{0.1, random_in(rng, -5, 5), QType::Int16};
    p.multipliers.push_back(Multiplier{random_in(rng, 1 << 30, INT32_MAX), random_in(rng, 10, 30)});
    const int64_t k = cg * p.kernel_h * p.kernel_w;
    std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w), p.input.type);
    std::vector<int32_t> w = random_values(rng, static_cast<size_t>(p.out_channels * k), p.weight_type);
    if (trial % 6 == 0) {  // the extremes: the largest products, all of one sign
      for (auto& v : x) v = range_of(p.input.type).min;
      for (auto& v : w) v = range_of(p.weight_type).min;
    }
    std::vector<int32_t> bias(static_cast<size_t>(p.out_channels));
    for (auto& v : bias) v = random_in(rng, -(1 << 30), 1 << 30);
    fast::PackedConv2D packed;
    const Status packing = fast::pack_conv2d(p, w, bias, packed);
    REQUIRE_MESSAGE(packing.is_ok(), packing.message());
    int64_t max_bias = 0;
    for (const int32_t v : bias) max_bias = std::max<int64_t>(max_bias, std::abs(v));
    CHECK((packed.chunk_pairs > 0) == !fast::supports_conv2d(p.input.type, p.input.zero_point, p.weight_type, k, max_bias));
    INFO("trial ", trial, " group ", p.group, " C ", p.in_channels, " M ", p.out_channels, " k ", p.kernel_h, "x",
         p.kernel_w, " weights ",
         p.weight_type == QType::Int16 ? "int16" : "int8");
    compared += fast_conv2d_mismatches(p, x, w, bias) == 0 ? 1 : 0;
  }
  CHECK(compared > 60);

  for (int trial = 0; trial < 40; ++trial) {
    MatMulParams p;
    p.m = random_in(rng, 1, 60);
    p.k = trial % 3 == 0 ? random_in(rng, 500, 1400) : random_in(rng, 1, 200);
    p.n = random_in(rng, 1, 30);
    p.b_transposed = rng() % 2;
    p.a = trial % 5 == 4 ? QParams{0.1, 32768, QType::UInt16} : QParams{0.1, 0, QType::Int16};
    p.b_type = trial % 4 == 1 ? QType::Int8 : QType::Int16;
    p.output = QParams{0.1, 0, QType::Int16};
    p.multipliers.push_back(Multiplier{random_in(rng, 1 << 30, INT32_MAX), random_in(rng, 10, 30)});
    std::vector<int32_t> a = random_values(rng, static_cast<size_t>(p.m * p.k), p.a.type);
    std::vector<int32_t> b = random_values(rng, static_cast<size_t>(p.k * p.n), p.b_type);
    if (trial % 6 == 0) {
      for (auto& v : a) v = range_of(p.a.type).min;
      for (auto& v : b) v = range_of(p.b_type).min;
    }
    std::vector<int32_t> bias(static_cast<size_t>(p.n));
    for (auto& v : bias) v = random_in(rng, -(1 << 30), 1 << 30);
    std::vector<int32_t> want(static_cast<size_t>(p.m * p.n));
    REQUIRE(matmul(p, a, b, bias, want).is_ok());
    fast::PackedMatMul packed;
    REQUIRE(fast::pack_matmul(p, b, bias, packed).is_ok());
    CHECK(packed.chunk_depth > 0);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(want.size(), -999);
      REQUIRE(fast::matmul(packed, isa, a, got).is_ok());
      REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
    }
  }
}

TEST_CASE("fast matmul equals fx::matmul with transposed B, B zero points, bias and clamps") {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    MatMulParams p;
    p.m = trial % 10 == 0 ? random_in(rng, 257, 300) : random_in(rng, 1, 40);  // several blocks of A's rows
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
    REQUIRE(matmul(p, a, b, bias, want).is_ok());
    fast::PackedMatMul packed;
    REQUIRE(fast::pack_matmul(p, b, bias, packed).is_ok());
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(want.size(), -999);
      REQUIRE(fast::matmul(packed, isa, a, got).is_ok());
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
  REQUIRE(fast::pack_conv2d(p, w, {}, packed).is_ok());
  std::vector<int32_t> x(18, 0), y(9), y_ref(9);
  x[4] = 300;  // outside int8
  const Status want = conv2d(p, x, w, {}, y_ref);
  const Status got = fast::conv2d(packed, fast::best_isa(), x, y);
  REQUIRE_FALSE(want.is_ok());
  CHECK(got.message() == want.message());
  CHECK_FALSE(fast::conv2d(packed, fast::best_isa(), std::vector<int32_t>(17, 0), y).is_ok());

  // The reference refuses a reduction that could overflow int32; so does packing.
  Conv2DParams big = p;
  const std::vector<int32_t> huge_bias{INT32_MAX - 10};
  CHECK(fast::pack_conv2d(big, w, huge_bias, packed).message() == conv2d(big, std::vector<int32_t>(18, 0), w, huge_bias, y_ref).message());

  Conv2DParams wide = p;  // 16-bit, but x - 7 leaves int16 for x = -32768
  wide.input.type = QType::Int16;
  wide.input.zero_point = 7;
  CHECK_FALSE(fast::pack_conv2d(wide, w, {}, packed).is_ok());
  Conv2DParams bad_weight = p;
  CHECK_FALSE(fast::pack_conv2d(bad_weight, std::vector<int32_t>{1, 200}, {}, packed).is_ok());

  MatMulParams mp;
  mp.k = 3;
  mp.multipliers = {Multiplier{-5, 0}};
  fast::PackedMatMul mpacked;
  CHECK_FALSE(fast::pack_matmul(mp, std::vector<int32_t>(3, 1), {}, mpacked).is_ok());
}

TEST_CASE("fast add / sub equals fx::add on random 8- and 16-bit operands, extremes, scales, clamps and aliasing") {
  std::mt19937 rng(17);
  const std::vector<QType> types{QType::Int8, QType::UInt8, QType::Int16, QType::UInt16};
  for (int trial = 0; trial < 400; ++trial) {
    const QType ta = types[rng() % 4], tb = types[rng() % 4], ty = types[rng() % 4];
    const auto qparams = [&](QType t) {
      // Zero points at the ends of the range now and then: the widest |q - z| of 16-bit types.
      const int32_t z = trial % 5 == 0 ? (rng() % 2 ? range_of(t).min : range_of(t).max)
                                       : random_in(rng, range_of(t).min, range_of(t).max);
      return QParams{std::exp2(std::uniform_real_distribution<double>(-12.0, 4.0)(rng)), z, t};
    };
    AddParams p;
    REQUIRE(make_add_params(qparams(ta), qparams(tb), qparams(ty), rng() % 2 == 0, p).is_ok());
    p.clamp = random_clamp(rng);
    REQUIRE(fast::add_supported(p));  // every encoding make_add_params gives
    if (trial % 7 == 0 && !is_16bit(ta) && !is_16bit(tb)) p.left_shift = random_in(rng, 0, 20);  // other valid ones
    const size_t n = static_cast<size_t>(random_in(rng, 1, 700));
    std::vector<int32_t> a = random_values(rng, n, ta), b = random_values(rng, n, tb);
    a[0] = range_of(ta).min;
    b[0] = rng() % 2 ? range_of(tb).min : range_of(tb).max;
    a[n - 1] = range_of(ta).max;
    std::vector<int32_t> want(n);
    const Status ws = add(p, a, b, want);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(n, -999);
      const Status gs = fast::add(p, isa, a, b, got);
      REQUIRE(gs.message() == ws.message());
      if (ws.is_ok()) REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
      std::vector<int32_t> in_place = a;  // y aliasing a
      if (ws.is_ok()) {
        REQUIRE(fast::add(p, isa, in_place, b, in_place).is_ok());
        REQUIRE(in_place == want);
      }
    }
  }
  // A 16-bit operand shifted by 20 leaves int32: the reference computes it, with its errors.
  AddParams wide;
  REQUIRE(make_add_params(QParams{0.1, 0, QType::Int16}, QParams{0.1, 0, QType::Int8}, QParams{0.1, 0, QType::Int8},
                          false, wide).is_ok());
  wide.left_shift = 20;
  CHECK_FALSE(fast::add_supported(wide));
  std::vector<int32_t> y(2), want(2);
  REQUIRE(add(wide, std::vector<int32_t>{-32768, 32767}, std::vector<int32_t>{1, -128}, want).is_ok());
  REQUIRE(fast::add(wide, fast::best_isa(), std::vector<int32_t>{-32768, 32767}, std::vector<int32_t>{1, -128}, y).is_ok());
  CHECK(y == want);
  CHECK(fast::add(wide, fast::best_isa(), std::vector<int32_t>{40000, 1}, std::vector<int32_t>{1, 1}, y).message() ==
        add(wide, std::vector<int32_t>{40000, 1}, std::vector<int32_t>{1, 1}, y).message());
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
    REQUIRE(make_mul_params(qparams(ta), qparams(tb), qparams(ty), p).is_ok());
    p.clamp = random_clamp(rng);
    const size_t n = static_cast<size_t>(random_in(rng, 1, 700));
    const std::vector<int32_t> a = random_values(rng, n, ta), b = random_values(rng, n, tb);
    std::vector<int32_t> want(n);
    const Status ws = mul(p, a, b, want);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(n, -999);
      REQUIRE(fast::mul(p, isa, a, b, got).message() == ws.message());
      if (!ws.is_ok()) continue;
      REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
      std::vector<int32_t> in_place = b;
      REQUIRE(fast::mul(p, isa, a, in_place, in_place).is_ok());
      REQUIRE(in_place == want);
    }
  }
  MulParams both16;
  REQUIRE(make_mul_params(QParams{0.1, 0, QType::UInt16}, QParams{0.1, 0, QType::UInt16}, QParams{0.1, 0, QType::Int8},
                          both16).is_ok());
  CHECK_FALSE(fast::mul_supported(both16));
}

TEST_CASE("fast lut equals fx::apply_lut on 8-bit and segmented 16-bit tables, and reports its errors") {
  std::mt19937 rng(23);
  const std::vector<QType> types{QType::Int8, QType::UInt8, QType::Int16, QType::UInt16};
  for (int trial = 0; trial < 200; ++trial) {
    Lut lut;
    lut.input = QParams{0.05, 0, types[rng() % 4]};
    lut.output = QParams{0.05, 0, types[rng() % 4]};
    const Range r = range_of(lut.input.type);
    lut.segment_bits = is_16bit(lut.input.type) ? (rng() % 2 ? 7 : 8) : 0;
    const size_t count = lut.segment_bits == 0 ? 256 : (size_t{1} << (16 - lut.segment_bits)) + 1;
    // Any int32 entries, not only the output type's: the interpolation must not wrap.
    lut.entries = trial % 5 == 0 ? std::vector<int32_t>(count) : random_values(rng, count, lut.output.type);
    if (trial % 5 == 0)
      for (auto& e : lut.entries) e = static_cast<int32_t>(rng());
    const size_t n = static_cast<size_t>(random_in(rng, 1, 900));
    std::vector<int32_t> x = random_values(rng, n, lut.input.type);
    x[0] = r.min;
    x[n - 1] = r.max;
    if (trial % 9 == 0) x[n / 2] = r.max + 1;  // outside the type: the reference's message
    std::vector<int32_t> want(n);
    const Status ws = apply_lut(lut, x, want);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(n, -999);
      REQUIRE(fast::apply_lut(lut, isa, x, got).message() == ws.message());
      if (ws.is_ok()) REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
    }
  }
  // Whole 16-bit tables (65536 entries, fused elementwise chains), on the lookup the CPU takes
  // and on the gather lookup whatever the CPU.
  for (const QType type : {QType::Int16, QType::UInt16}) {
    Lut lut;
    lut.input = QParams{0.05, 0, type};
    lut.output = QParams{0.05, 0, QType::Int16};
    lut.entries = random_values(rng, 65536, QType::Int16);
    const Range r = range_of(type);
    std::vector<int32_t> x = random_values(rng, 5003, type);
    x[0] = r.min;
    x[1] = r.max;
    std::vector<int32_t> want(x.size());
    REQUIRE(apply_lut(lut, x, want).is_ok());
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(x.size(), -999);
      REQUIRE(fast::apply_lut(lut, isa, x, got).is_ok());
      CHECK_MESSAGE(got == want, fast::isa_name(isa));
    }
    std::vector<int32_t> gathered(x.size(), -999);
    if (fast::lookup_gathered(lut.entries.data(), r.min, x, gathered)) CHECK(gathered == want);
  }
  Lut short_table;
  short_table.entries.assign(10, 0);
  std::vector<int32_t> y(1);
  CHECK(fast::apply_lut(short_table, fast::best_isa(), std::vector<int32_t>{0}, y).message() ==
        apply_lut(short_table, std::vector<int32_t>{0}, y).message());
}

namespace {

Pool2DParams random_pool(std::mt19937& rng, bool dilated) {
  const std::vector<QType> types{QType::Int8, QType::UInt8, QType::Int16, QType::UInt16};
  Pool2DParams p;
  p.batch = random_in(rng, 1, 2);
  p.channels = random_in(rng, 1, 5);
  p.in_h = random_in(rng, 1, 17);
  p.in_w = random_in(rng, 1, rng() % 3 ? 17 : 60);  // rows of several 16-lane vectors too
  p.kernel_h = random_in(rng, 1, 5);
  p.kernel_w = random_in(rng, 1, 5);
  p.strides = {random_in(rng, 1, 3), random_in(rng, 1, 3)};
  if (dilated) p.dilations = {random_in(rng, 1, 2), random_in(rng, 1, 2)};
  p.pads = {random_in(rng, 0, static_cast<int32_t>(p.kernel_h) - 1), random_in(rng, 0, static_cast<int32_t>(p.kernel_w) - 1),
            random_in(rng, 0, static_cast<int32_t>(p.kernel_h) - 1), random_in(rng, 0, static_cast<int32_t>(p.kernel_w) - 1)};
  p.count_include_pad = rng() % 2;
  p.input = QParams{0.1, 0, types[rng() % 4]};
  p.input.zero_point = random_in(rng, range_of(p.input.type).min, range_of(p.input.type).max);
  p.output = p.input;
  return p;
}

}  // namespace

TEST_CASE("fast max_pool and average_pool equal the reference on random windows, pads, strides and types") {
  std::mt19937 rng(29);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool max = trial % 2 == 0;
    Pool2DParams p = random_pool(rng, max);
    if (!max && rng() % 3 != 0) {  // rescaled averages, or the same parameters
      p.output = QParams{p.input.scale * std::exp2(std::uniform_real_distribution<double>(-3.0, 3.0)(rng)), 0,
                         rng() % 2 ? QType::Int8 : QType::UInt16};
      p.output.zero_point = random_in(rng, range_of(p.output.type).min, range_of(p.output.type).max);
    }
    if (pool_out_h(p) < 1 || pool_out_w(p) < 1) continue;
    std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.batch * p.channels * p.in_h * p.in_w), p.input.type);
    if (trial % 11 == 0) x[0] = range_of(p.input.type).max + 1;  // the reference's message
    if (trial % 13 == 0)  // the extremes of the type
      for (size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? range_of(p.input.type).min : range_of(p.input.type).max;
    std::vector<int32_t> want(static_cast<size_t>(p.batch * p.channels * pool_out_h(p) * pool_out_w(p)));
    const Status ws = max ? max_pool(p, x, want) : average_pool(p, x, want);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(want.size(), -999);
      const Status gs = max ? fast::max_pool(p, isa, x, got) : fast::average_pool(p, isa, x, got);
      INFO(std::string(fast::isa_name(isa)), " trial ", trial, " max ", max, " H ", p.in_h, " W ", p.in_w, " k ",
           p.kernel_h, "x", p.kernel_w, " s ", p.strides[0], ",", p.strides[1], " pads ", p.pads[0], ",", p.pads[1],
           ",", p.pads[2], ",", p.pads[3], " include_pad ", p.count_include_pad);
      REQUIRE(gs.message() == ws.message());
      if (ws.is_ok()) {
        REQUIRE(got == want);
        ++compared;
      }
    }
  }
  CHECK(compared > 300);
  // Parameters the reference refuses: the same messages.
  Pool2DParams bad;
  bad.in_h = bad.in_w = 4;
  bad.kernel_h = bad.kernel_w = 2;
  bad.pads = {2, 0, 0, 0};
  std::vector<int32_t> x(16, 0), y(25), y_ref(25);
  CHECK(fast::max_pool(bad, fast::best_isa(), x, y).message() == max_pool(bad, x, y_ref).message());
  CHECK(fast::average_pool(bad, fast::best_isa(), x, y).message() == average_pool(bad, x, y_ref).message());
  Pool2DParams dilated;
  dilated.in_h = dilated.in_w = 4;
  dilated.kernel_h = dilated.kernel_w = 2;
  dilated.dilations = {2, 1};
  std::vector<int32_t> y2(6), y2_ref(6);
  CHECK(fast::average_pool(dilated, fast::best_isa(), x, y2).message() == average_pool(dilated, x, y2_ref).message());
}

TEST_CASE("fast global_average_pool equals the reference, rescaled or not") {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 120; ++trial) {
    const QType t = rng() % 2 ? QType::UInt8 : QType::Int16;
    const QParams in{0.02, random_in(rng, range_of(t).min, range_of(t).max), t};
    QParams out = in;
    if (trial % 3 != 0) out = QParams{0.02 * std::exp2(std::uniform_real_distribution<double>(-4.0, 4.0)(rng)), 3, QType::Int8};
    const int64_t n = random_in(rng, 1, 2), c = random_in(rng, 1, 6), h = random_in(rng, 1, 40), w = random_in(rng, 1, 40);
    const std::vector<int32_t> x = random_values(rng, static_cast<size_t>(n * c * h * w), t);
    std::vector<int32_t> want(static_cast<size_t>(n * c)), got(want.size(), -999);
    const Status ws = global_average_pool(n, c, h, w, in, out, x, want);
    for (const fast::Isa isa : isas()) {
      REQUIRE(fast::global_average_pool(n, c, h, w, in, out, isa, x, got).message() == ws.message());
      if (ws.is_ok()) REQUIRE_MESSAGE(got == want, "trial " << trial);
    }
  }
  std::vector<int32_t> y(1), y_ref(1);
  const QParams zero_scale{0.0, 0, QType::Int8};
  CHECK(fast::global_average_pool(1, 1, 2, 2, zero_scale, zero_scale, fast::best_isa(), std::vector<int32_t>(4, 0), y).message() ==
        global_average_pool(1, 1, 2, 2, zero_scale, zero_scale, std::vector<int32_t>(4, 0), y_ref).message());
}

// Random multipliers, inputs, weights and bias for `p` (16-bit outputs: multipliers near 1
// and a bias up to 2^30; `extremes`: every input and weight at its type's minimum, the largest
// products), then fast::conv_transpose2d under every cap against fx::conv_transpose2d.
// `packed` receives the packed kernel. Returns the caps compared; 0 when the reference refuses
// p, which the packing must then refuse with the same message.
int compare_conv_transpose2d(std::mt19937& rng, ConvTranspose2DParams& p, bool extremes,
                             fast::PackedConvTranspose2D& packed) {
  const bool wide = is_16bit(p.output.type);
  const int64_t mg = p.out_channels / p.group, k = p.in_channels / p.group * p.kernel_h * p.kernel_w;
  const size_t per_channel = rng() % 2 ? static_cast<size_t>(p.out_channels) : 1;
  for (size_t i = 0; i < per_channel; ++i)
    p.multipliers.push_back(wide ? Multiplier{random_in(rng, 1 << 30, INT32_MAX), random_in(rng, 10, 30)}
                                 : random_multiplier(rng));
  std::vector<int32_t> x = random_values(rng, static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w), p.input.type);
  std::vector<int32_t> w = random_values(rng, static_cast<size_t>(p.in_channels * mg * p.kernel_h * p.kernel_w), p.weight_type);
  if (extremes) {
    for (auto& v : x) v = range_of(p.input.type).min;
    for (auto& v : w) v = range_of(p.weight_type).min;
  }
  std::vector<int32_t> bias =
      rng() % 4 == 0 ? std::vector<int32_t>{} : random_bias(rng, static_cast<size_t>(p.out_channels), k, 255 * 128);
  if (wide)
    for (auto& v : bias) v = random_in(rng, -(1 << 30), 1 << 30);
  std::vector<int32_t> want(static_cast<size_t>(p.batch * p.out_channels * conv_transpose_out_h(p) * conv_transpose_out_w(p)));
  const Status ws = conv_transpose2d(p, x, w, bias, want);
  REQUIRE(fast::pack_conv_transpose2d(p, w, bias, packed).message() == ws.message());
  if (!ws.is_ok()) return 0;
  int caps = 0;
  for (const fast::Isa isa : isas()) {
    std::vector<int32_t> got(want.size(), -999);
    REQUIRE(fast::conv_transpose2d(packed, isa, x, got).is_ok());
    INFO(std::string(fast::isa_name(isa)));
    REQUIRE(got == want);
    ++caps;
  }
  return caps;
}

TEST_CASE("fast conv_transpose2d equals fx::conv_transpose2d on random strides, pads, dilations and groups") {
  std::mt19937 rng(37);
  int compared = 0;
  for (int trial = 0; trial < 250; ++trial) {
    ConvTranspose2DParams p;
    p.batch = random_in(rng, 1, 2);
    p.group = trial % 3 == 0 ? random_in(rng, 2, 3) : 1;
    // 16-bit inputs with int8 or int16 weights in every fourth trial (chunked, sums in int64),
    // some with more input channels than one chunk holds (496).
    const bool wide = trial % 4 == 3;
    p.in_channels = p.group * (wide && trial % 8 == 7 ? random_in(rng, 500, 640) : random_in(rng, 1, 6));
    p.out_channels = p.group * random_in(rng, 1, 5);
    p.in_h = random_in(rng, 1, p.in_channels > 100 ? 3 : 11);
    p.in_w = random_in(rng, 1, p.in_channels > 100 ? 3 : 11);
    p.kernel_h = random_in(rng, 1, 4);
    p.kernel_w = random_in(rng, 1, 4);
    p.strides = {random_in(rng, 1, 3), random_in(rng, 1, 3)};
    p.dilations = {random_in(rng, 1, 2), random_in(rng, 1, 2)};
    p.pads = {random_in(rng, 0, 2), random_in(rng, 0, 2), random_in(rng, 0, 2), random_in(rng, 0, 2)};
    p.output_padding = {random_in(rng, 0, static_cast<int32_t>(p.strides[0]) - 1),
                        random_in(rng, 0, static_cast<int32_t>(p.strides[1]) - 1)};
    if (conv_transpose_out_h(p) < 1 || conv_transpose_out_w(p) < 1) continue;
    p.input = QParams{0.1, 0, random_8bit(rng)};
    p.input.zero_point = random_in(rng, range_of(p.input.type).min, range_of(p.input.type).max);
    p.output = QParams{0.1, 0, random_8bit(rng)};
    p.output.zero_point = random_in(rng, range_of(p.output.type).min, range_of(p.output.type).max);
    p.clamp = random_clamp(rng);
    if (wide) {
      p.input = trial % 3 == 0 ? QParams{0.1, 32768, QType::UInt16} : QParams{0.1, 0, QType::Int16};
      p.weight_type = trial % 8 == 3 ? QType::Int8 : QType::Int16;
      p.output = QParams{0.1, random_in(rng, -5, 5), QType::Int16};
      p.clamp = Clamp{};
    }
    if (std::max(range_of(p.output.type).min, p.clamp.min) > std::min(range_of(p.output.type).max, p.clamp.max)) continue;
    INFO("trial ", trial, " group ", p.group, " C ", p.in_channels, " M ", p.out_channels, " H ", p.in_h, " W ", p.in_w,
         " k ", p.kernel_h, "x", p.kernel_w, " s ", p.strides[0], ",", p.strides[1], " d ", p.dilations[0], ",",
         p.dilations[1], " pads ", p.pads[0], ",", p.pads[1], ",", p.pads[2], ",", p.pads[3]);
    fast::PackedConvTranspose2D packed;
    const int caps = compare_conv_transpose2d(rng, p, trial % 10 == 0 || trial % 12 == 11, packed);
    if (caps > 0) CHECK((packed.chunk_depth > 0) == wide);
    compared += caps;
  }
  CHECK(compared > 150);
  // An input value outside its type: the reference's message; 16-bit inputs whose centered
  // values leave int16 are not packed.
  ConvTranspose2DParams p;
  p.in_h = p.in_w = 2;
  p.kernel_h = p.kernel_w = 2;
  p.strides = {2, 2};
  p.multipliers = {Multiplier{1 << 30, 0}};
  const std::vector<int32_t> w(4, 1);
  fast::PackedConvTranspose2D packed;
  REQUIRE(fast::pack_conv_transpose2d(p, w, {}, packed).is_ok());
  const std::vector<int32_t> x{0, 0, 200, 0};
  std::vector<int32_t> y(16), y_ref(16);
  CHECK(fast::conv_transpose2d(packed, fast::best_isa(), x, y).message() == conv_transpose2d(p, x, w, {}, y_ref).message());
  p.input = QParams{0.1, 7, QType::Int16};
  CHECK_FALSE(fast::pack_conv_transpose2d(p, w, {}, packed).is_ok());
  // This kernel = stride packs as a 1x1 conv2d; with pads or output padding it keeps the
  // general path.
  p.input = ConvTranspose2DParams{}.input;
  REQUIRE(fast::pack_conv_transpose2d(p, w, {}, packed).is_ok());
  CHECK(packed.pointwise.has_value());
  p.pads = {1, 0, 0, 0};
  REQUIRE(fast::pack_conv_transpose2d(p, w, {}, packed).is_ok());
  CHECK_FALSE(packed.pointwise.has_value());
  p.pads = {0, 0, 0, 0};
  p.output_padding = {1, 0};
  REQUIRE(fast::pack_conv_transpose2d(p, w, {}, packed).is_ok());
  CHECK_FALSE(packed.pointwise.has_value());
}

TEST_CASE("fast conv_transpose2d with kernel = stride runs as a 1x1 conv2d and equals fx::conv_transpose2d") {
  std::mt19937 rng(41);
  int compared = 0;
  for (int trial = 0; trial < 120; ++trial) {
    ConvTranspose2DParams p;
    p.batch = random_in(rng, 1, 2);
    p.group = trial % 3 == 0 ? random_in(rng, 2, 3) : 1;
    p.in_channels = p.group * random_in(rng, 1, 40);
    p.out_channels = p.group * random_in(rng, 1, 6);
    p.in_h = random_in(rng, 1, 9);
    p.in_w = random_in(rng, 1, 40);
    p.kernel_h = random_in(rng, 1, 3);
    p.kernel_w = trial % 2 ? 2 : random_in(rng, 1, 3);
    p.strides = {p.kernel_h, p.kernel_w};
    // 8-bit inputs with int8 weights, 16-bit inputs with int8 or (split) int16 weights.
    const int kind = trial % 3;
    p.input = kind == 0 ? QParams{0.1, 0, random_8bit(rng)} : QParams{0.1, 0, QType::Int16};
    if (kind == 0) p.input.zero_point = random_in(rng, range_of(p.input.type).min, range_of(p.input.type).max);
    p.weight_type = kind == 2 ? QType::Int16 : QType::Int8;
    p.output = kind == 0 ? QParams{0.1, 0, random_8bit(rng)} : QParams{0.1, random_in(rng, -5, 5), QType::Int16};
    if (kind == 0) {
      p.output.zero_point = random_in(rng, range_of(p.output.type).min, range_of(p.output.type).max);
      p.clamp = random_clamp(rng);
      if (std::max(range_of(p.output.type).min, p.clamp.min) > std::min(range_of(p.output.type).max, p.clamp.max)) continue;
    }
    INFO("trial ", trial, " group ", p.group, " C ", p.in_channels, " M ", p.out_channels, " H ", p.in_h, " W ", p.in_w,
         " k ", p.kernel_h, "x", p.kernel_w, " kind ", kind);
    fast::PackedConvTranspose2D packed;
    const int caps = compare_conv_transpose2d(rng, p, trial % 10 == 0, packed);
    REQUIRE(caps > 0);
    CHECK(packed.pointwise.has_value());
    compared += caps;
  }
  CHECK(compared > 100);
}

TEST_CASE("fast quantize equals fx::quantize on ties, extremes, infinities and random floats, and finds the NaN") {
  std::mt19937 rng(41);
  const std::vector<QType> types{QType::Int8, QType::UInt8, QType::Int16, QType::UInt16};
  for (int trial = 0; trial < 200; ++trial) {
    const QType t = types[rng() % 4];
    const QParams q{std::exp2(std::uniform_real_distribution<double>(-12.0, 2.0)(rng)),
                    random_in(rng, range_of(t).min, range_of(t).max), t};
    std::vector<float> x(static_cast<size_t>(random_in(rng, 1, 500)));
    for (auto& v : x) {
      switch (rng() % 4) {
        case 0: v = static_cast<float>((random_in(rng, -70000, 70000) + 0.5) * q.scale); break;  // ties
        case 1: v = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng); break;
        default: v = static_cast<float>(std::uniform_real_distribution<double>(-300.0, 300.0)(rng) * q.scale);
      }
    }
    x[0] = INFINITY;
    if (x.size() > 1) x[1] = -INFINITY;
    if (x.size() > 2) x[2] = -0.0f;
    std::vector<int32_t> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = quantize(static_cast<double>(x[i]), q);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(x.size(), -999);
      REQUIRE(fast::quantize(q, isa, x, got) == -1);
      REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
    }
  }
  // Near-ties: x / scale lands just off a half-integer where x * (1 / scale) lands on it (scale
  // 0.7: -1429.75 / 0.7 = -2042.5000000000002, -1429.75 * (1 / 0.7) = -2042.5), so a multiply
  // alone would round some of these the other way.
  const QParams q{0.7, 0, QType::Int16};
  std::vector<float> ties;
  int apart = 0;
  for (int k = -3000; k < 3000; ++k) {
    const auto v = static_cast<float>((k + 0.5) * q.scale);
    for (const float t : {v, std::nextafter(v, INFINITY), std::nextafter(v, -INFINITY)}) {
      ties.push_back(t);
      apart += std::nearbyint(double{t} / q.scale) != std::nearbyint(double{t} * (1.0 / q.scale)) ? 1 : 0;
    }
  }
  REQUIRE(apart > 50);
  std::vector<int32_t> want(ties.size());
  for (size_t i = 0; i < ties.size(); ++i) want[i] = quantize(static_cast<double>(ties[i]), q);
  for (const fast::Isa isa : isas()) {
    std::vector<int32_t> got(ties.size(), -999);
    REQUIRE(fast::quantize(q, isa, ties, got) == -1);
    CHECK_MESSAGE(got == want, fast::isa_name(isa));
  }
  std::vector<float> x{1.0f, 2.0f, NAN, 3.0f, NAN};
  std::vector<int32_t> y(x.size());
  for (const fast::Isa isa : isas()) CHECK(fast::quantize(QParams{0.1, 0, QType::Int8}, isa, x, y) == 2);
  x.assign(37, 1.0f);  // the NaN in a vector's tail
  x[35] = NAN;
  y.resize(x.size());
  for (const fast::Isa isa : isas()) CHECK(fast::quantize(QParams{0.1, 0, QType::Int8}, isa, x, y) == 35);
}

TEST_CASE("fast dequantize equals fx::dequantize bit for bit on every type, scale and zero point") {
  std::mt19937 rng(47);
  const std::vector<QType> types{QType::Int8, QType::UInt8, QType::Int16, QType::UInt16};
  for (int trial = 0; trial < 100; ++trial) {
    const QType t = types[rng() % 4];
    const QParams q{std::exp2(std::uniform_real_distribution<double>(-20.0, 4.0)(rng)),
                    random_in(rng, range_of(t).min, range_of(t).max), t};
    std::vector<int32_t> x = random_values(rng, static_cast<size_t>(random_in(rng, 1, 300)), t);
    x[0] = range_of(t).min;
    x.back() = range_of(t).max;
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = static_cast<float>(dequantize(x[i], q));
    for (const fast::Isa isa : isas()) {
      std::vector<float> got(x.size(), -999.0f);
      fast::dequantize(q, isa, x, got);
      REQUIRE_MESSAGE(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0,
                      fast::isa_name(isa) << " trial " << trial);
    }
  }
}

TEST_CASE("fast concat equals fx::concat with copied and rescaled inputs of every type, and reports its errors") {
  std::mt19937 rng(43);
  const std::vector<QType> types{QType::Int8, QType::UInt8, QType::Int16, QType::UInt16};
  for (int trial = 0; trial < 200; ++trial) {
    const QType ty = types[rng() % 4];
    const QParams out{std::exp2(std::uniform_real_distribution<double>(-8.0, 2.0)(rng)),
                      random_in(rng, range_of(ty).min, range_of(ty).max), ty};
    const int64_t outer = random_in(rng, 1, 3), inner = random_in(rng, 1, 300);
    const int count = random_in(rng, 1, 4);
    std::vector<std::vector<int32_t>> data(static_cast<size_t>(count));
    std::vector<ConcatInput> inputs;
    int64_t total = 0;
    for (int i = 0; i < count; ++i) {
      QParams q = out;
      if (rng() % 3 != 0) {
        const QType t = types[rng() % 4];
        q = QParams{out.scale * std::exp2(std::uniform_real_distribution<double>(-4.0, 4.0)(rng)),
                    random_in(rng, range_of(t).min, range_of(t).max), t};
      }
      const int64_t dim = random_in(rng, 1, 4);
      data[static_cast<size_t>(i)] = random_values(rng, static_cast<size_t>(outer * dim * inner), q.type);
      if (trial % 17 == 0 && i == count - 1) data[static_cast<size_t>(i)][0] = range_of(q.type).max + 1;
      inputs.push_back(ConcatInput{data[static_cast<size_t>(i)], dim, q});
      total += dim;
    }
    std::vector<int32_t> want(static_cast<size_t>(outer * total * inner));
    const Status ws = concat(inputs, outer, inner, out, want);
    for (const fast::Isa isa : isas()) {
      std::vector<int32_t> got(want.size(), -999);
      REQUIRE(fast::concat(inputs, outer, inner, out, isa, got).message() == ws.message());
      if (ws.is_ok()) REQUIRE_MESSAGE(got == want, std::string(fast::isa_name(isa)) << " trial " << trial);
    }
  }
}

namespace {

// The fast softmax of rows of `row` values under every ISA against fx::softmax: the same
// values, or the same error.
void compare_softmax(const SoftmaxParams& p, int64_t row, const std::vector<int32_t>& x, int trial) {
  std::vector<int32_t> want(x.size());
  const Status ws = softmax(p, row, x, want);
  for (const fast::Isa isa : isas()) {
    std::vector<int32_t> got(x.size(), -999);
    REQUIRE(fast::softmax(p, isa, row, x, got).message() == ws.message());
    if (ws.is_ok()) REQUIRE_MESSAGE(got == want, fast::isa_name(isa) << " trial " << trial);
  }
}

}  // namespace

TEST_CASE("fast softmax equals fx::softmax on 8-bit rows of any scale, and on what it defers") {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 200; ++trial) {
    const QType it = trial % 7 == 6 ? QType::Int16 : random_8bit(rng);
    const QType ot = trial % 3 == 0 ? QType::Int16 : random_8bit(rng);
    const Range ri = range_of(it);
    // Input scales from fine (every entry of the table interpolated) to coarse (most below it).
    const QParams qi{std::pow(10.0, -3.0 + 3.0 * std::uniform_real_distribution<double>(0, 1)(rng)),
                     is_16bit(it) ? 0 : random_in(rng, ri.min, ri.max), it};
    const QParams qo{ot == QType::Int16 ? 1.0 / 32767.0 : 1.0 / 255.0, ot == QType::Int8 ? -128 : 0, ot};
    SoftmaxParams p;
    REQUIRE(make_softmax_params(qi, qo, p).is_ok());
    if (trial % 2) p.segment_bits = random_in(rng, 0, 4);  // interpolated entries (a program may ask for them)
    const int64_t row = random_in(rng, 1, 90);
    std::vector<int32_t> x = random_values(rng, static_cast<size_t>(row * random_in(rng, 1, 4)), it);
    if (trial % 5 == 0) std::fill(x.begin(), x.end(), ri.max);  // all equal
    if (trial % 11 == 0) x[0] = ri.max + 1;                        // outside the type: the reference's message
    compare_softmax(p, row, x, trial);
  }
}

TEST_CASE("fast softmax equals fx::softmax on 16-bit rows: wide, clustered, past the table, other tables") {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 120; ++trial) {
    const QType it = rng() % 2 ? QType::Int16 : QType::UInt16;
    const QType ot = trial % 3 == 0 ? random_8bit(rng) : (rng() % 2 ? QType::Int16 : QType::UInt16);
    const Range ri = range_of(it);
    const QParams qi{std::pow(10.0, -4.0 + 4.0 * std::uniform_real_distribution<double>(0, 1)(rng)),
                     random_in(rng, ri.min, ri.max), it};
    const QParams qo{is_16bit(ot) ? 1.0 / 32767.0 : 1.0 / 255.0, ot == QType::Int8 ? -128 : 0, ot};
    SoftmaxParams p;
    REQUIRE(make_softmax_params(qi, qo, p).is_ok());
    if (trial % 2) p.segment_bits = random_in(rng, 0, 4);
    if (trial % 9 == 4)  // any table the division takes: entries in [0, 2^30], not monotonic
      for (auto& e : p.exp_table) e = random_in(rng, 0, 1 << 30);
    if (trial % 13 == 6) p.exp_table[static_cast<size_t>(random_in(rng, 0, kSoftmaxEntries - 1))] = -1;  // the reference's
    const int64_t row = trial % 10 == 0 ? random_in(rng, 2000, 7000) : random_in(rng, 1, 90);
    std::vector<int32_t> x = random_values(rng, static_cast<size_t>(row * random_in(rng, 1, 3)), it);
    if (trial % 4 == 1) {  // clustered: spans inside the table
      const int32_t base = random_in(rng, ri.min, ri.max - 3000), width = random_in(rng, 0, 3000);
      for (auto& v : x) v = base + random_in(rng, 0, width);
    }
    if (trial % 5 == 0) std::fill(x.begin(), x.end(), ri.max);
    if (trial % 11 == 0) x[0] = ri.max + 1;
    compare_softmax(p, row, x, trial);
  }
  // Ties of the division: a sum of 2^31 with odd entries (half-way quotients round up).
  SoftmaxParams p;
  REQUIRE(make_softmax_params(QParams{0.01, 0, QType::Int16}, QParams{1.0 / 32767.0, 0, QType::Int16}, p).is_ok());
  p.segment_bits = 0;
  std::fill(p.exp_table.begin(), p.exp_table.end(), 0);
  p.exp_table[kSoftmaxEntries - 1] = 1 << 30;
  p.exp_table[kSoftmaxEntries - 2] = (1 << 30) - 1;
  p.exp_table[kSoftmaxEntries - 3] = 1;
  p.output_multiplier = Multiplier{1 << 30, -14};
  std::vector<int32_t> ties(19, -30000);  // past the table: entries 0, in the vector lanes and the tail
  ties[0] = 500, ties[9] = 499, ties[17] = 498;
  compare_softmax(p, 19, ties, -1);
}
