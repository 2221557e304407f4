// Conv2D and MatMul on the fast kernels: weight packing at load time, per-run im2col (conv2d: into
// pixel-major rows of int16 pairs, or on VNNI CPUs of byte quads gathered from a padded byte plane;
// matmul: into int16 columns), block products and the requantize epilogue (docs/fixed-point.md,
// "Fast kernels").
#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "fixed_point/fast_depthwise.h"
#include "fixed_point/fast_kernels.h"

namespace qflow::fx::fast {
namespace {

int64_t round_up(int64_t v, int64_t step) { return (v + step - 1) / step * step; }

// A run of output pixels [t, t + run) of a tile whose taps start at `base` in the padded plane
// (plus the tap's offset), `stride` bytes apart.
struct PixelRun {
  int64_t t, base, run;
};

// Per-thread buffers reused across runs: im2col columns and tiles, accumulators, the planes.
struct Scratch {
  std::vector<int16_t> columns, rows;  // matmul columns; conv2d's interleaved tile and two rows
  std::vector<uint8_t> quad_columns, quad_plane;  // conv2d's quad tile and byte plane (quads, windows)
  std::vector<PixelRun> pixel_runs;
  std::vector<int32_t> acc;
  std::vector<int32_t> plane;
  std::vector<int16_t> pair_plane;  // conv2d's padded plane of centered int16 values (pairs)
  std::vector<int64_t> sums;   // chunked reductions: the int64 sums across chunks
  std::vector<int32_t> zeros;  // their chunks' initial values: only grown (new elements are 0), never written
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

// sums[r * ld + c] += acc[r * ld + c] * 2^shift for r < rows, c < cols.
void add_chunk(const int32_t* acc, int64_t rows, int64_t cols, int64_t ld, int shift, int64_t* sums) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) sums[r * ld + c] += int64_t{acc[r * ld + c]} * (int64_t{1} << shift);
}

// Columns per block: enough to amortize the weight rows, few enough to stay in cache.
int64_t column_block(int64_t depth) { return std::clamp<int64_t>(round_up(32768 / depth, kColBlock), 8, 512); }

Status check_multipliers(const std::vector<Multiplier>& ms) {
  for (const Multiplier m : ms)
    if (m.mantissa < 0 || m.shift < kMinShift || m.shift > kMaxShift)
      return invalid_input("a multiplier is outside the mantissa and shift ranges");
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

// Pixels per tile of the conv2d: a tile of about 64 KiB, each pixel holding `units` 4-byte units
// (int16 pairs or byte quads), a multiple of `block` pixels.
int64_t pixel_tile(int64_t units, int64_t pixels, int64_t block) {
  const int64_t by_cache = std::clamp<int64_t>(16384 / std::max<int64_t>(units, 1) / block * block, block, 1024);
  return std::min(by_cache, round_up(pixels, block));
}

// dst[i] = T(src[i] + add) for i < n, the values in T's range: the contiguous copies of im2col,
// vectorized for the CPU (the baseline build has SSE2 only).
#define QFLOW_CONVERT_RUN(NAME, TARGET, T)                                                      \
  __attribute__((target(TARGET))) void NAME(const int32_t* src, int64_t n, int32_t add, T* dst) { \
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i] + add);                      \
  }
#if defined(__x86_64__) && defined(__GNUC__)
QFLOW_CONVERT_RUN(convert_run_avx512_u8, "avx512f,avx512bw,avx512vl", uint8_t)
QFLOW_CONVERT_RUN(convert_run_avx2_u8, "avx2", uint8_t)
QFLOW_CONVERT_RUN(convert_run_avx512_s16, "avx512f,avx512bw,avx512vl", int16_t)
QFLOW_CONVERT_RUN(convert_run_avx2_s16, "avx2", int16_t)
#endif
#undef QFLOW_CONVERT_RUN

template <typename T>
void convert_run(Isa isa, const int32_t* src, int64_t n, int32_t add, T* dst) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (n >= 16) {
    if constexpr (std::is_same_v<T, uint8_t>) {
      if (isa == Isa::Avx512Vnni) return convert_run_avx512_u8(src, n, add, dst);
      if (isa != Isa::Portable) return convert_run_avx2_u8(src, n, add, dst);
    } else {
      if (isa == Isa::Avx512Vnni) return convert_run_avx512_s16(src, n, add, dst);
      if (isa != Isa::Portable) return convert_run_avx2_s16(src, n, add, dst);
    }
  }
#else
  (void)isa;
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i] + add);
}

// pairs[i] = (a[i] + add) | (b[i] + add) << 16 as int16 halves, for i < n (b null: zeros), the
// values in int16's range: two im2col rows of a 1x1 conv converted and interleaved in one pass.
#define QFLOW_PAIR_ROWS(NAME, ATTRIBUTES)                                                                  \
  ATTRIBUTES void NAME(const int32_t* a, const int32_t* b, int64_t n, int32_t add, uint32_t* pairs) {      \
    if (!b) {                                                                                              \
      for (int64_t i = 0; i < n; ++i) pairs[i] = static_cast<uint32_t>(a[i] + add) & 0xFFFF;              \
      return;                                                                                              \
    }                                                                                                      \
    for (int64_t i = 0; i < n; ++i)                                                                        \
      pairs[i] = (static_cast<uint32_t>(a[i] + add) & 0xFFFF) | static_cast<uint32_t>(b[i] + add) << 16;  \
  }
