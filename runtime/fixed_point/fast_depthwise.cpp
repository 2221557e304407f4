// Direct conv2d for one input channel per output channel (depthwise, and depthwise with a
// channel multiplier): the im2col + block product would waste most of its rows and padding
// there. Per channel, the centered input is copied into a zero-padded plane once, then every
// tap adds w * plane to a row of int32 accumulators, vectorized across output pixels.
#include <algorithm>

#include "runtime/fixed_point/fast_depthwise.h"

namespace qflow::fx::fast::detail {
namespace {

// acc[oy * ow + ox] = bias + sum of taps over the padded plane (row pitch pw).
[[gnu::always_inline]] inline void depthwise_plane(const int32_t* plane, int64_t pw, const int32_t* taps, int64_t kh,
                                                   int64_t kw, int64_t sy, int64_t sx, int64_t dy, int64_t dx,
                                                   int64_t oh, int64_t ow, int32_t bias, int32_t* acc) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    int32_t* a = acc + oy * ow;
    std::fill(a, a + ow, bias);
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int32_t* row = plane + (oy * sy + ky * dy) * pw;
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int32_t w = taps[ky * kw + kx];
        const int32_t* src = row + kx * dx;
        if (sx == 1)
          for (int64_t ox = 0; ox < ow; ++ox) a[ox] += w * src[ox];
        else
          for (int64_t ox = 0; ox < ow; ++ox) a[ox] += w * src[ox * sx];
      }
    }
  }
}

// Stride 1: the accumulators take the plane's row pitch, so each tap is one long contiguous
// update over oh * pw values (columns ox >= ow are computed and dropped; the plane has a zero
// tail for their reads), then the valid columns are compacted to rows of ow.
[[gnu::always_inline]] inline void depthwise_flat(const int32_t* plane, int64_t pw, const int32_t* taps, int64_t kh,
                                                  int64_t kw, int64_t dy, int64_t dx, int64_t oh, int64_t ow,
                                                  int32_t bias, int32_t* wide, int32_t* acc) {
  const int64_t n = oh * pw;
  std::fill(wide, wide + n, bias);
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int64_t kx = 0; kx < kw; ++kx) {
      const int32_t w = taps[ky * kw + kx];
      const int32_t* src = plane + ky * dy * pw + kx * dx;
      for (int64_t i = 0; i < n; ++i) wide[i] += w * src[i];
    }
  for (int64_t oy = 0; oy < oh; ++oy) std::copy(wide + oy * pw, wide + oy * pw + ow, acc + oy * ow);
}

void depthwise_flat_portable(const int32_t* plane, int64_t pw, const int32_t* taps, int64_t kh, int64_t kw,
                             int64_t dy, int64_t dx, int64_t oh, int64_t ow, int32_t bias, int32_t* wide, int32_t* acc) {
  depthwise_flat(plane, pw, taps, kh, kw, dy, dx, oh, ow, bias, wide, acc);
}

void depthwise_portable(const int32_t* plane, int64_t pw, const int32_t* taps, int64_t kh, int64_t kw, int64_t sy,
                        int64_t sx, int64_t dy, int64_t dx, int64_t oh, int64_t ow, int32_t bias, int32_t* acc) {
  depthwise_plane(plane, pw, taps, kh, kw, sy, sx, dy, dx, oh, ow, bias, acc);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same loops, vectorized by the compiler for AVX2.
__attribute__((target("avx2"))) void depthwise_flat_avx2(const int32_t* plane, int64_t pw, const int32_t* taps,
                                                         int64_t kh, int64_t kw, int64_t dy, int64_t dx, int64_t oh,
                                                         int64_t ow, int32_t bias, int32_t* wide, int32_t* acc) {
  depthwise_flat(plane, pw, taps, kh, kw, dy, dx, oh, ow, bias, wide, acc);
}

__attribute__((target("avx2"))) void depthwise_avx2(const int32_t* plane, int64_t pw, const int32_t* taps,
                                                    int64_t kh, int64_t kw, int64_t sy, int64_t sx, int64_t dy,
                                                    int64_t dx, int64_t oh, int64_t ow, int32_t bias, int32_t* acc) {
  depthwise_plane(plane, pw, taps, kh, kw, sy, sx, dy, dx, oh, ow, bias, acc);
}
#endif

}  // namespace

