// Lookup tables: 8-bit direct tables, 16-bit segmented tables with interpolation, builders.
#include <doctest/doctest.h>

#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using qflow::Status;
using namespace qflow::fx::test;

TEST_CASE("8-bit tables: entry k is quantize(f(dequantize(k)))") {
  const QParams in{0.05, 3, QType::Int8}, out{1.0 / 256.0, -128, QType::Int8};
  Lut lut;
  REQUIRE(build_sigmoid_lut(in, out, 0, lut).is_ok());
  CHECK(lut.entries.size() == 256);
  CHECK(lut_lookup(lut, 3) == 0);      // sigmoid(0) = 0.5 -> 128 - 128
  CHECK(lut_lookup(lut, -128) == -128);  // sigmoid(-6.55) = 0.0014 -> 0.37 -> 0 - 128
  CHECK(lut_lookup(lut, 127) == 127);   // sigmoid(6.2) = 0.998 -> 255.5 -> saturates
  for (int32_t q = -128; q <= 127; ++q)
    CHECK(lut_lookup(lut, q) == quantize(1.0 / (1.0 + std::exp(-dequantize(q, in))), out));
  // Unsigned input
  Lut u;
  REQUIRE(build_lut([](double x) { return x * x; }, {0.1, 128, QType::UInt8}, {0.25, 0, QType::UInt8}, 0, u).is_ok());
  CHECK(lut_lookup(u, 148) == 16);  // 2^2 / 0.25
  CHECK(lut_lookup(u, 0) == 255);   // 12.8^2 saturates
  // The reciprocal of 0 saturates; NaN is refused.
  Lut r;
  REQUIRE(build_reciprocal_lut({0.1, 0, QType::Int8}, {0.1, 0, QType::Int8}, 0, r).is_ok());
  CHECK(lut_lookup(r, 0) == 127);
  CHECK(lut_lookup(r, 5) == 20);
  CHECK(lut_lookup(r, -10) == -10);
  CHECK_FALSE(build_lut([](double x) { return std::sqrt(x); }, {0.1, 0, QType::Int8}, out, 0, r).is_ok());
  CHECK_FALSE(build_lut([](double x) { return x; }, {0.0, 0, QType::Int8}, out, 0, r).is_ok());
  std::vector<int32_t> y(2);
  REQUIRE(apply_lut(lut, std::vector<int32_t>{3, 3}, y).is_ok());
  CHECK(y == std::vector<int32_t>{0, 0});
  CHECK_FALSE(apply_lut(lut, std::vector<int32_t>{3, 200}, y).is_ok());
}

TEST_CASE("8-bit builders match dequantize -> f -> quantize exactly") {
  const QParams in{4.0 / 127.0, 0, QType::Int8}, out{1.0 / 64.0, 0, QType::Int8};
  struct Case {
    const char* name;
    Lut lut;
    std::function<double(double)> f;
  };
  std::vector<Case> cases(6);
  REQUIRE(build_tanh_lut(in, out, 0, cases[0].lut).is_ok());
  cases[0] = {"tanh", cases[0].lut, [](double x) { return std::tanh(x); }};
  REQUIRE(build_hard_sigmoid_lut(in, out, 0.2, 0.5, 0, cases[1].lut).is_ok());
  cases[1] = {"hardsigmoid", cases[1].lut, [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }};
  REQUIRE(build_hard_swish_lut(in, out, 0, cases[2].lut).is_ok());
  cases[2] = {"hardswish", cases[2].lut, [](double x) { return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); }};
  REQUIRE(build_gelu_lut(in, out, 0, cases[3].lut).is_ok());
  cases[3] = {"gelu", cases[3].lut, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }};
  REQUIRE(build_exp_lut(in, {0.5, -128, QType::Int8}, 0, cases[4].lut).is_ok());
  cases[4] = {"exp", cases[4].lut, [](double x) { return std::exp(x); }};
  REQUIRE(build_sigmoid_lut(in, out, 0, cases[5].lut).is_ok());
  cases[5] = {"sigmoid", cases[5].lut, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }};
  for (const Case& c : cases)
    for (int32_t q = -128; q <= 127; ++q)
      REQUIRE_MESSAGE(lut_lookup(c.lut, q) == quantize(c.f(dequantize(q, in)), c.lut.output), std::string(c.name) << " at " << q);
  // Spot values: hardswish(-4) = 0, gelu(0) = 0, tanh(4) = 0.9993 -> 64 saturates to 63.96 -> 64 > 127? no: 64
  CHECK(lut_lookup(cases[2].lut, -127) == 0);
  CHECK(lut_lookup(cases[3].lut, 0) == 0);
  CHECK(lut_lookup(cases[0].lut, 127) == 64);
}

