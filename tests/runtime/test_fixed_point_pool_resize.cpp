// Pooling and Resize: hand cases and randomized comparisons with float references
// (MaxPool and nearest Resize exact; AveragePool and bilinear Resize within 1 LSB).
#include <doctest/doctest.h>

#include <climits>

#include "tests/runtime/test_fixed_point_common.h"

using namespace qflow::fx;
using namespace qflow::fx::test;

TEST_CASE("max_pool: hand case with padding and dilation, errors") {
  Pool2DParams p;
  p.in_h = p.in_w = 3;
  p.kernel_h = p.kernel_w = 2;
  p.pads = {1, 1, 0, 0};
  p.input = p.output = {1.0, 0, QType::Int8};
  const std::vector<int32_t> x = {-5, -7, 3, -1, -9, 0, 8, -2, -3};
  std::vector<int32_t> y(9);
  REQUIRE(max_pool(p, x, y).is_ok());
  // padded taps never win even against negative values
  CHECK(y == std::vector<int32_t>{-5, -5, 3, -1, -1, 3, 8, 8, 0});
  p.pads = {0, 0, 0, 0};
  p.dilations = {2, 2};
  std::vector<int32_t> one(1);
  REQUIRE(max_pool(p, x, one).is_ok());
  CHECK(one[0] == 8);  // taps (0,0) (0,2) (2,0) (2,2)
  p.output.scale = 2.0;
  CHECK_FALSE(max_pool(p, x, one).is_ok());
}