QFLOW_PAIR_ROWS(pair_rows_portable, )
#if defined(__x86_64__) && defined(__GNUC__)
QFLOW_PAIR_ROWS(pair_rows_avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
QFLOW_PAIR_ROWS(pair_rows_avx2, __attribute__((target("avx2"))))
#endif
#undef QFLOW_PAIR_ROWS

// pairs[i] = a[i * stride] | b[i * stride] << 16 as int16 halves, for i < n (b null: zeros):
// two im2col rows read from the padded int16 plane, interleaved.
#define QFLOW_PAIR_PLANE_ROWS(NAME, ATTRIBUTES)                                                       \
  ATTRIBUTES void NAME(const int16_t* a, const int16_t* b, int64_t n, int64_t stride, uint32_t* pairs) { \
    if (!b) {                                                                                         \
      for (int64_t i = 0; i < n; ++i) pairs[i] = static_cast<uint16_t>(a[i * stride]);                \
      return;                                                                                         \
    }                                                                                                 \
    if (stride == 1) {                                                                                \
      for (int64_t i = 0; i < n; ++i)                                                                 \
        pairs[i] = static_cast<uint16_t>(a[i]) | static_cast<uint32_t>(static_cast<uint16_t>(b[i])) << 16; \
      return;                                                                                         \
    }                                                                                                 \
    for (int64_t i = 0; i < n; ++i)                                                                   \
      pairs[i] = static_cast<uint16_t>(a[i * stride]) |                                               \
                 static_cast<uint32_t>(static_cast<uint16_t>(b[i * stride])) << 16;                   \
  }
QFLOW_PAIR_PLANE_ROWS(pair_plane_rows_portable, )
#if defined(__x86_64__) && defined(__GNUC__)
QFLOW_PAIR_PLANE_ROWS(pair_plane_rows_avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
QFLOW_PAIR_PLANE_ROWS(pair_plane_rows_avx2, __attribute__((target("avx2"))))
#endif
#undef QFLOW_PAIR_PLANE_ROWS

void pair_plane_rows(Isa isa, const int16_t* a, const int16_t* b, int64_t n, int64_t stride, uint32_t* pairs) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == Isa::Avx512Vnni) return pair_plane_rows_avx512(a, b, n, stride, pairs);
  if (isa != Isa::Portable) return pair_plane_rows_avx2(a, b, n, stride, pairs);
#else
  (void)isa;
#endif
  pair_plane_rows_portable(a, b, n, stride, pairs);
}

void pair_rows(Isa isa, const int32_t* a, const int32_t* b, int64_t n, int32_t add, uint32_t* pairs) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == Isa::Avx512Vnni) return pair_rows_avx512(a, b, n, add, pairs);
  if (isa != Isa::Portable) return pair_rows_avx2(a, b, n, add, pairs);
#else
  (void)isa;
#endif
  pair_rows_portable(a, b, n, add, pairs);
}

}  // namespace

