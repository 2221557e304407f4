// Unit tests for the byte-quad 8-bit convolution (ConvInteger / QLinearConv on VNNI CPUs):
// the exact int32 sums against a direct int64 loop, for every operand type pair, per-tensor
// and per-channel weight zero points (which take the row of ones), groups, strides,
// dilations, asymmetric pads and channel counts off the 8-row and 4-tap blocks.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "framework/core/thread_pool.h"
#include "framework/interpreter/kernels/conv_quads.h"

namespace qflow {
namespace {

struct Case {
  int64_t batch, channels, out_channels, group, ih, iw, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

const Case kCases[] = {
    {1, 3, 16, 1, 17, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},     // a stem: 3 channels, stride 2
    {1, 64, 32, 1, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    // kc 576
    {2, 8, 13, 1, 9, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},      // pointwise, 13 rows, two images
    {1, 6, 9, 3, 10, 7, 3, 2, 1, 3, 2, 1, 2, 0, 1, 3},       // groups, dilation, odd pads
    {1, 5, 7, 1, 8, 40, 5, 5, 3, 1, 1, 2, 0, 4, 2, 1},       // kc 125: the last quad partial
    {1, 4, 4, 4, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},        // depthwise
};

template <typename T>
Tensor filled(const Shape& shape, uint32_t seed) {
  Tensor t(std::is_signed_v<T> ? DType::Int8 : DType::UInt8, shape);
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = static_cast<T>(seed >> 24);  // the whole range, both ends included
  }
  return t;
}

template <typename X, typename W>
void check(const Case& c, int32_t zx, const std::vector<int32_t>& zw, ThreadPool& pool) {
  ConvAttributes a;
  a.kernel_shape = {c.kh, c.kw};
  a.strides = {c.sh, c.sw};
  a.dilations = {c.dh, c.dw};
  a.pads = {c.pt, c.pl, c.pb, c.pr};
  a.group = c.group;
  const Shape xs{c.batch, c.channels, c.ih, c.iw}, ws{c.out_channels, c.channels / c.group, c.kh, c.kw};
  const Expected<ConvGeometry> made = make_conv_geometry(a, xs, ws);
  REQUIRE(made);
  const ConvGeometry& g = *made;
  const Tensor x = filled<X>(xs, 7u), w = filled<W>(ws, 11u);
  const DType xt = x.dtype(), wt = w.dtype();
  if (!conv_quads_apply(g, xt, wt)) {
    MESSAGE("no VNNI on this CPU: the byte-quad convolution is not used here");
    return;
  }
  std::vector<int32_t> y(static_cast<std::size_t>(c.batch * g.out_channels * g.out_size()), 0x5A5A5A5A);
  Graph graph;
  const Node* node = graph.add_node("ConvInteger", {}, {});
  KernelContext context{*node};
  context.threads = &pool;
  conv2d_quads_s32(context, g, x, zx, w, zw, y.data());

  const int64_t mg = g.out_channels_per_group(), cg = g.in_channels_per_group();
  const int64_t oh = g.out_spatial[0], ow = g.out_spatial[1];
  int64_t mismatches = 0;
  for (int64_t n = 0; n < c.batch; ++n)
    for (int64_t oc = 0; oc < g.out_channels; ++oc)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t acc = 0;
          const int64_t zwm = zw[zw.size() == 1 ? 0 : static_cast<std::size_t>(oc)];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < c.kh; ++ky)
              for (int64_t kx = 0; kx < c.kw; ++kx) {
                const int64_t iy = oy * c.sh - c.pt + ky * c.dh, ix = ox * c.sw - c.pl + kx * c.dw;
                if (iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw) continue;
                const int64_t channel = oc / mg * cg + ci;
                const int64_t xv = x.data<X>()[((n * c.channels + channel) * c.ih + iy) * c.iw + ix];
                const int64_t wv = w.data<W>()[((oc * cg + ci) * c.kh + ky) * c.kw + kx];
                acc += (xv - zx) * (wv - zwm);
              }
          const int64_t at = ((n * g.out_channels + oc) * oh + oy) * ow + ox;
          if (y[static_cast<std::size_t>(at)] != acc) ++mismatches;
        }
  CHECK_MESSAGE(mismatches == 0, "x " << dtype_name(xt) << " w " << dtype_name(wt) << " zx " << zx << " zw "
                                      << zw.size() << " value(s), " << c.channels << "->" << c.out_channels
                                      << " group " << c.group);
}

std::vector<int32_t> per_channel(int64_t m, int32_t lo, int32_t hi) {
  std::vector<int32_t> z(static_cast<std::size_t>(m));
  for (int64_t i = 0; i < m; ++i) z[static_cast<std::size_t>(i)] = lo + static_cast<int32_t>(i * 37 % (hi - lo + 1));
  return z;
}

TEST_CASE("byte-quad convolution: exact sums for every type pair and zero point") {
  ThreadPool pool(2);
  for (const Case& c : kCases) {
    check<uint8_t, uint8_t>(c, 131, {143}, pool);                          // ORT's dynamic quantization
    check<uint8_t, uint8_t>(c, 0, per_channel(c.out_channels, 0, 255), pool);
    check<uint8_t, int8_t>(c, 255, {0}, pool);                             // no row of ones
    check<uint8_t, int8_t>(c, 17, per_channel(c.out_channels, -128, 127), pool);
    check<int8_t, int8_t>(c, -128, {0}, pool);
    check<int8_t, uint8_t>(c, 127, {128}, pool);                           // w' zero point 0
    check<int8_t, int8_t>(c, 5, {-3}, pool);
  }
}

}  // namespace
}  // namespace qflow
