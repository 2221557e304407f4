// ConvTranspose2D on the fast kernels, as a block product followed by a scatter (col2im): for
// each input pixel, its centered channels (one int16 column) times the packed weights give the
// contribution of that pixel to all mg * kH * kW (output channel, tap) pairs; these are added
// into int32 output accumulators initialised with the bias, then requantized row by row.
//
// Exact as fx::conv_transpose2d: every output sums at most cg * kH * kW products, and the
// reference refuses any length whose sum could leave int32 (max_reduction); every partial sum is
// bounded by the same sum of magnitudes, so int32 accumulation in any order equals the
// reference's int64 sum, and the epilogue is the exact requantize of fast_requant.cpp. 16-bit
// inputs and int16 weights go chunked (chunk_reduction): int32 block products over chunks of
// input channels, the weight halves and the chunks added in int64, scattered into int64
// outputs and requantized by requantize_wide_row.
//
// A kernel equal to the stride without pads (the 2x upsampling of segmentation heads) runs as
// a 1x1 conv2d with one output per (channel, tap) and a depth-to-space move: every output
// then takes one tap of one pixel, so it is that conv2d's output, requantized by its kernels
// (PP-OCRv4 det's 24 -> 24 channel 160x160 -> 320x320 int16 ConvTranspose: see docs/kernels.md).
#include <algorithm>
#include <array>

#include "fixed_point/fast_kernels.h"