void gather_quads(Isa isa, const uint8_t* const src[4], int64_t n, int64_t stride, uint8_t* out) {
  int64_t i = 0;
  if ((stride == 1 || stride == 2) && n >= 16) {
    i = n / 16 * 16;
    if (stride == 1) interleave4_u8(isa, src, i, out);
    else interleave4_even_u8(isa, src, i, out);
  }
  for (; i < n; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = src[j][i * stride];
}

namespace detail {
void convert_to_bytes(Isa isa, const int32_t* src, int64_t n, int32_t add, uint8_t* dst) {
  convert_run(isa, src, n, add, dst);
}
}  // namespace detail

namespace {

// Row r of the im2col matrix of image n, group g (r = (c, ky, kx) in the weights' order) over output
// pixels [p0, p0 + count): x - zp at each tap, 0 for padding taps and up to `tile`. Output rows
// are copied segment by segment, so the loop over pixels is contiguous (stride 1) or strided.
void im2col_row(const PackedConv2D& k, Isa isa, const int32_t* image, int64_t g, int64_t r, int64_t p0, int64_t count,
                int64_t tile, int16_t* dst) {
  const Conv2DParams& p = k.params;
  const int32_t add = -p.input.zero_point;
  const int64_t kh = p.kernel_h, kw = p.kernel_w, cg = p.in_channels / p.group;
  const int64_t plane = p.in_h * p.in_w;
  std::fill(dst + count, dst + tile, int16_t{0});
  if (r >= cg * kh * kw) {  // the zero row that completes the last pair
    std::fill(dst, dst + count, int16_t{0});
    return;
  }
  const int64_t c = r / (kh * kw), ky = r % (kh * kw) / kw, kx = r % kw;
  const int32_t* xc = image + (g * cg + c) * plane;
  const int64_t sy = p.strides[0], sx = p.strides[1];
  if (kh == 1 && kw == 1 && sy == 1 && sx == 1 && p.pads[0] == 0 && p.pads[1] == 0 && p.pads[2] == 0 && p.pads[3] == 0) {
    convert_run(isa, xc + p0, count, add, dst);
    return;
  }
  // The output columns whose tap column ix = ox * sx - pad_left + kx * dx lies inside the input.
  const int64_t off = kx * p.dilations[1] - p.pads[1];
  const int64_t ox_lo = off >= 0 ? 0 : (-off + sx - 1) / sx;
  const int64_t ox_hi = p.in_w - 1 - off < 0 ? 0 : std::min(k.out_w, (p.in_w - 1 - off) / sx + 1);
  int64_t t = 0;
  while (t < count) {
    const int64_t pix = p0 + t, oy = pix / k.out_w, ox0 = pix % k.out_w;
    const int64_t run = std::min(k.out_w - ox0, count - t);
    const int64_t iy = oy * sy - p.pads[0] + ky * p.dilations[0];
    int16_t* d = dst + t;  // d[ox - ox0] for ox in [ox0, ox0 + run)
    const int64_t end = ox0 + run;
    if (iy < 0 || iy >= p.in_h || ox_lo >= ox_hi) {
      std::fill(d, d + run, int16_t{0});
    } else {
      const int64_t lo = std::clamp(ox_lo, ox0, end), hi = std::clamp(ox_hi, lo, end);
      std::fill(d, d + (lo - ox0), int16_t{0});
      const int32_t* row = xc + iy * p.in_w;
      if (sx == 1)
        convert_run(isa, row + lo + off, hi - lo, add, d + (lo - ox0));
      else
        for (int64_t ox = lo; ox < hi; ++ox) d[ox - ox0] = static_cast<int16_t>(row[ox * sx + off] + add);
      std::fill(d + (hi - ox0), d + run, int16_t{0});
    }
    t += run;
  }
}

// Pair row q of a tile of output pixels [p0, p0 + count) from the padded int16 plane of
// pad_plane: reduction indices 2q and 2q + 1 (r = (c, ky, kx) in the weights' order; the second
// 0 past the reduction), then 0 up to `cols`. Each output row's run of pixels reads one run of
// the plane per index, shifted by the tap.
void plane_pair_row(const PackedConv2D& k, Isa isa, const int16_t* plane, int64_t q, int64_t p0, int64_t count,
                    int64_t cols, uint32_t* dst) {
  const Conv2DParams& p = k.params;
  const int64_t kh = p.kernel_h, kw = p.kernel_w, reduction = p.in_channels / p.group * kh * kw;
  const int64_t hp = k.padded_h, wp = k.padded_w, sy = p.strides[0], sx = p.strides[1];
  const auto tap = [&](int64_t r) {
    return (r / (kh * kw) * hp + r % (kh * kw) / kw * p.dilations[0]) * wp + r % kw * p.dilations[1];
  };
  const int64_t first = tap(2 * q);
  const bool second = 2 * q + 1 < reduction;
  const int64_t next = second ? tap(2 * q + 1) : 0;
  for (int64_t t = 0; t < count;) {
    const int64_t pix = p0 + t, oy = pix / k.out_w, ox = pix % k.out_w;
    const int64_t run = std::min(k.out_w - ox, count - t), base = oy * sy * wp + ox * sx;
    pair_plane_rows(isa, plane + base + first, second ? plane + base + next : nullptr, run, sx, dst + t);
    t += run;
  }
  std::fill(dst + count, dst + cols, uint32_t{0});
}

// The input channels of one image and group as T(x + add) on a plane padded with `pad` (the
// value of a padding tap): every tap of every output pixel lies inside it, so the tiles are
// gathered without bounds checks, and each value is converted once, not once per tap. The
// quads take unsigned bytes x + quad_offset (padding zero_point + quad_offset), the pairs
// int16 x - zero_point (padding 0).
template <typename T>
void pad_plane(const PackedConv2D& k, Isa isa, const int32_t* x, int32_t add, T pad, T* plane) {
  const Conv2DParams& p = k.params;
  const int64_t cg = p.in_channels / p.group, hp = k.padded_h, wp = k.padded_w;
  const int64_t left = p.pads[1], right = wp - left - p.in_w;
  if (left == 0 && right == 0 && p.pads[0] == 0 && hp == p.in_h) {  // no padding: one run
    convert_run(isa, x, cg * p.in_h * p.in_w, add, plane);
    return;
  }
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t py = 0; py < hp; ++py) {
      T* row = plane + (c * hp + py) * wp;
      const int64_t iy = py - p.pads[0];
      if (iy < 0 || iy >= p.in_h) {
        std::fill(row, row + wp, pad);
        continue;
      }
      std::fill(row, row + left, pad);
      convert_run(isa, x + (c * p.in_h + iy) * p.in_w, p.in_w, add, row + left);
      std::fill(row + left + p.in_w, row + left + p.in_w + right, pad);
    }
}

// conv2d on gemm_quads_u8s8 (k.quad_weights packed, a VNNI isa).
void conv2d_quads(const PackedConv2D& k, Isa isa, const int32_t* x, int32_t* y, Scratch& s) {
  const Conv2DParams& p = k.params;
  const int64_t plane_in = p.in_channels * p.in_h * p.in_w, pixels = k.out_h * k.out_w;
  const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group;
  const int64_t sy = p.strides[0], sx = p.strides[1];
  const int64_t tile = pixel_tile(k.quads, pixels, kQuadPixelBlock);
  uint8_t* quads = sized(s.quad_columns, k.quads * tile * 4);
  uint8_t* plane = sized(s.quad_plane, cg * k.padded_h * k.padded_w);
  int32_t* acc = sized(s.acc, k.quad_rows * tile);
  std::vector<PixelRun>& runs = s.pixel_runs;
  const auto pad = static_cast<uint8_t>(p.input.zero_point + k.quad_offset);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      pad_plane(k, isa, x + n * plane_in + g * cg * p.in_h * p.in_w, k.quad_offset, pad, plane);
      const int8_t* wg = k.quad_weights.data() + g * k.quad_rows * k.quads * 4;
      const int32_t* ig = k.quad_init.data() + g * k.quad_rows;
      for (int64_t p0 = 0; p0 < pixels; p0 += tile) {
        const int64_t count = std::min(tile, pixels - p0), cols = round_up(count, kQuadPixelBlock);
        // The tile's output rows; rows that continue each other in the plane (1x1, stride 1,
        // no padding) merge into one run.
        runs.clear();
        for (int64_t t = 0; t < count;) {
          const int64_t pix = p0 + t, oy = pix / k.out_w, ox = pix % k.out_w;
          const int64_t run = std::min(k.out_w - ox, count - t), base = oy * sy * k.padded_w + ox * sx;
          if (!runs.empty() && sx == 1 && runs.back().base + runs.back().run == base) runs.back().run += run;
          else runs.push_back(PixelRun{t, base, run});
          t += run;
        }
        for (int64_t q = 0; q < k.quads; ++q) {
          const int64_t* tap = k.quad_taps.data() + 4 * q;
          uint8_t* dst = quads + q * cols * 4;
          for (const PixelRun& r : runs) {
            const uint8_t* const src[4] = {plane + tap[0] + r.base, plane + tap[1] + r.base, plane + tap[2] + r.base,
                                           plane + tap[3] + r.base};
            gather_quads(isa, src, r.run, sx, dst + r.t * 4);
          }
          std::fill(dst + count * 4, dst + cols * 4, pad);  // columns past the tile's pixels
        }
        gemm_quads_u8s8(isa, wg, k.quad_rows, quads, cols, k.quads, ig, acc, tile);
        for (int64_t r = 0; r < mg; ++r) {
          const int64_t m = g * mg + r;
          requantize_row(isa, acc + r * tile, count, k.multipliers[static_cast<size_t>(m)], p.output.zero_point, k.lo,
                         k.hi, y + (n * p.out_channels + m) * pixels + p0, 1);
        }
      }
    }
}

