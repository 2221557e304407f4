// Unit tests for the depthwise plane kernel: every instruction set, float and double, against
// a direct loop that skips the taps outside the image, bit for bit, over strides, dilations,
// asymmetric pads and widths that straddle the 8-lane vectors and the 6-vector groups.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "framework/interpreter/kernels/depthwise_conv.h"

namespace qflow {
namespace {

template <typename T>
std::vector<T> noise(int64_t n, uint32_t seed) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<T>(static_cast<int32_t>(seed >> 8) - (1 << 23)) / static_cast<T>(1 << 23);
  }
  return v;
}

// The definition: taps in (ky, kx) order, those outside the image skipped, each product
// rounded before the add.
template <typename T>
std::vector<T> direct(const std::vector<T>& x, const std::vector<T>& w, const ConvGeometry& g) {
  const int64_t ih = g.in_spatial[0], iw = g.in_spatial[1], oh = g.out_spatial[0], ow = g.out_spatial[1];
  std::vector<T> y(static_cast<std::size_t>(oh * ow));
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ++ox) {
      T acc = 0;
      for (int64_t ky = 0; ky < g.kernel[0]; ++ky)
        for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
          const int64_t iy = oy * g.strides[0] - g.pads_begin[0] + ky * g.dilations[0];
          const int64_t ix = ox * g.strides[1] - g.pads_begin[1] + kx * g.dilations[1];
          if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
          const volatile T product = w[static_cast<std::size_t>(ky * g.kernel[1] + kx)] * x[static_cast<std::size_t>(iy * iw + ix)];
          acc += product;
        }
      y[static_cast<std::size_t>(oy * ow + ox)] = acc;
    }
  return y;
}

struct Case {
  int64_t ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

const Case kCases[] = {
    {14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  {14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  {7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {28, 28, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},  {1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    {9, 40, 3, 3, 1, 3, 2, 2, 0, 3, 2, 1},
    {33, 17, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},  {5, 61, 2, 4, 3, 2, 1, 3, 1, 0, 0, 4},   {160, 160, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
    {6, 9, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},    {3, 100, 3, 1, 1, 1, 1, 1, 5, 0, 5, 0},  {12, 12, 3, 3, 4, 3, 3, 2, 2, 7, 0, 1},
    // Pads and strides far beyond the image: no padded plane, the direct loop.
    {4, 4, 3, 3, 1 << 20, 1 << 20, 1, 1, 1 << 20, 1 << 20, 1 << 20, 1 << 20},
    {5, 3, 2, 2, 3, 1, 1 << 12, 2, 1 << 12, 0, 1 << 12, 9},
};

ConvGeometry geometry(const Case& c) {
  ConvGeometry g;
  g.batch = 1;
  g.in_channels = g.out_channels = g.group = 1;
  g.in_spatial = {c.ih, c.iw};
  g.kernel = {c.kh, c.kw};
  g.strides = {c.sh, c.sw};
  g.dilations = {c.dh, c.dw};
  g.pads_begin = {c.pt, c.pl};
  g.pads_end = {c.pb, c.pr};
  g.out_spatial = {(c.ih + c.pt + c.pb - (c.kh - 1) * c.dh - 1) / c.sh + 1,
                   (c.iw + c.pl + c.pr - (c.kw - 1) * c.dw - 1) / c.sw + 1};
  return g;
}

template <typename T>
void check_all_isas() {
  uint32_t seed = 7;
  for (const Case& c : kCases) {
    const ConvGeometry g = geometry(c);
    const std::vector<T> x = noise<T>(c.ih * c.iw, ++seed), w = noise<T>(c.kh * c.kw, ++seed);
    const std::vector<T> want = direct(x, w, g);
    for (const DepthwiseIsa isa : {DepthwiseIsa::Portable, DepthwiseIsa::Avx2, DepthwiseIsa::Avx512}) {
      if (!depthwise_isa_supported(isa)) continue;
      // The padding clear() wrote must survive a plane of other values; nothing may be
      // written around the output.
      const DepthwisePlan plan(g);
      std::vector<T> scratch(static_cast<std::size_t>(plan.scratch_size()), T(1e30));
      plan.clear(scratch.data());
      const std::vector<T> other = noise<T>(c.ih * c.iw, seed + 100);
      std::vector<T> got(want.size() + 8, T(-7));
      plan.plane(other.data(), w.data(), got.data(), scratch.data(), isa);
      plan.plane(x.data(), w.data(), got.data(), scratch.data(), isa);
      INFO("case ", c.ih, "x", c.iw, " k ", c.kh, "x", c.kw, " s ", c.sh, ",", c.sw, " d ", c.dh, ",", c.dw,
           " isa ", isa == DepthwiseIsa::Avx512 ? "avx512" : isa == DepthwiseIsa::Avx2 ? "avx2" : "portable");
      CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(T)) == 0);
      for (std::size_t i = want.size(); i < got.size(); ++i) CHECK(got[i] == T(-7));
    }
  }
}

TEST_CASE("depthwise plane: float on every instruction set equals the direct loop bit for bit") {
  check_all_isas<float>();
}

TEST_CASE("depthwise plane: double equals the direct loop bit for bit") { check_all_isas<double>(); }

TEST_CASE("depthwise plane: the portable loop always runs; the padded plane stays near the image's size") {
  CHECK(depthwise_isa_supported(DepthwiseIsa::Portable));
  CHECK(depthwise_isa_supported(depthwise_best_isa()));
  const ConvGeometry common = geometry(kCases[0]);
  CHECK(DepthwisePlan(common).scratch_size() == 16 * 16 + 16);
  const ConvGeometry far = geometry(kCases[std::size(kCases) - 2]);
  CHECK(far.out_spatial == Shape{3, 3});
  CHECK(DepthwisePlan(far).scratch_size() == 0);
  ConvGeometry huge = common;  // sizes whose product overflows int64
  huge.strides = {int64_t{1} << 40, int64_t{1} << 40};
  huge.out_spatial = {int64_t{1} << 30, 2};
  CHECK(DepthwisePlan(huge).scratch_size() == 0);
}

}  // namespace
}  // namespace qflow
