// Conv2D and MatMul on the fast kernels: weight packing at load time, per-run im2col into int16
// columns, block products and the requantize epilogue (docs/fixed-point.md, "Fast kernels").
#include <algorithm>

#include "runtime/fixed_point/fast_depthwise.h"
#include "runtime/fixed_point/fast_kernels.h"

namespace qflow::fx::fast {
namespace {

int64_t round_up(int64_t v, int64_t step) { return (v + step - 1) / step * step; }

// Per-thread buffers reused across runs: columns, accumulators, the depthwise plane.
struct Scratch {
  std::vector<int16_t> columns;
  std::vector<int32_t> acc;
  std::vector<int32_t> plane;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// Columns per block: enough to amortize the weight rows, few enough to stay in cache.
int64_t column_block(int64_t depth) { return std::clamp<int64_t>(round_up(32768 / depth, kColBlock), 8, 512); }

Status check_multipliers(const std::vector<Multiplier>& ms) {
  for (const Multiplier m : ms)
    if (m.mantissa < 0 || m.shift < kMinShift || m.shift > kMaxShift)
      return Status::error("a multiplier is outside the mantissa and shift ranges");
  return Status{};
}

Range bounds(QType type, Clamp clamp) {
  const Range r = range_of(type);
  return Range{std::max(r.min, clamp.min), std::min(r.max, clamp.max)};
}

std::vector<Multiplier> expand(const std::vector<Multiplier>& ms, int64_t n) {
  if (ms.size() == 1) return std::vector<Multiplier>(static_cast<size_t>(n), ms[0]);
  return ms;
}

// Columns [c0, c0 + count) of the im2col matrix of image n, group g: column p holds the cg * kH * kW
// taps (x - zp) of output pixel p, zero for padding taps and beyond the reduction length.
void gather_columns(const PackedConv2D& k, const int32_t* image, int64_t g, int64_t c0, int64_t count, int16_t* cols) {
  const Conv2DParams& p = k.params;
  const int64_t cg = p.in_channels / p.group, kh = p.kernel_h, kw = p.kernel_w;
  const int64_t sy = p.strides[0], sx = p.strides[1], dy = p.dilations[0], dx = p.dilations[1];
  const int64_t plane = p.in_h * p.in_w, zp = p.input.zero_point;
  const int32_t* xg = image + g * cg * plane;
  const bool pointwise = kh == 1 && kw == 1 && sy == 1 && sx == 1 && p.pads[0] == 0 && p.pads[1] == 0 &&
                         p.pads[2] == 0 && p.pads[3] == 0;
  for (int64_t j = 0; j < count; ++j) {
    int16_t* col = cols + j * k.depth;
    const int64_t pix = c0 + j;
    int64_t t = 0;
    if (pix < k.out_h * k.out_w) {
      if (pointwise) {
        for (int64_t c = 0; c < cg; ++c) col[t++] = static_cast<int16_t>(xg[c * plane + pix] - zp);
      } else {
        const int64_t oy = pix / k.out_w, ox = pix % k.out_w;
        const int64_t iy0 = oy * sy - p.pads[0], ix0 = ox * sx - p.pads[1];
        for (int64_t c = 0; c < cg; ++c) {
          const int32_t* xc = xg + c * plane;
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = iy0 + ky * dy;
            if (iy < 0 || iy >= p.in_h) {
              std::fill(col + t, col + t + kw, int16_t{0});
              t += kw;
              continue;
            }
            const int32_t* row = xc + iy * p.in_w;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ix = ix0 + kx * dx;
              col[t++] = ix < 0 || ix >= p.in_w ? int16_t{0} : static_cast<int16_t>(row[ix] - zp);
            }
          }
        }
      }
    }
    std::fill(col + t, col + k.depth, int16_t{0});
  }
}

}  // namespace

Status pack_conv2d(const Conv2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                   PackedConv2D& out) {
  if (!supports(p.input.type, p.weight_type)) return Status::error("conv2d: no fast kernel for this type pair");
  // Sizes of x and y as the parameters imply them: only their values are checked per run.
  const int64_t oh = conv_out_h(p), ow = conv_out_w(p);
  const auto x_size = static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w);
  const auto y_size = static_cast<size_t>(p.batch * p.out_channels * std::max<int64_t>(oh, 0) * std::max<int64_t>(ow, 0));
  if (Status s = check_conv2d(p, x_size, nullptr, w, bias, y_size); !s.ok()) return s;
  if (Status s = check_multipliers(p.multipliers); !s.ok()) return s;
  out = PackedConv2D{};
  out.params = p;
  out.out_h = oh;
  out.out_w = ow;
  const int64_t mg = p.out_channels / p.group, k = p.in_channels / p.group * p.kernel_h * p.kernel_w;
  out.depth = round_up(k, kDepthStep);
  out.group_rows = round_up(mg, kRowBlock);
  const bool depthwise = p.in_channels == p.group;
  if (depthwise) out.taps.assign(w.begin(), w.end());
  else out.weights.assign(static_cast<size_t>(p.group * out.group_rows * out.depth), 0);
  out.bias.assign(static_cast<size_t>(p.group * out.group_rows), 0);
  for (int64_t m = 0; m < p.out_channels; ++m) {
    const int64_t row = m / mg * out.group_rows + m % mg;
    if (!depthwise) std::copy(w.begin() + m * k, w.begin() + (m + 1) * k, out.weights.begin() + row * out.depth);
    if (!bias.empty()) out.bias[static_cast<size_t>(row)] = bias[static_cast<size_t>(m)];
  }
  out.multipliers = expand(p.multipliers, p.out_channels);
  const Range b = bounds(p.output.type, p.clamp);
  out.lo = b.min;
  out.hi = b.max;
  return Status{};
}