// The padded plane's extent along one axis: it reaches the last tap of the last output pixel
// even where conv_out_h / conv_out_w rounded a negative span up to one output (those taps
// read padding, as in the reference).
int64_t padded_extent(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t out, int64_t stride, int64_t kernel,
                      int64_t dilation) {
  return std::max(in + pad_begin + pad_end, (std::max<int64_t>(out, 1) - 1) * stride + (kernel - 1) * dilation + 1);
}

// The quad path copies the input onto a padded plane: only for geometry whose plane stays
// small (a hostile program's huge pads or strides take the pairs, which allocate nothing
// by them). The 2^16 bounds keep the products below in int64.
bool padded_plane_fits(const Conv2DParams& p) {
  constexpr int64_t kLimit = int64_t{1} << 16;
  for (const int64_t v : {p.pads[0], p.pads[1], p.pads[2], p.pads[3], p.strides[0], p.strides[1],
                          p.dilations[0] * p.kernel_h, p.dilations[1] * p.kernel_w, p.in_h, p.in_w})
    if (v > kLimit) return false;
  const int64_t hp = padded_extent(p.in_h, p.pads[0], p.pads[2], conv_out_h(p), p.strides[0], p.kernel_h, p.dilations[0]);
  const int64_t wp = padded_extent(p.in_w, p.pads[1], p.pads[3], conv_out_w(p), p.strides[1], p.kernel_w, p.dilations[1]);
  return p.in_channels / p.group * hp <= (int64_t{1} << 30) / wp;
}

// The quad layout of PackedConv2D for 8-bit activations (see fast_kernels.h).
void pack_quads(const Conv2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias, PackedConv2D& out) {
  const int64_t mg = p.out_channels / p.group, k = p.in_channels / p.group * p.kernel_h * p.kernel_w;
  out.quads = (k + 3) / 4;
  out.quad_rows = round_up(mg, kQuadRowBlock);
  out.quad_offset = p.input.type == QType::Int8 ? 128 : 0;
  out.quad_weights.assign(static_cast<size_t>(p.group * out.quad_rows * out.quads * 4), 0);
  out.quad_init.assign(static_cast<size_t>(p.group * out.quad_rows), 0);
  // Tap offsets in the padded plane; the zero-weight indices past k reuse tap 0.
  out.quad_taps.assign(static_cast<size_t>(out.quads * 4), 0);
  const int64_t kh = p.kernel_h, kw = p.kernel_w;
  for (int64_t r = 0; r < k; ++r)
    out.quad_taps[static_cast<size_t>(r)] = (r / (kh * kw) * out.padded_h + r % (kh * kw) / kw * p.dilations[0]) * out.padded_w +
                                            r % kw * p.dilations[1];
  const int64_t shift = int64_t{p.input.zero_point} + out.quad_offset;
  for (int64_t m = 0; m < p.out_channels; ++m) {
    const int64_t row = m / mg * out.quad_rows + m % mg;
    int8_t* block = out.quad_weights.data() + row / kQuadRowBlock * kQuadRowBlock * out.quads * 4;
    int64_t sum = 0;
    for (int64_t t = 0; t < k; ++t) {
      const int32_t v = w[static_cast<size_t>(m * k + t)];
      block[(t / 4 * kQuadRowBlock + row % kQuadRowBlock) * 4 + t % 4] = static_cast<int8_t>(v);
      sum += v;
    }
    const int64_t init = (bias.empty() ? 0 : int64_t{bias[static_cast<size_t>(m)]}) - shift * sum;
    out.quad_init[static_cast<size_t>(row)] = static_cast<int32_t>(static_cast<uint32_t>(init));  // modulo 2^32
  }
}

}  // namespace