void depthwise_conv2d(const PackedConv2D& k, Isa isa, const int32_t* x, int32_t* y, std::vector<int32_t>& plane,
                      std::vector<int32_t>& acc) {
  const Conv2DParams& p = k.params;
  // The padded input, extended with zeros to every tap read: conv_out_h truncates toward zero,
  // so with a kernel taller than the padded input the last row of taps may reach beyond it.
  const int64_t ph = std::max(p.in_h + p.pads[0] + p.pads[2], (k.out_h - 1) * p.strides[0] + (p.kernel_h - 1) * p.dilations[0] + 1);
  const int64_t pw = std::max(p.in_w + p.pads[1] + p.pads[3], (k.out_w - 1) * p.strides[1] + (p.kernel_w - 1) * p.dilations[1] + 1);
  const int64_t pixels = k.out_h * k.out_w, mg = p.out_channels / p.group, taps = p.kernel_h * p.kernel_w;
  const int32_t zp = p.input.zero_point;
  const bool flat = p.strides[0] == 1 && p.strides[1] == 1;
  // A zero tail of one row for the dropped columns of the flat path.
  const int64_t plane_size = ph * pw + pw, wide_size = flat ? k.out_h * pw : 0;
  if (plane.size() < static_cast<size_t>(plane_size)) plane.resize(static_cast<size_t>(plane_size));
  if (acc.size() < static_cast<size_t>(pixels + wide_size)) acc.resize(static_cast<size_t>(pixels + wide_size));
  int32_t* wide = acc.data() + pixels;
  // The border stays zero for the whole call: only the interior is rewritten per channel.
  std::fill(plane.begin(), plane.begin() + plane_size, 0);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      const int32_t* xc = x + (n * p.in_channels + g) * p.in_h * p.in_w;
      for (int64_t iy = 0; iy < p.in_h; ++iy) {
        int32_t* dst = plane.data() + (iy + p.pads[0]) * pw + p.pads[1];
        const int32_t* src = xc + iy * p.in_w;
        for (int64_t ix = 0; ix < p.in_w; ++ix) dst[ix] = src[ix] - zp;
      }
      for (int64_t r = 0; r < mg; ++r) {
        const int64_t m = g * mg + r;
        const int32_t* w = k.taps.data() + m * taps;
        const int32_t bias = k.bias[static_cast<size_t>(g * k.group_rows + r)];
        const bool avx2 = isa != Isa::Portable;
#if defined(__x86_64__) && defined(__GNUC__)
        if (flat && avx2)
          depthwise_flat_avx2(plane.data(), pw, w, p.kernel_h, p.kernel_w, p.dilations[0], p.dilations[1], k.out_h,
                              k.out_w, bias, wide, acc.data());
        else if (avx2)
          depthwise_avx2(plane.data(), pw, w, p.kernel_h, p.kernel_w, p.strides[0], p.strides[1], p.dilations[0],
                         p.dilations[1], k.out_h, k.out_w, bias, acc.data());
        else
#else
        (void)avx2;
#endif
        if (flat)
          depthwise_flat_portable(plane.data(), pw, w, p.kernel_h, p.kernel_w, p.dilations[0], p.dilations[1], k.out_h,
                                  k.out_w, bias, wide, acc.data());
        else
          depthwise_portable(plane.data(), pw, w, p.kernel_h, p.kernel_w, p.strides[0], p.strides[1], p.dilations[0],
                             p.dilations[1], k.out_h, k.out_w, bias, acc.data());
        requantize_row(isa, acc.data(), pixels, k.multipliers[static_cast<size_t>(m)], p.output.zero_point, k.lo, k.hi,
                       y + (n * p.out_channels + m) * pixels, 1);
      }
    }
}

}  // namespace qflow::fx::fast::detail