TEST_CASE("16-bit segmented tables: interpolation and the measured error bound") {
  const QParams in{8.0 / 32768.0, 0, QType::Int16}, out{1.0 / 32768.0, 0, QType::Int16};
  // A linear function is interpolated exactly: x / 8 maps q to q here, except in the last
  // segment, whose upper entry (q = 32768) saturates to 32767.
  Lut lin;
  REQUIRE(build_lut([](double x) { return x / 8.0; }, in, out, 8, lin).is_ok());
  CHECK(lin.entries.size() == 257);
  int64_t lin_worst = 0;
  for (int32_t q = -32768; q <= 32767; ++q) lin_worst = std::max<int64_t>(lin_worst, std::abs(lut_lookup(lin, q) - q));
  CHECK(lin_worst == 1);
  CHECK(lut_lookup(lin, 32767 - 256) == 32767 - 256);
  // Hand case on a step: entries 0 and 256 apart, half-way rounds away from zero.
  Lut hand;
  hand.input = {1.0, -32768, QType::Int16};
  hand.output = {1.0, 0, QType::Int16};
  hand.segment_bits = 8;
  hand.entries.assign(257, 0);
  hand.entries[1] = 3;
  CHECK(lut_lookup(hand, -32768 + 128) == 2);       // 1.5 -> 2
  CHECK(lut_lookup(hand, -32768 + 256 + 128) == 1);  // 3 + (-3 * 128 / 256 = -1.5 -> -2)
  CHECK(lut_lookup(hand, -32768 + 64) == 1);          // 0.75 -> 1
  CHECK_FALSE(build_lut([](double x) { return x; }, in, out, 6, hand).is_ok());

  struct Case {
    const char* name;
    std::function<Status(Lut&, int)> build;
    std::function<double(double)> f;
    QParams out;
    int64_t bound8, bound7;  // measured maximum error (LSB) for 257 and 513 entries, rounded up
  };
  const QParams sym{8.0 / 32768.0, 0, QType::Int16};
  const std::vector<Case> cases = {
      {"sigmoid", [&](Lut& l, int b) { return build_sigmoid_lut(in, out, b, l); },
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, out, 2, 1},
      {"tanh", [&](Lut& l, int b) { return build_tanh_lut(in, out, b, l); }, [](double x) { return std::tanh(x); },
       out, 13, 4},
      {"gelu", [&](Lut& l, int b) { return build_gelu_lut(in, sym, b, l); },
       [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, sym, 2, 1},
      {"hardswish", [&](Lut& l, int b) { return build_hard_swish_lut(in, sym, b, l); },
       [](double x) { return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); }, sym, 1, 1},
      {"exp", [&](Lut& l, int b) { return build_exp_lut({8.0 / 32768.0, 32767, QType::Int16}, {1.0 / 32768.0, -32768, QType::Int16}, b, l); },
       [](double x) { return std::exp(x); }, {1.0 / 32768.0, -32768, QType::Int16}, 16, 5},
  };
  for (const Case& c : cases)
    for (const int bits : {8, 7}) {
      Lut lut;
      REQUIRE(c.build(lut, bits).is_ok());
      CHECK(lut.entries.size() == (bits == 8 ? 257u : 513u));
      int64_t worst = 0;
      for (int32_t q = -32768; q <= 32767; ++q) {
        const int32_t ref = quantize(c.f(dequantize(q, lut.input)), c.out);
        worst = std::max<int64_t>(worst, std::abs(lut_lookup(lut, q) - ref));
      }
      CHECK(worst <= (bits == 8 ? c.bound8 : c.bound7));
      MESSAGE(std::string(c.name) << " 16-bit table, " << lut.entries.size() << " entries: max error " << worst << " LSB");
    }
}
