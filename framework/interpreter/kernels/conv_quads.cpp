// 8-bit convolution on byte quads. The operands are moved into the types vpdpbusd multiplies:
// x' = x + ox as unsigned bytes (ox = 128 for int8 x) and w' = w + ow as signed bytes (ow = -128
// for uint8 w); with zx' = x_zero_point + ox and zw' = w_zero_point + ow,
//   sum (x - zx)(w - zw) = sum x'w' - zx' sum w' + kc zx' zw' - zw' sum x'.
// The middle terms are per output channel and start the accumulators; the last needs each
// window's sum of x', which one extra weight row of ones computes in the same product (only
// when some zw' is not 0: uint8 weights, or int8 weights with a zero point). Padding taps read
// zx', so they add nothing. Lanes wrap modulo 2^32 on the way and end on the exact sum, which
// the caller knows fits int32.
#include "framework/interpreter/kernels/conv_quads.h"

#include <algorithm>
#include <type_traits>

#include "qflow/runtime/integer_gemm.h"

namespace qflow {
namespace {

namespace fast = fx::fast;

int64_t round_up(int64_t v, int64_t step) { return (v + step - 1) / step * step; }
int32_t wrap(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

// The input plane of one image and group with its pads: it reaches the last tap of the last
// output pixel, so the quads are gathered without bounds tests.
struct PlaneShape {
  int64_t height = 0, width = 0;
};

PlaneShape plane_shape(const ConvGeometry& g) {
  PlaneShape s;
  s.height = std::max(g.in_spatial[0] + g.pads_begin[0] + g.pads_end[0],
                      (g.out_spatial[0] - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1);
  s.width = std::max(g.in_spatial[1] + g.pads_begin[1] + g.pads_end[1],
                     (g.out_spatial[1] - 1) * g.strides[1] + (g.kernel[1] - 1) * g.dilations[1] + 1);
  return s;
}

// The weights of every group as signed byte quads for gemm_quads_u8s8:
// [group][rows / kQuadRowBlock][quads][kQuadRowBlock][4], each group's rows its mg output
// channels, then the row of ones when column_sums, then zeros.
struct QuadWeights {
  int64_t quads = 0, rows = 0;
  bool column_sums = false;
  std::vector<int8_t> w;
  std::vector<int32_t> init;  // [group][rows]: -zx' sum w' + kc zx' zw', modulo 2^32
  std::vector<int32_t> zw;    // [out channels]: zw'
};

template <typename W>
QuadWeights pack_weights(const ConvGeometry& g, const W* pw, const std::vector<int32_t>& w_zero_point, int32_t zx) {
  constexpr int32_t ow = std::is_signed_v<W> ? 0 : -128;
  const int64_t m = g.out_channels, mg = g.out_channels_per_group();
  const int64_t kc = g.in_channels_per_group() * g.kernel_size();
  QuadWeights q;
  q.quads = (kc + 3) / 4;
  q.zw.resize(static_cast<std::size_t>(m));
  for (int64_t oc = 0; oc < m; ++oc) {
    q.zw[static_cast<std::size_t>(oc)] = w_zero_point[w_zero_point.size() == 1 ? 0 : static_cast<std::size_t>(oc)] + ow;
    q.column_sums = q.column_sums || q.zw[static_cast<std::size_t>(oc)] != 0;
  }
  q.rows = round_up(mg + (q.column_sums ? 1 : 0), fast::kQuadRowBlock);
  q.w.assign(static_cast<std::size_t>(g.group * q.rows * q.quads * 4), 0);
  q.init.assign(static_cast<std::size_t>(g.group * q.rows), 0);
  const auto put = [&](int64_t row, int64_t t, int8_t v) {  // row counts across groups
    int8_t* block = q.w.data() + row / fast::kQuadRowBlock * fast::kQuadRowBlock * q.quads * 4;
    block[(t / 4 * fast::kQuadRowBlock + row % fast::kQuadRowBlock) * 4 + t % 4] = v;
  };
  for (int64_t oc = 0; oc < m; ++oc) {
    const int64_t row = oc / mg * q.rows + oc % mg;
    int64_t sum = 0;
    for (int64_t t = 0; t < kc; ++t) {
      const auto v = static_cast<int8_t>(static_cast<int32_t>(pw[oc * kc + t]) + ow);
      put(row, t, v);
      sum += v;
    }
    q.init[static_cast<std::size_t>(row)] = wrap(-int64_t{zx} * sum + kc * int64_t{zx} * q.zw[static_cast<std::size_t>(oc)]);
  }
  if (q.column_sums)
    for (int64_t grp = 0; grp < g.group; ++grp)
      for (int64_t t = 0; t < kc; ++t) put(grp * q.rows + mg, t, 1);
  return q;
}

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

template <typename X>
void convolve(const KernelContext& context, const ConvGeometry& g, const X* px, int32_t x_zero_point,
              const QuadWeights& q, int32_t* py) {
  const fast::Isa isa = fast::best_isa();
  constexpr uint8_t flip = std::is_signed_v<X> ? 0x80 : 0;  // x + 128 for int8, as a byte
  const auto pad = static_cast<uint8_t>(x_zero_point + (std::is_signed_v<X> ? 128 : 0));
  const int64_t m = g.out_channels, mg = g.out_channels_per_group(), cg = g.in_channels_per_group();
  const int64_t kh = g.kernel[0], kw = g.kernel[1], kc = cg * kh * kw;
  const int64_t in_h = g.in_spatial[0], in_w = g.in_spatial[1], out_w = g.out_spatial[1];
  const int64_t in_size = g.in_size(), pixels = g.out_size(), sy = g.strides[0], sx = g.strides[1];
  const PlaneShape ps = plane_shape(g);
  // Where reduction index t = (ci, ky, kx) reads, from a pixel's window origin in the plane;
  // the zero-weight indices past kc read tap 0.
  std::vector<int64_t> taps(static_cast<std::size_t>(q.quads * 4), 0);
  for (int64_t t = 0; t < kc; ++t)
    taps[static_cast<std::size_t>(t)] = (t / (kh * kw) * ps.height + t % (kh * kw) / kw * g.dilations[0]) * ps.width +
                                        t % kw * g.dilations[1];
  // About 64 KiB of quads per tile, a multiple of the GEMM's pixel block.
  const int64_t tile = std::min(std::clamp<int64_t>(16384 / q.quads / fast::kQuadPixelBlock * fast::kQuadPixelBlock,
                                                    fast::kQuadPixelBlock, 1024),
                                round_up(pixels, fast::kQuadPixelBlock));
  const int64_t tiles = (pixels + tile - 1) / tile;
  // The caller's thread keeps its plane between calls: a new one per call would fault in
  // every page again (tens of MB at 1024x1024).
  thread_local std::vector<uint8_t> plane_buffer;
  uint8_t* plane = sized(plane_buffer, cg * ps.height * ps.width);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const X* image = px + (n * g.in_channels + grp * cg) * in_size;
      context.parallel_for(cg * ps.height, ps.width, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          uint8_t* row = plane + r * ps.width;
          const int64_t ci = r / ps.height, iy = r % ps.height - g.pads_begin[0];
          if (iy < 0 || iy >= in_h) {
            std::fill(row, row + ps.width, pad);
            continue;
          }
          const auto* src = reinterpret_cast<const uint8_t*>(image + ci * in_size + iy * in_w);
          std::fill(row, row + g.pads_begin[1], pad);
          for (int64_t ix = 0; ix < in_w; ++ix) row[g.pads_begin[1] + ix] = src[ix] ^ flip;
          std::fill(row + g.pads_begin[1] + in_w, row + ps.width, pad);
        }
      });
      const int8_t* wg = q.w.data() + grp * q.rows * q.quads * 4;
      const int32_t* init = q.init.data() + grp * q.rows;
      context.parallel_for(tiles, 2 * q.rows * kc * tile, [&](int64_t t0, int64_t t1) {
        thread_local std::vector<uint8_t> columns_buffer;
        thread_local std::vector<int32_t> acc_buffer;
        const int64_t cols_max = round_up(tile, fast::kQuadPixelBlock);
        uint8_t* columns = sized(columns_buffer, q.quads * cols_max * 4);
        int32_t* acc = sized(acc_buffer, q.rows * cols_max);
        for (int64_t task = t0; task < t1; ++task) {
          const int64_t p0 = task * tile, count = std::min(tile, pixels - p0);
          const int64_t cols = round_up(count, fast::kQuadPixelBlock);
          for (int64_t t = 0; t < count;) {  // one output row's run of pixels at a time
            const int64_t pix = p0 + t, oy = pix / out_w, ox = pix % out_w;
            const int64_t run = std::min(out_w - ox, count - t), base = oy * sy * ps.width + ox * sx;
            for (int64_t qd = 0; qd < q.quads; ++qd) {
              const int64_t* tap = taps.data() + 4 * qd;
              const uint8_t* const src[4] = {plane + tap[0] + base, plane + tap[1] + base, plane + tap[2] + base,
                                             plane + tap[3] + base};
              fast::gather_quads(isa, src, run, sx, columns + (qd * cols + t) * 4);
            }
            t += run;
          }
          for (int64_t qd = 0; qd < q.quads; ++qd)  // columns past the tile's pixels
            std::fill(columns + (qd * cols + count) * 4, columns + (qd * cols + cols) * 4, pad);
          fast::gemm_quads_u8s8(isa, wg, q.rows, columns, cols, q.quads, init, acc, cols);
          const int32_t* sums = acc + mg * cols;  // each window's sum of x', with column_sums
          for (int64_t r = 0; r < mg; ++r) {
            const int64_t oc = grp * mg + r;
            const int32_t* from = acc + r * cols;
            int32_t* to = py + (n * m + oc) * pixels + p0;
            if (!q.column_sums) {
              std::copy(from, from + count, to);
              continue;
            }
            const auto zw = static_cast<uint32_t>(q.zw[static_cast<std::size_t>(oc)]);
            for (int64_t c = 0; c < count; ++c)
              to[c] = static_cast<int32_t>(static_cast<uint32_t>(from[c]) - zw * static_cast<uint32_t>(sums[c]));
          }
        }
      });
    }
}

}  // namespace