Status pack_conv2d(const Conv2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                   PackedConv2D& out) {
  int64_t max_abs_bias = 0;
  for (const int32_t v : bias) max_abs_bias = std::max<int64_t>(max_abs_bias, std::llabs(int64_t{v}));
  const int64_t reduction = p.group > 0 ? p.in_channels / p.group * p.kernel_h * p.kernel_w : 0;
  const bool depthwise = p.group > 0 && p.in_channels == p.group;
  // One int32 pass where the sums cannot wrap; else chunks.
  int64_t chunk = 0;
  if (!supports_conv2d(p.input.type, p.input.zero_point, p.weight_type, reduction, max_abs_bias)) {
    chunk = chunk_reduction(p.input.type, p.input.zero_point, p.weight_type) / (depthwise ? 1 : 2);
    if (depthwise && chunk < reduction) chunk = 0;  // the taps of a depthwise conv are one chunk
    if (chunk < 1) return invalid_input("conv2d: no fast kernel for this type pair");
  }
  // Sizes of x and y as the parameters imply them: only their values are checked per run.
  const int64_t oh = conv_out_h(p), ow = conv_out_w(p);
  const auto x_size = static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w);
  const auto y_size = static_cast<size_t>(p.batch * p.out_channels * std::max<int64_t>(oh, 0) * std::max<int64_t>(ow, 0));
  if (Status s = check_conv2d(p, x_size, nullptr, w, bias, y_size); !s.is_ok()) return s;
  if (Status s = check_multipliers(p.multipliers); !s.is_ok()) return s;
  out = PackedConv2D{};
  out.params = p;
  out.out_h = oh;
  out.out_w = ow;
  const int64_t mg = p.out_channels / p.group, k = p.in_channels / p.group * p.kernel_h * p.kernel_w;
  out.pairs = (k + 1) / 2;
  out.group_rows = round_up(mg, kRowBlock);
  out.chunk_pairs = chunk;
  const bool split = chunk > 0 && is_16bit(p.weight_type);
  if (depthwise) {
    out.taps.assign(w.begin(), w.end());
    if (split) {
      out.taps_low.resize(out.taps.size());
      for (size_t i = 0; i < out.taps.size(); ++i) {
        out.taps_low[i] = weight_low(out.taps[i]);
        out.taps[i] = weight_high(out.taps[i]);
      }
    }
    if (chunk == 0) detail::pack_depthwise_windows(p, w, bias, out.windows);
  } else {
    out.weights.assign(static_cast<size_t>(p.group * out.group_rows * out.pairs * 2), 0);
    if (split) out.weights_low.assign(out.weights.size(), 0);
  }
  out.bias.assign(static_cast<size_t>(p.group * out.group_rows), 0);
  const int64_t chunk_pairs = chunk > 0 ? chunk : out.pairs;
  for (int64_t m = 0; m < p.out_channels; ++m) {
    const int64_t g = m / mg, row = m % mg;
    if (!depthwise)
      for (int64_t t = 0; t < k; ++t) {
        // Pair t / 2 lies in the chunk starting at pair c0, which holds `pairs` of them for
        // group_rows rows: [group_rows / kRowBlock][pairs][kRowBlock][2].
        const int64_t q = t / 2, c0 = q / chunk_pairs * chunk_pairs, pairs = std::min(chunk_pairs, out.pairs - c0);
        const auto at = static_cast<size_t>((g * out.group_rows * out.pairs + out.group_rows * c0) * 2 +
                                            row / kRowBlock * kRowBlock * pairs * 2 +
                                            ((q - c0) * kRowBlock + row % kRowBlock) * 2 + t % 2);
        const int32_t v = w[static_cast<size_t>(m * k + t)];
        out.weights[at] = static_cast<int16_t>(split ? weight_high(v) : v);
        if (split) out.weights_low[at] = static_cast<int16_t>(weight_low(v));
      }
    if (!bias.empty()) out.bias[static_cast<size_t>(g * out.group_rows + row)] = bias[static_cast<size_t>(m)];
  }
  if (!depthwise && padded_plane_fits(p)) {
    out.padded_h = padded_extent(p.in_h, p.pads[0], p.pads[2], oh, p.strides[0], p.kernel_h, p.dilations[0]);
    out.padded_w = padded_extent(p.in_w, p.pads[1], p.pads[3], ow, p.strides[1], p.kernel_w, p.dilations[1]);
    if (chunk == 0 && !is_16bit(p.input.type)) pack_quads(p, w, bias, out);
  }
  out.multipliers = expand(p.multipliers, p.out_channels);
  const Range b = bounds(p.output.type, p.clamp);
  out.lo = b.min;
  out.hi = b.max;
  return Status{};
}

namespace {

// The pairs product of one tile of a chunked conv2d (k.chunk_pairs): chunk by chunk one block
// product per weight half, added into int64 sums that start at the bias; then the exact
// requantize of each sum, output channel m of group g at y + m * pixels (y: the tile's first
// pixel of the image's output).
void chunked_tile(const PackedConv2D& k, Isa isa, int64_t g, const int16_t* pairs, int64_t cols, int64_t count,
                  int64_t tile, Scratch& s, int32_t* y, int64_t pixels) {
  const Conv2DParams& p = k.params;
  const int64_t mg = p.out_channels / p.group;
  const int32_t* zeros = sized(s.zeros, k.group_rows);
  const bool split = !k.weights_low.empty();
  if (split && k.pairs <= k.chunk_pairs) {
    // One chunk: each half's int32 products, then the two combined row by row in the epilogue
    // (no 64-bit sums for the whole tile, which leave L1).
    int32_t* high = sized(s.acc, 2 * k.group_rows * tile);
    int32_t* low = high + k.group_rows * tile;
    const size_t at = static_cast<size_t>(g * k.group_rows * k.pairs * 2);
    gemm_pairs_s16(isa, k.weights.data() + at, k.group_rows, pairs, cols, k.pairs, zeros, high, tile);
    gemm_pairs_s16(isa, k.weights_low.data() + at, k.group_rows, pairs, cols, k.pairs, zeros, low, tile);
    for (int64_t r = 0; r < mg; ++r) {
      const int64_t m = g * mg + r;
      const int32_t bias = k.bias[static_cast<size_t>(g * k.group_rows + r)];
      requantize_halves_row(isa, high + r * tile, low + r * tile, bias, count, k.multipliers[static_cast<size_t>(m)],
                            p.output.zero_point, k.lo, k.hi, y + m * pixels, 1);
    }
    return;
  }
  int32_t* acc = sized(s.acc, k.group_rows * tile);
  int64_t* sums = sized(s.sums, k.group_rows * tile);
  for (int64_t r = 0; r < k.group_rows; ++r)
    std::fill(sums + r * tile, sums + r * tile + cols, int64_t{k.bias[static_cast<size_t>(g * k.group_rows + r)]});
  const int64_t group_at = g * k.group_rows * k.pairs * 2;
  for (int64_t c0 = 0; c0 < k.pairs; c0 += k.chunk_pairs) {
    const int64_t chunk = std::min(k.chunk_pairs, k.pairs - c0);
    const size_t at = static_cast<size_t>(group_at + k.group_rows * c0 * 2);
    gemm_pairs_s16(isa, k.weights.data() + at, k.group_rows, pairs + c0 * cols * 2, cols, chunk, zeros, acc, tile);
    add_chunk(acc, k.group_rows, cols, tile, split ? 8 : 0, sums);
    if (!split) continue;
    gemm_pairs_s16(isa, k.weights_low.data() + at, k.group_rows, pairs + c0 * cols * 2, cols, chunk, zeros, acc, tile);
    add_chunk(acc, k.group_rows, cols, tile, 0, sums);
  }
  for (int64_t r = 0; r < mg; ++r) {
    const int64_t m = g * mg + r;
    requantize_wide_row(isa, sums + r * tile, count, k.multipliers[static_cast<size_t>(m)], p.output.zero_point, k.lo,
                        k.hi, y + m * pixels, 1);
  }
}

}  // namespace