TEST_CASE("average_pool: rounding, count_include_pad, requantized output") {
  Pool2DParams p;
  p.in_h = 2, p.in_w = 2;
  p.kernel_h = p.kernel_w = 2;
  p.input = p.output = {1.0, 0, QType::Int8};
  std::vector<int32_t> y(1);
  REQUIRE(average_pool(p, std::vector<int32_t>{1, 2, 3, 4}, y).is_ok());
  CHECK(y[0] == 3);  // 2.5 rounds away from zero
  REQUIRE(average_pool(p, std::vector<int32_t>{-1, -2, -3, -4}, y).is_ok());
  CHECK(y[0] == -3);
  REQUIRE(average_pool(p, std::vector<int32_t>{1, 1, 1, 2}, y).is_ok());
  CHECK(y[0] == 1);  // 1.25
  // Zero point: the average is taken of q - zp.
  p.input = p.output = {1.0, 10, QType::Int8};
  REQUIRE(average_pool(p, std::vector<int32_t>{11, 12, 13, 14}, y).is_ok());
  CHECK(y[0] == 13);
  // 3x3 input, 2x2 kernel, top-left pad 1: the corner window holds one real value.
  Pool2DParams q;
  q.in_h = q.in_w = 3;
  q.kernel_h = q.kernel_w = 2;
  q.pads = {1, 1, 0, 0};
  q.input = q.output = {1.0, 0, QType::Int8};
  const std::vector<int32_t> x = {8, 0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<int32_t> y9(9);
  REQUIRE(average_pool(q, x, y9).is_ok());
  CHECK(y9[0] == 8);
  q.count_include_pad = true;
  REQUIRE(average_pool(q, x, y9).is_ok());
  CHECK(y9[0] == 2);
  // Different output parameters: sum * s_in / (s_out * count) in one rounding.
  p.input = {0.5, 0, QType::Int8};
  p.output = {0.3, -4, QType::Int8};
  REQUIRE(average_pool(p, std::vector<int32_t>{10, 20, 30, 40}, y).is_ok());
  CHECK(y[0] == 38);  // 12.5 / 0.3 = 41.67 -> 42, - 4
  // An int32 window sum that could overflow is refused.
  Pool2DParams big;
  big.in_h = big.in_w = big.kernel_h = big.kernel_w = 200;
  big.input = big.output = {1.0, 0, QType::UInt16};
  std::vector<int32_t> bx(40000, 0), by(1);
  CHECK_FALSE(average_pool(big, bx, by).is_ok());
}

TEST_CASE("pooling: randomized against the float reference") {
  std::mt19937 rng(30);
  int64_t worst_max = 0, worst_avg = 0, worst_global = 0;
  for (int t = 0; t < 300; ++t) {
    const QType type = t % 3 == 0 ? QType::Int16 : (t % 3 == 1 ? QType::UInt8 : QType::Int8);
    Pool2DParams p;
    p.batch = 2, p.channels = 3;
    p.in_h = std::uniform_int_distribution<int>(3, 9)(rng);
    p.in_w = std::uniform_int_distribution<int>(3, 9)(rng);
    p.kernel_h = std::uniform_int_distribution<int>(1, 3)(rng);
    p.kernel_w = std::uniform_int_distribution<int>(1, 3)(rng);
    p.strides = {std::uniform_int_distribution<int>(1, 2)(rng), std::uniform_int_distribution<int>(1, 2)(rng)};
    p.pads = {std::uniform_int_distribution<int64_t>(0, p.kernel_h - 1)(rng), std::uniform_int_distribution<int64_t>(0, p.kernel_w - 1)(rng),
              std::uniform_int_distribution<int64_t>(0, p.kernel_h - 1)(rng), std::uniform_int_distribution<int64_t>(0, p.kernel_w - 1)(rng)};
    p.count_include_pad = t % 2 == 0;
    const Range r = range_of(type);
    p.input = {random_log_uniform(rng, 1e-3, 1.0), std::uniform_int_distribution<int32_t>(r.min / 2 + r.max / 4, r.max / 2)(rng), type};
    p.output = t % 4 == 0 ? p.input : QParams{p.input.scale * std::uniform_real_distribution<double>(0.5, 2.0)(rng), p.input.zero_point + 1, type};
    const auto x = random_values(rng, static_cast<size_t>(p.batch * p.channels * p.in_h * p.in_w), type);
    const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
    std::vector<int32_t> y(static_cast<size_t>(p.batch * p.channels * oh * ow)), ref_avg(y.size()), ref_max(y.size());
    for (int64_t nc = 0; nc < p.batch * p.channels; ++nc)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = 0.0, count = 0.0, best = -1e300;
          for (int64_t ky = 0; ky < p.kernel_h; ++ky)
            for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
              const int64_t iy = oy * p.strides[0] - p.pads[0] + ky, ix = ox * p.strides[1] - p.pads[1] + kx;
              if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) continue;
              const double v = dequantize(x[static_cast<size_t>((nc * p.in_h + iy) * p.in_w + ix)], p.input);
              sum += v, count += 1.0, best = std::max(best, v);
            }
          if (p.count_include_pad) count = static_cast<double>(p.kernel_h * p.kernel_w);
          const auto o = static_cast<size_t>((nc * oh + oy) * ow + ox);
          ref_avg[o] = quantize(sum / count, p.output);
          ref_max[o] = quantize(best, p.input);
        }
    REQUIRE(average_pool(p, x, y).is_ok());
    worst_avg = std::max(worst_avg, max_abs_diff(y, ref_avg));
    Pool2DParams pm = p;
    pm.output = pm.input;
    REQUIRE(max_pool(pm, x, y).is_ok());
    worst_max = std::max(worst_max, max_abs_diff(y, ref_max));

    std::vector<int32_t> g(static_cast<size_t>(p.batch * p.channels)), gref(g.size());
    REQUIRE(global_average_pool(p.batch, p.channels, p.in_h, p.in_w, p.input, p.output, x, g).is_ok());
    for (int64_t nc = 0; nc < p.batch * p.channels; ++nc) {
      double sum = 0.0;
      for (int64_t i = 0; i < p.in_h * p.in_w; ++i) sum += dequantize(x[static_cast<size_t>(nc * p.in_h * p.in_w + i)], p.input);
      gref[static_cast<size_t>(nc)] = quantize(sum / static_cast<double>(p.in_h * p.in_w), p.output);
    }
    worst_global = std::max(worst_global, max_abs_diff(g, gref));
  }
  CHECK(worst_max == 0);
  CHECK(worst_avg <= 1);
  CHECK(worst_global <= 1);
  MESSAGE("pool max |int - float|: max " << worst_max << ", average " << worst_avg << ", global " << worst_global << " LSB");
}