Status conv2d(const PackedConv2D& k, Isa isa, std::span<const int32_t> x, std::span<int32_t> y) {
  const Conv2DParams& p = k.params;
  const int64_t plane_in = p.in_channels * p.in_h * p.in_w, pixels = k.out_h * k.out_w;
  if (x.size() != static_cast<size_t>(p.batch * plane_in) || y.size() != static_cast<size_t>(p.batch * p.out_channels * pixels))
    return Status::error("conv2d: tensor sizes do not match the parameters");
  if (Status s = check_range(x, p.input.type, "conv2d input"); !s.ok()) return s;
  Scratch& s = scratch();
  if (!k.taps.empty()) {
    detail::depthwise_conv2d(k, isa, x.data(), y.data(), s.plane, s.acc);
    return Status{};
  }
  const int64_t mg = p.out_channels / p.group;
  const int64_t block = std::min(column_block(k.depth), round_up(pixels, kColBlock));
  int16_t* cols = sized(s.columns, block * k.depth);
  int32_t* acc = sized(s.acc, k.group_rows * block);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      const int16_t* wg = k.weights.data() + g * k.group_rows * k.depth;
      const int32_t* bg = k.bias.data() + g * k.group_rows;
      for (int64_t c0 = 0; c0 < pixels; c0 += block) {
        const int64_t count = std::min(block, pixels - c0), padded = round_up(count, kColBlock);
        gather_columns(k, x.data() + n * plane_in, g, c0, padded, cols);
        gemm_s16(isa, wg, k.group_rows, cols, padded, k.depth, bg, acc, block);
        for (int64_t r = 0; r < mg; ++r) {
          const int64_t m = g * mg + r;
          requantize_row(isa, acc + r * block, count, k.multipliers[static_cast<size_t>(m)], p.output.zero_point, k.lo,
                         k.hi, y.data() + (n * p.out_channels + m) * pixels + c0, 1);
        }
      }
    }
  return Status{};
}

Status pack_matmul(const MatMulParams& p, std::span<const int32_t> b, std::span<const int32_t> bias,
                   PackedMatMul& out) {
  if (!supports(p.a.type, p.b_type)) return Status::error("matmul: no fast kernel for this type pair");
  if (Status s = check_matmul(p, static_cast<size_t>(p.m * p.k), nullptr, b, bias, static_cast<size_t>(p.m * p.n));
      !s.ok())
    return s;
  if (Status s = check_multipliers(p.multipliers); !s.ok()) return s;
  out = PackedMatMul{};
  out.params = p;
  out.depth = round_up(p.k, kDepthStep);
  out.rows = round_up(p.n, kRowBlock);
  out.b.assign(static_cast<size_t>(out.rows * out.depth), 0);
  out.bias.assign(static_cast<size_t>(out.rows), 0);
  for (int64_t j = 0; j < p.n; ++j) {
    int16_t* row = out.b.data() + j * out.depth;
    for (int64_t t = 0; t < p.k; ++t) {
      const int32_t v = p.b_transposed ? b[static_cast<size_t>(j * p.k + t)] : b[static_cast<size_t>(t * p.n + j)];
      row[t] = static_cast<int16_t>(v - p.b_zero_point);
    }
    if (!bias.empty()) out.bias[static_cast<size_t>(j)] = bias[static_cast<size_t>(j)];
  }
  out.multipliers = expand(p.multipliers, p.n);
  const Range r = bounds(p.output.type, p.clamp);
  out.lo = r.min;
  out.hi = r.max;
  return Status{};
}

Status matmul(const PackedMatMul& k, Isa isa, std::span<const int32_t> a, std::span<int32_t> y) {
  const MatMulParams& p = k.params;
  if (a.size() != static_cast<size_t>(p.m * p.k) || y.size() != static_cast<size_t>(p.m * p.n))
    return Status::error("matmul: tensor sizes do not match the parameters");
  if (Status s = check_range(a, p.a.type, "matmul A"); !s.ok()) return s;
  const int64_t block = std::min(column_block(k.depth), round_up(p.m, kColBlock));
  Scratch& s = scratch();
  int16_t* cols = sized(s.columns, block * k.depth);
  int32_t* acc = sized(s.acc, k.rows * block);
  const int32_t za = p.a.zero_point;
  for (int64_t i0 = 0; i0 < p.m; i0 += block) {
    const int64_t count = std::min(block, p.m - i0), padded = round_up(count, kColBlock);
    for (int64_t c = 0; c < padded; ++c) {
      int16_t* col = cols + c * k.depth;
      int64_t t = 0;
      if (c < count) {
        const int32_t* row = a.data() + (i0 + c) * p.k;
        for (; t < p.k; ++t) col[t] = static_cast<int16_t>(row[t] - za);
      }
      std::fill(col + t, col + k.depth, int16_t{0});
    }
    gemm_s16(isa, k.b.data(), k.rows, cols, padded, k.depth, k.bias.data(), acc, block);
    for (int64_t j = 0; j < p.n; ++j)
      requantize_row(isa, acc + j * block, count, k.multipliers[static_cast<size_t>(j)], p.output.zero_point, k.lo, k.hi,
                     y.data() + i0 * p.n + j, p.n);
  }
  return Status{};
}

}  // namespace qflow::fx::fast