Status conv2d(const PackedConv2D& k, Isa isa, std::span<const int32_t> x, std::span<int32_t> y, bool inputs_in_range) {
  const Conv2DParams& p = k.params;
  const int64_t plane_in = p.in_channels * p.in_h * p.in_w, pixels = k.out_h * k.out_w;
  if (x.size() != static_cast<size_t>(p.batch * plane_in) || y.size() != static_cast<size_t>(p.batch * p.out_channels * pixels))
    return invalid_input("conv2d: tensor sizes do not match the parameters");
  if (!inputs_in_range)
    if (Status s = check_range(x, p.input.type, "conv2d input"); !s.is_ok()) return s;
  Scratch& s = scratch();
  if (!k.taps.empty()) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!k.windows.weights.empty() && detail::depthwise_windows_supported(isa)) {
      detail::depthwise_windows_conv2d(k, x.data(), y.data(), s.quad_plane);
      return Status{};
    }
#endif
    detail::depthwise_conv2d(k, isa, x.data(), y.data(), s.plane, s.acc, s.sums);
    return Status{};
  }
  if (!k.quad_weights.empty() && quads_supported(isa)) {
    conv2d_quads(k, isa, x.data(), y.data(), s);
    return Status{};
  }
  const int64_t mg = p.out_channels / p.group, cg = p.in_channels / p.group;
  const bool pointwise = p.kernel_h == 1 && p.kernel_w == 1 && p.strides[0] == 1 && p.strides[1] == 1 &&
                         p.pads[0] == 0 && p.pads[1] == 0 && p.pads[2] == 0 && p.pads[3] == 0;
  // Chunked, a block product reads one chunk of the tile at a time: the tile is sized by it, so
  // that long reductions keep tiles wide enough for the 32-pixel blocks.
  const int64_t chunk = k.chunk_pairs > 0 ? std::min(k.pairs, k.chunk_pairs) : k.pairs;
  const int64_t tile = pixel_tile(chunk, pixels, kPixelBlock);
  int16_t* pairs = sized(s.columns, k.pairs * tile * 2);
  int16_t* even = sized(s.rows, 2 * tile);
  int16_t* odd = even + tile;
  int32_t* acc = sized(s.acc, k.group_rows * tile);
  // The pairs read their im2col rows from a padded int16 plane unless the pads would make it
  // much larger than the input (a hostile program's): then row by row from the input.
  const bool on_plane = !pointwise && k.padded_h > 0 &&
                        k.padded_h * k.padded_w <= 4 * p.in_h * p.in_w + (int64_t{1} << 16);
  int16_t* plane = on_plane ? sized(s.pair_plane, cg * k.padded_h * k.padded_w) : nullptr;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      const int32_t* image = x.data() + n * plane_in;
      const int16_t* wg = k.weights.data() + g * k.group_rows * k.pairs * 2;
      const int32_t* bg = k.bias.data() + g * k.group_rows;
      if (on_plane) pad_plane(k, isa, image + g * cg * p.in_h * p.in_w, -p.input.zero_point, int16_t{0}, plane);
      for (int64_t p0 = 0; p0 < pixels; p0 += tile) {
        const int64_t count = std::min(tile, pixels - p0), cols = round_up(count, kPixelBlock);
        for (int64_t q = 0; q < k.pairs; ++q) {
          auto* dst = reinterpret_cast<uint32_t*>(pairs + q * cols * 2);
          if (pointwise) {  // the rows are the input channels' runs of pixels
            const int32_t* c0 = image + (g * cg + 2 * q) * pixels + p0;
            pair_rows(isa, c0, 2 * q + 1 < cg ? c0 + pixels : nullptr, count, -p.input.zero_point, dst);
            std::fill(dst + count, dst + cols, uint32_t{0});
            continue;
          }
          if (on_plane) {
            plane_pair_row(k, isa, plane, q, p0, count, cols, dst);
            continue;
          }
          im2col_row(k, isa, image, g, 2 * q, p0, count, cols, even);
          im2col_row(k, isa, image, g, 2 * q + 1, p0, count, cols, odd);
          interleave_s16(isa, even, odd, cols, pairs + q * cols * 2);
        }
        if (k.chunk_pairs > 0) {  // int16 weights or a reduction whose int32 sums could wrap
          chunked_tile(k, isa, g, pairs, cols, count, tile, s, y.data() + n * p.out_channels * pixels + p0, pixels);
          continue;
        }
        gemm_pairs_s16(isa, wg, k.group_rows, pairs, cols, k.pairs, bg, acc, tile);
        for (int64_t r = 0; r < mg; ++r) {
          const int64_t m = g * mg + r;
          requantize_row(isa, acc + r * tile, count, k.multipliers[static_cast<size_t>(m)], p.output.zero_point, k.lo,
                         k.hi, y.data() + (n * p.out_channels + m) * pixels + p0, 1);
        }
      }
    }
  return Status{};
}