namespace {

// ONNX's coordinate formulas in double with one division of exact integers, so integer and
// half-integer coordinates are exact. (Dividing by a rounded scale, o / (out / in), can land
// just below a tie: 9 / (18 / 7) is 3.4999...; the integer path follows the exact value.)
double onnx_coordinate(int64_t o, int64_t in, int64_t out, CoordinateMode cm) {
  switch (cm) {
    case CoordinateMode::Asymmetric: return static_cast<double>(o * in) / static_cast<double>(out);
    case CoordinateMode::HalfPixel: return static_cast<double>((2 * o + 1) * in - out) / static_cast<double>(2 * out);
    case CoordinateMode::AlignCorners:
      return out == 1 ? 0.0 : static_cast<double>(o * (in - 1)) / static_cast<double>(out - 1);
  }
  return 0.0;
}

int64_t onnx_nearest(double v, NearestMode nm, int64_t in) {
  double r = 0.0;
  switch (nm) {
    case NearestMode::RoundPreferFloor: r = (v == std::floor(v) + 0.5) ? std::floor(v) : std::round(v); break;
    case NearestMode::RoundPreferCeil: r = (v == std::floor(v) + 0.5) ? std::ceil(v) : std::round(v); break;
    case NearestMode::Floor: r = std::floor(v); break;
    case NearestMode::Ceil: r = std::ceil(v); break;
  }
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

}  // namespace

TEST_CASE("resize nearest: source indices match the ONNX formulas") {
  // Hand cases: 2 -> 4 half_pixel round_prefer_floor: coordinates -0.25, 0.25, 0.75, 1.25
  CHECK(nearest_source_index(0, 2, 4, CoordinateMode::HalfPixel, NearestMode::RoundPreferFloor) == 0);
  CHECK(nearest_source_index(2, 2, 4, CoordinateMode::HalfPixel, NearestMode::RoundPreferFloor) == 1);
  // 4 -> 2 asymmetric: 0, 2; 3 -> 2 asymmetric: 0, 1.5 (a tie)
  CHECK(nearest_source_index(1, 4, 2, CoordinateMode::Asymmetric, NearestMode::Floor) == 2);
  CHECK(nearest_source_index(1, 3, 2, CoordinateMode::Asymmetric, NearestMode::RoundPreferFloor) == 1);
  CHECK(nearest_source_index(1, 3, 2, CoordinateMode::Asymmetric, NearestMode::RoundPreferCeil) == 2);
  CHECK(nearest_source_index(1, 3, 2, CoordinateMode::Asymmetric, NearestMode::Ceil) == 2);
  for (const auto cm : {CoordinateMode::Asymmetric, CoordinateMode::HalfPixel, CoordinateMode::AlignCorners})
    for (const auto nm : {NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil, NearestMode::Floor, NearestMode::Ceil})
      for (int64_t in = 1; in <= 12; ++in)
        for (int64_t out = 1; out <= 25; ++out)
          for (int64_t o = 0; o < out; ++o)
            REQUIRE_MESSAGE(nearest_source_index(o, in, out, cm, nm) == onnx_nearest(onnx_coordinate(o, in, out, cm), nm, in), "cm " << int(cm) << " nm " << int(nm) << " in " << in << " out " << out << " o " << o << " c " << onnx_coordinate(o, in, out, cm));
  ResizeParams p;
  p.in_h = 1, p.in_w = 2, p.out_h = 2, p.out_w = 4;
  p.coordinate_mode = CoordinateMode::Asymmetric;
  std::vector<int32_t> y(8);
  REQUIRE(resize_nearest(p, std::vector<int32_t>{-3, 9}, y).is_ok());
  CHECK(y == std::vector<int32_t>{-3, -3, 9, 9, -3, -3, 9, 9});
}

TEST_CASE("resize bilinear: hand case and randomized against float interpolation") {
  ResizeParams p;
  p.in_h = 1, p.in_w = 2, p.out_h = 1, p.out_w = 4;
  p.coordinate_mode = CoordinateMode::AlignCorners;
  std::vector<int32_t> y(4);
  REQUIRE(resize_bilinear(p, std::vector<int32_t>{0, 100}, y).is_ok());
  CHECK(y == std::vector<int32_t>{0, 33, 67, 100});
  p.coordinate_mode = CoordinateMode::HalfPixel;  // coordinates -0.25 (clamped), 0.25, 0.75, 1.25
  REQUIRE(resize_bilinear(p, std::vector<int32_t>{0, 100}, y).is_ok());
  CHECK(y == std::vector<int32_t>{0, 25, 75, 100});
  REQUIRE(resize_bilinear(p, std::vector<int32_t>{-1, 1}, y).is_ok());
  CHECK(y == std::vector<int32_t>{-1, -1, 1, 1});  // -0.5 and 0.5 round away from zero

  std::mt19937 rng(31);
  for (const QType type : {QType::Int8, QType::Int16}) {
    int64_t worst = 0;
    for (int t = 0; t < 200; ++t) {
      ResizeParams q;
      q.type = type;
      q.channels = 2;
      q.in_h = std::uniform_int_distribution<int>(1, 7)(rng);
      q.in_w = std::uniform_int_distribution<int>(1, 7)(rng);
      q.out_h = std::uniform_int_distribution<int>(1, 15)(rng);
      q.out_w = std::uniform_int_distribution<int>(1, 15)(rng);
      q.coordinate_mode = static_cast<CoordinateMode>(t % 3);
      const auto x = random_values(rng, static_cast<size_t>(q.channels * q.in_h * q.in_w), type);
      std::vector<int32_t> out(static_cast<size_t>(q.channels * q.out_h * q.out_w)), ref(out.size());
      REQUIRE(resize_bilinear(q, x, out).is_ok());
      auto axis = [&](int64_t o, int64_t in, int64_t outn, int64_t& i0, int64_t& i1, double& f) {
        const double c = std::clamp(onnx_coordinate(o, in, outn, q.coordinate_mode), 0.0, static_cast<double>(in - 1));
        i0 = static_cast<int64_t>(std::floor(c));
        i1 = std::min(i0 + 1, in - 1);
        f = c - static_cast<double>(i0);
      };
      for (int64_t c = 0; c < q.channels; ++c)
        for (int64_t oy = 0; oy < q.out_h; ++oy)
          for (int64_t ox = 0; ox < q.out_w; ++ox) {
            int64_t y0, y1, x0, x1;
            double fy, fx;
            axis(oy, q.in_h, q.out_h, y0, y1, fy);
            axis(ox, q.in_w, q.out_w, x0, x1, fx);
            auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(x[static_cast<size_t>((c * q.in_h + yy) * q.in_w + xx)]); };
            const double v = (at(y0, x0) * (1 - fx) + at(y0, x1) * fx) * (1 - fy) + (at(y1, x0) * (1 - fx) + at(y1, x1) * fx) * fy;
            ref[static_cast<size_t>((c * q.out_h + oy) * q.out_w + ox)] = static_cast<int32_t>(std::nearbyint(v));
          }
      worst = std::max(worst, max_abs_diff(out, ref));
      std::vector<int32_t> again(out.size());
      REQUIRE(resize_bilinear(q, x, again).is_ok());
      CHECK(again == out);
    }
    CHECK(worst <= (type == QType::Int8 ? 1 : 4));  // 0.5 + 2 * max|dq| * 2^-15
    MESSAGE("bilinear max |int - float| = " << worst << " LSB");
  }
}