namespace qflow::fx::fast {
namespace {

int64_t round_up(int64_t v, int64_t step) { return (v + step - 1) / step * step; }

struct TransposeScratch {
  std::vector<int16_t> columns;
  std::vector<int32_t> products, acc;
  std::vector<int32_t> taps;  // the pointwise form's conv2d output
  std::vector<int32_t> zeros;  // the products' initial values: only grown (new elements are 0), never written
  std::vector<int64_t> wide_products, wide_acc;  // chunked
};
TransposeScratch& transpose_scratch() {
  thread_local TransposeScratch s;
  return s;
}

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// Input rows per block: about 32K int16 of columns, at least one row.
int64_t rows_per_block(const PackedConvTranspose2D& k) {
  const int64_t in_w = k.params.in_w;
  return std::max<int64_t>(1, 32768 / (k.depth * in_w));
}

// Columns of the block's pixels [pix0, pix0 + count) for input channels [c0, c0 + depth) of
// the group (zero past cg and for the padding columns up to `padded`), `depth` apart.
void fill_columns(const int32_t* xg, int64_t plane_in, int64_t cg, int64_t c0, int64_t depth, int64_t pix0,
                  int64_t count, int64_t padded, int32_t zp, int16_t* cols) {
  const int64_t c1 = std::min(cg, c0 + depth);
  for (int64_t j = 0; j < padded; ++j) {
    int16_t* col = cols + j * depth;
    int64_t c = c0;
    if (j < count)
      for (; c < c1; ++c) col[c - c0] = static_cast<int16_t>(xg[c * plane_in + pix0 + j] - zp);
    std::fill(col + (c - c0), col + depth, int16_t{0});
  }
}

// Adds each (output channel, tap) row of `products` (the block's input rows iy0.., `block`
// apart) into the output planes `acc` at the tap's place: input (iy, ix) lands on
// (iy * sy - pad_top + ky * dy, ix * sx - pad_left + kx * dx).
template <typename T>
void scatter(const PackedConvTranspose2D& k, const T* products, int64_t block, int64_t iy0, int64_t rows, T* acc) {
  const ConvTranspose2DParams& p = k.params;
  const int64_t oh = k.out_h, ow = k.out_w, plane_out = oh * ow;
  const int64_t mg = p.out_channels / p.group, kk = p.kernel_h * p.kernel_w;
  const int64_t sy = p.strides[0], sx = p.strides[1], dy = p.dilations[0], dx = p.dilations[1];
  for (int64_t r = 0; r < mg * kk; ++r) {
    const int64_t mm = r / kk, ky = r % kk / p.kernel_w, kx = r % p.kernel_w;
    const int64_t ox0 = kx * dx - p.pads[1];
    // The ix whose ox = ix * sx + ox0 lies in [0, ow).
    const int64_t ix_lo = ox0 >= 0 ? 0 : (-ox0 + sx - 1) / sx;
    const int64_t ix_hi = ow - 1 - ox0 < 0 ? 0 : std::min(p.in_w, (ow - 1 - ox0) / sx + 1);
    const T* prod = products + r * block;
    T* am = acc + mm * plane_out;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t oy = (iy0 + i) * sy - p.pads[0] + ky * dy;
      if (oy < 0 || oy >= oh) continue;
      const T* src = prod + i * p.in_w;
      T* dst = am + oy * ow;
      if (sx == 1)
        for (int64_t ix = ix_lo; ix < ix_hi; ++ix) dst[ix + ox0] += src[ix];
      else
        for (int64_t ix = ix_lo; ix < ix_hi; ++ix) dst[ix * sx + ox0] += src[ix];
    }
  }
}

// The 1x1 conv2d of PackedConvTranspose2D::pointwise: output channel m's taps t become
// conv2d outputs m * kH * kW + t, with m's bias and multiplier; weight w[c][mm][t] of group g
// becomes row g * mg * kH * kW + mm * kH * kW + t, column c. False when the op has another
// form or the conv2d kernels refuse it.
bool pack_pointwise(const ConvTranspose2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                    PackedConv2D& out) {
  if (p.kernel_h != p.strides[0] || p.kernel_w != p.strides[1] || p.dilations[0] != 1 || p.dilations[1] != 1 ||
      p.output_padding[0] != 0 || p.output_padding[1] != 0 || p.pads != std::array<int64_t, 4>{0, 0, 0, 0})
    return false;
  const int64_t kk = p.kernel_h * p.kernel_w, cg = p.in_channels / p.group, mg = p.out_channels / p.group;
  Conv2DParams q = p;
  q.out_channels = p.out_channels * kk;
  q.kernel_h = q.kernel_w = 1;
  q.strides = {1, 1};
  if (p.multipliers.size() > 1) {
    q.multipliers.clear();
    for (const Multiplier m : p.multipliers) q.multipliers.insert(q.multipliers.end(), static_cast<size_t>(kk), m);
  }
  std::vector<int32_t> rows(static_cast<size_t>(q.out_channels * cg));
  for (int64_t g = 0; g < p.group; ++g)
    for (int64_t r = 0; r < mg * kk; ++r)
      for (int64_t c = 0; c < cg; ++c)
        rows[static_cast<size_t>((g * mg * kk + r) * cg + c)] = w[static_cast<size_t>((g * cg + c) * mg * kk + r)];
  std::vector<int32_t> row_bias;
  for (const int32_t b : bias) row_bias.insert(row_bias.end(), static_cast<size_t>(kk), b);
  return pack_conv2d(q, rows, row_bias, out).is_ok();
}

// y[plane][iy * kH + ky][ix * kW + kx] = taps[plane * kH * kW + ky * kW + kx][iy][ix] for every
// (batch, output channel) plane: the pointwise form's outputs moved to their pixels.
void depth_to_space(const int32_t* taps, int64_t planes, int64_t kh, int64_t kw, int64_t in_h, int64_t in_w,
                    int32_t* y) {
  const int64_t ow = in_w * kw, plane_in = in_h * in_w;
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t iy = 0; iy < in_h; ++iy)
      for (int64_t ky = 0; ky < kh; ++ky) {
        int32_t* dst = y + (plane * in_h * kh + iy * kh + ky) * ow;
        const int32_t* src = taps + (plane * kh * kw + ky * kw) * plane_in + iy * in_w;
        if (kw == 2) {
          const int32_t* src1 = src + plane_in;
          for (int64_t ix = 0; ix < in_w; ++ix) {
            dst[2 * ix] = src[ix];
            dst[2 * ix + 1] = src1[ix];
          }
          continue;
        }
        for (int64_t kx = 0; kx < kw; ++kx, src += plane_in)
          for (int64_t ix = 0; ix < in_w; ++ix) dst[ix * kw + kx] = src[ix];
      }
}

}  // namespace