Status pack_matmul(const MatMulParams& p, std::span<const int32_t> b, std::span<const int32_t> bias,
                   PackedMatMul& out, bool quads) {
  if (!supports_matmul(p.a.type, p.a.zero_point, p.b_type, p.b_zero_point))
    return invalid_input("matmul: no fast kernel for this type pair");
  if (Status s = check_matmul(p, static_cast<size_t>(p.m * p.k), nullptr, b, bias, static_cast<size_t>(p.m * p.n));
      !s.is_ok())
    return s;
  if (Status s = check_multipliers(p.multipliers); !s.is_ok()) return s;
  out = PackedMatMul{};
  out.params = p;
  out.depth = round_up(p.k, kDepthStep);
  out.rows = round_up(p.n, kRowBlock);
  if (!supports(p.a.type, p.b_type))
    out.chunk_depth = chunk_reduction(p.a.type, p.a.zero_point, p.b_type, p.b_zero_point) / kDepthStep * kDepthStep;
  const bool split = out.chunk_depth > 0 && is_16bit(p.b_type);
  const int64_t chunk_depth = out.chunk_depth > 0 ? out.chunk_depth : out.depth;
  out.b.assign(static_cast<size_t>(out.rows * out.depth), 0);
  if (split) out.b_low.assign(out.b.size(), 0);
  out.bias.assign(static_cast<size_t>(out.rows), 0);
  for (int64_t j = 0; j < p.n; ++j) {
    for (int64_t t = 0; t < p.k; ++t) {
      const int32_t v = (p.b_transposed ? b[static_cast<size_t>(j * p.k + t)] : b[static_cast<size_t>(t * p.n + j)]) -
                        p.b_zero_point;
      // Index t lies in the chunk starting at c0: [rows][depth of the chunk], or chunked
      // [rows / kRowBlock][pairs of the chunk][kRowBlock][2] (gemm_pairs_s16's weights).
      const int64_t c0 = t / chunk_depth * chunk_depth, depth = std::min(chunk_depth, out.depth - c0);
      const int64_t in_chunk = out.chunk_depth > 0 ? j / kRowBlock * kRowBlock * depth +
                                                         ((t - c0) / 2 * kRowBlock + j % kRowBlock) * 2 + t % 2
                                                   : j * depth + t - c0;
      const auto at = static_cast<size_t>(out.rows * c0 + in_chunk);
      out.b[at] = static_cast<int16_t>(split ? weight_high(v) : v);
      if (split) out.b_low[at] = static_cast<int16_t>(weight_low(v));
    }
    if (!bias.empty()) out.bias[static_cast<size_t>(j)] = bias[static_cast<size_t>(j)];
  }
  if (quads && p.b_zero_point == 0 && out.chunk_depth == 0) {
    out.quads = (p.k + 3) / 4;
    out.quad_rows = round_up(p.n, kQuadRowBlock);
    out.quad_offset = p.a.type == QType::Int8 ? 128 : 0;
    out.quad_weights.assign(static_cast<size_t>(out.quad_rows * out.quads * 4), 0);
    out.quad_init.assign(static_cast<size_t>(out.quad_rows), 0);
    const int64_t shift = int64_t{p.a.zero_point} + out.quad_offset;
    for (int64_t j = 0; j < p.n; ++j) {
      int8_t* block = out.quad_weights.data() + j / kQuadRowBlock * kQuadRowBlock * out.quads * 4;
      int64_t sum = 0;
      for (int64_t t = 0; t < p.k; ++t) {
        const int32_t v = p.b_transposed ? b[static_cast<size_t>(j * p.k + t)] : b[static_cast<size_t>(t * p.n + j)];
        block[(t / 4 * kQuadRowBlock + j % kQuadRowBlock) * 4 + t % 4] = static_cast<int8_t>(v);
        sum += v;
      }
      const int64_t init = (bias.empty() ? 0 : int64_t{bias[static_cast<size_t>(j)]}) - shift * sum;
      out.quad_init[static_cast<size_t>(j)] = static_cast<int32_t>(static_cast<uint32_t>(init));  // modulo 2^32
    }
  }
  out.multipliers = expand(p.multipliers, p.n);
  const Range r = bounds(p.output.type, p.clamp);
  out.lo = r.min;
  out.hi = r.max;
  return Status{};
}