bool conv_quads_apply(const ConvGeometry& g, DType x, DType w) {
  const auto eight_bit = [](DType t) { return t == DType::UInt8 || t == DType::Int8; };
  if (g.rank() != 2 || !eight_bit(x) || !eight_bit(w) || !fast::quads_supported(fast::best_isa())) return false;
  // Hostile pads, strides or dilations would make the plane huge: those take the int16 path,
  // whose memory does not grow with them.
  constexpr int64_t kLimit = int64_t{1} << 16;
  for (const int64_t v : {g.pads_begin[0], g.pads_begin[1], g.pads_end[0], g.pads_end[1], g.strides[0], g.strides[1],
                          g.dilations[0] * g.kernel[0], g.dilations[1] * g.kernel[1], g.in_spatial[0], g.in_spatial[1]})
    if (v > kLimit) return false;
  const PlaneShape ps = plane_shape(g);
  return g.in_channels_per_group() * ps.height <= (int64_t{1} << 30) / ps.width;
}

void conv2d_quads_s32(const KernelContext& context, const ConvGeometry& g, const Tensor& x, int32_t x_zero_point,
                      const Tensor& w, const std::vector<int32_t>& w_zero_point, int32_t* y) {
  const int32_t zx = x_zero_point + (x.dtype() == DType::Int8 ? 128 : 0);
  const QuadWeights q = w.dtype() == DType::Int8 ? pack_weights(g, w.data<int8_t>(), w_zero_point, zx)
                                                 : pack_weights(g, w.data<uint8_t>(), w_zero_point, zx);
  if (x.dtype() == DType::Int8) convolve(context, g, x.data<int8_t>(), x_zero_point, q, y);
  else convolve(context, g, x.data<uint8_t>(), x_zero_point, q, y);
}

}  // namespace qflow