Status pack_conv_transpose2d(const ConvTranspose2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                             PackedConvTranspose2D& out) {
  int64_t chunk = 0;  // input channels per int32 pass; 0: all of them in one
  if (!supports(p.input.type, p.weight_type)) {
    chunk = chunk_reduction(p.input.type, p.input.zero_point, p.weight_type) / kDepthStep * kDepthStep;
    if (chunk < kDepthStep) return invalid_input("conv_transpose2d: no fast kernel for this type pair");
  }
  for (const Multiplier m : p.multipliers)
    if (m.mantissa < 0 || m.shift < kMinShift || m.shift > kMaxShift)
      return invalid_input("conv_transpose2d: a multiplier is outside the mantissa and shift ranges");
  // Every check of the reference but the input values': the reference itself on an input of zero
  // points (in range once the zero point is), which skips all products.
  const int64_t oh = conv_transpose_out_h(p), ow = conv_transpose_out_w(p);
  if (p.batch < 1 || p.in_channels < 1 || p.in_h < 1 || p.in_w < 1 || oh < 1 || ow < 1 || p.out_channels < 1)
    return invalid_input("conv_transpose2d: dimensions must be positive");
  {
    ConvTranspose2DParams one = p;
    one.batch = 1;
    std::vector<int32_t> x(static_cast<size_t>(p.in_channels * p.in_h * p.in_w), p.input.zero_point);
    std::vector<int32_t> y(static_cast<size_t>(p.out_channels * oh * ow));
    if (Status s = conv_transpose2d(one, x, w, bias, y); !s.is_ok()) return s;
  }
  out = PackedConvTranspose2D{};
  out.params = p;
  out.out_h = oh;
  out.out_w = ow;
  out.chunk_depth = chunk;
  if (PackedConv2D pointwise; pack_pointwise(p, w, bias, pointwise)) {
    out.pointwise = std::move(pointwise);
    return Status{};
  }
  const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group, kk = p.kernel_h * p.kernel_w;
  out.depth = round_up(cg, kDepthStep);
  out.group_rows = round_up(mg * kk, kRowBlock);
  const bool split = chunk > 0 && is_16bit(p.weight_type);
  out.weights.assign(static_cast<size_t>(p.group * out.group_rows * out.depth), 0);
  if (split) out.weights_low.assign(out.weights.size(), 0);
  // Row (mm, tap) of group g holds w[g * cg + c][mm][tap] over c, channel c in the chunk that
  // starts at c0 ([group_rows][channels of the chunk]).
  const int64_t chunk_depth = chunk > 0 ? chunk : out.depth;
  for (int64_t g = 0; g < p.group; ++g)
    for (int64_t r = 0; r < mg * kk; ++r)
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t c0 = c / chunk_depth * chunk_depth, depth = std::min(chunk_depth, out.depth - c0);
        const auto at = static_cast<size_t>(g * out.group_rows * out.depth + out.group_rows * c0 + r * depth + c - c0);
        const int32_t v = w[static_cast<size_t>((g * cg + c) * mg * kk + r)];
        out.weights[at] = static_cast<int16_t>(split ? weight_high(v) : v);
        if (split) out.weights_low[at] = static_cast<int16_t>(weight_low(v));
      }
  out.bias.assign(static_cast<size_t>(p.out_channels), 0);
  if (!bias.empty()) std::copy(bias.begin(), bias.end(), out.bias.begin());
  out.multipliers = p.multipliers.size() == 1 ? std::vector<Multiplier>(static_cast<size_t>(p.out_channels), p.multipliers[0])
                                              : p.multipliers;
  const Range r = range_of(p.output.type);
  out.lo = std::max(r.min, p.clamp.min);
  out.hi = std::min(r.max, p.clamp.max);
  return Status{};
}