namespace {

// matmul on gemm_quads_u8s8 (k.quads packed, a VNNI isa): rows of A as byte quads, blocks of
// up to 256 of them against all of B's columns.
void matmul_quads(const PackedMatMul& k, Isa isa, const int32_t* a, int32_t* y) {
  const MatMulParams& p = k.params;
  const int64_t block = std::min<int64_t>(256, round_up(p.m, kQuadPixelBlock));
  Scratch& s = scratch();
  uint8_t* x = sized(s.quad_columns, k.quads * block * 4);
  int32_t* acc = sized(s.acc, k.quad_rows * block);
  for (int64_t i0 = 0; i0 < p.m; i0 += block) {
    const int64_t count = std::min(block, p.m - i0), cols = round_up(count, kQuadPixelBlock);
    // x[(q * cols + c) * 4 + t % 4] = a[i0 + c][t] + offset; past K and past count: zero bytes
    // (zero weights, or columns no output reads).
    std::fill(x, x + k.quads * cols * 4, uint8_t{0});
    for (int64_t c = 0; c < count; ++c) {
      const int32_t* row = a + (i0 + c) * p.k;
      for (int64_t t = 0; t < p.k; ++t)
        x[(t / 4 * cols + c) * 4 + t % 4] = static_cast<uint8_t>(row[t] + k.quad_offset);
    }
    gemm_quads_u8s8(isa, k.quad_weights.data(), k.quad_rows, x, cols, k.quads, k.quad_init.data(), acc, cols);
    for (int64_t j = 0; j < p.n; ++j)
      requantize_row(isa, acc + j * cols, count, k.multipliers[static_cast<size_t>(j)], p.output.zero_point, k.lo, k.hi,
                     y + i0 * p.n + j, p.n);
  }
}


// matmul with a chunked reduction (k.chunk_depth) on the pairs product of conv2d: B's columns
// are the weight rows, a block of A's rows the pixels ([pairs][rows of A][2]). Chunk by chunk
// one block product per half of B, added into int64 sums that start at the bias; then the
// reference's requantize of each sum. One chunk of split halves: the halves combine in the
// requantize instead.
void matmul_chunked(const PackedMatMul& k, Isa isa, const int32_t* a, int32_t* y) {
  const MatMulParams& p = k.params;
  const int64_t pairs = k.depth / 2, chunk_pairs = k.chunk_depth / 2;
  const int64_t tile = pixel_tile(std::min(pairs, chunk_pairs), p.m, kPixelBlock);  // by one chunk, as conv2d's
  Scratch& s = scratch();
  int16_t* x = sized(s.columns, pairs * tile * 2);
  const bool split = !k.b_low.empty(), halves = split && pairs <= chunk_pairs;
  int32_t* acc = sized(s.acc, (halves ? 2 : 1) * k.rows * tile);
  int64_t* sums = halves ? nullptr : sized(s.sums, k.rows * tile);
  const int32_t* zeros = sized(s.zeros, k.rows);
  const int32_t za = p.a.zero_point;
  for (int64_t i0 = 0; i0 < p.m; i0 += tile) {
    const int64_t count = std::min(tile, p.m - i0), cols = round_up(count, kPixelBlock);
    std::fill(x, x + pairs * cols * 2, int16_t{0});  // past K and past count
    for (int64_t c = 0; c < count; ++c) {
      const int32_t* row = a + (i0 + c) * p.k;
      for (int64_t t = 0; t < p.k; ++t) x[(t / 2 * cols + c) * 2 + t % 2] = static_cast<int16_t>(row[t] - za);
    }
    if (halves) {
      gemm_pairs_s16(isa, k.b.data(), k.rows, x, cols, pairs, zeros, acc, tile);
      gemm_pairs_s16(isa, k.b_low.data(), k.rows, x, cols, pairs, zeros, acc + k.rows * tile, tile);
      for (int64_t j = 0; j < p.n; ++j)
        requantize_halves_row(isa, acc + j * tile, acc + (k.rows + j) * tile, k.bias[static_cast<size_t>(j)], count,
                              k.multipliers[static_cast<size_t>(j)], p.output.zero_point, k.lo, k.hi, y + i0 * p.n + j,
                              p.n);
      continue;
    }
    for (int64_t j = 0; j < k.rows; ++j) std::fill(sums + j * tile, sums + j * tile + cols, int64_t{k.bias[static_cast<size_t>(j)]});
    for (int64_t c0 = 0; c0 < pairs; c0 += chunk_pairs) {
      const int64_t chunk = std::min(chunk_pairs, pairs - c0);
      const size_t at = static_cast<size_t>(k.rows * c0 * 2);
      gemm_pairs_s16(isa, k.b.data() + at, k.rows, x + c0 * cols * 2, cols, chunk, zeros, acc, tile);
      add_chunk(acc, k.rows, cols, tile, split ? 8 : 0, sums);
      if (!split) continue;
      gemm_pairs_s16(isa, k.b_low.data() + at, k.rows, x + c0 * cols * 2, cols, chunk, zeros, acc, tile);
      add_chunk(acc, k.rows, cols, tile, 0, sums);
    }
    for (int64_t j = 0; j < p.n; ++j)
      requantize_wide_row(isa, sums + j * tile, count, k.multipliers[static_cast<size_t>(j)], p.output.zero_point, k.lo,
                          k.hi, y + i0 * p.n + j, p.n);
  }
}

}  // namespace

Status matmul(const PackedMatMul& k, Isa isa, std::span<const int32_t> a, std::span<int32_t> y, bool inputs_in_range) {
  const MatMulParams& p = k.params;
  if (a.size() != static_cast<size_t>(p.m * p.k) || y.size() != static_cast<size_t>(p.m * p.n))
    return invalid_input("matmul: tensor sizes do not match the parameters");
  if (!inputs_in_range)
    if (Status s = check_range(a, p.a.type, "matmul A"); !s.is_ok()) return s;
  if (k.quads > 0 && quads_supported(isa)) {
    matmul_quads(k, isa, a.data(), y.data());
    return Status{};
  }
  if (k.chunk_depth > 0) {
    matmul_chunked(k, isa, a.data(), y.data());
    return Status{};
  }
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