Status conv_transpose2d(const PackedConvTranspose2D& k, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                       bool inputs_in_range) {
  const ConvTranspose2DParams& p = k.params;
  const int64_t oh = k.out_h, ow = k.out_w, plane_in = p.in_h * p.in_w, plane_out = oh * ow;
  if (x.size() != static_cast<size_t>(p.batch * p.in_channels * plane_in) ||
      y.size() != static_cast<size_t>(p.batch * p.out_channels * plane_out))
    return invalid_input("conv_transpose2d: tensor sizes do not match the parameters");
  if (!inputs_in_range)
    if (Status s = check_range(x, p.input.type, "conv_transpose2d input"); !s.is_ok()) return s;
  TransposeScratch& s = transpose_scratch();
  if (k.pointwise) {
    const int64_t planes = p.batch * p.out_channels, kk = p.kernel_h * p.kernel_w;
    int32_t* taps = sized(s.taps, planes * kk * plane_in);
    if (Status st = conv2d(*k.pointwise, isa, x, std::span<int32_t>(taps, static_cast<size_t>(planes * kk * plane_in)), true);
        !st.is_ok())
      return st;
    depth_to_space(taps, planes, p.kernel_h, p.kernel_w, p.in_h, p.in_w, y.data());
    return Status{};
  }
  const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group;
  const int64_t rows_block = rows_per_block(k), block = round_up(rows_block * p.in_w, kColBlock);
  const bool chunked = k.chunk_depth > 0, split = !k.weights_low.empty();
  const int64_t chunk_depth = chunked ? k.chunk_depth : k.depth;
  int16_t* cols = sized(s.columns, block * chunk_depth);
  int32_t* products = sized(s.products, k.group_rows * block);
  int32_t* acc = chunked ? nullptr : sized(s.acc, mg * plane_out);
  int64_t* wide_products = chunked ? sized(s.wide_products, k.group_rows * block) : nullptr;
  int64_t* wide_acc = chunked ? sized(s.wide_acc, mg * plane_out) : nullptr;
  const int32_t* zeros = sized(s.zeros, k.group_rows);
  const int32_t zp = p.input.zero_point;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      for (int64_t mm = 0; mm < mg; ++mm) {
        const int32_t b = k.bias[static_cast<size_t>(g * mg + mm)];
        if (chunked) std::fill(wide_acc + mm * plane_out, wide_acc + (mm + 1) * plane_out, int64_t{b});
        else std::fill(acc + mm * plane_out, acc + (mm + 1) * plane_out, b);
      }
      const int32_t* xg = x.data() + (n * p.in_channels + g * cg) * plane_in;
      const size_t group_at = static_cast<size_t>(g * k.group_rows * k.depth);
      for (int64_t iy0 = 0; iy0 < p.in_h; iy0 += rows_block) {
        const int64_t rows = std::min(rows_block, p.in_h - iy0), count = rows * p.in_w;
        const int64_t padded = round_up(count, kColBlock), pix0 = iy0 * p.in_w;
        if (!chunked) {
          fill_columns(xg, plane_in, cg, 0, k.depth, pix0, count, padded, zp, cols);
          gemm_s16(isa, k.weights.data() + group_at, k.group_rows, cols, padded, k.depth, zeros, products, block);
          scatter(k, products, block, iy0, rows, acc);
          continue;
        }
        std::fill(wide_products, wide_products + k.group_rows * block, int64_t{0});
        for (int64_t c0 = 0; c0 < k.depth; c0 += chunk_depth) {
          const int64_t depth = std::min(chunk_depth, k.depth - c0);
          const size_t at = group_at + static_cast<size_t>(k.group_rows * c0);
          fill_columns(xg, plane_in, cg, c0, depth, pix0, count, padded, zp, cols);
          gemm_s16(isa, k.weights.data() + at, k.group_rows, cols, padded, depth, zeros, products, block);
          for (int64_t i = 0; i < k.group_rows * block; ++i) wide_products[i] += int64_t{products[i]} * (split ? 256 : 1);
          if (!split) continue;
          gemm_s16(isa, k.weights_low.data() + at, k.group_rows, cols, padded, depth, zeros, products, block);
          for (int64_t i = 0; i < k.group_rows * block; ++i) wide_products[i] += products[i];
        }
        scatter(k, wide_products, block, iy0, rows, wide_acc);
      }
      for (int64_t mm = 0; mm < mg; ++mm) {
        const int64_t m = g * mg + mm;
        int32_t* ym = y.data() + (n * p.out_channels + m) * plane_out;
        if (chunked)
          requantize_wide_row(isa, wide_acc + mm * plane_out, plane_out, k.multipliers[static_cast<size_t>(m)],
                              p.output.zero_point, k.lo, k.hi, ym, 1);
        else
          requantize_row(isa, acc + mm * plane_out, plane_out, k.multipliers[static_cast<size_t>(m)], p.output.zero_point,
                         k.lo, k.hi, ym, 1);
      }
    }
  return Status{};
}

}  // namespace qflow::fx::fast
