// MaxPool, AveragePool and GlobalAveragePool on the fast kernels. A global pool sums each
// channel's x - zp directly (one window, no padding). Otherwise, per channel the input is copied
// once into a padded plane (the type's minimum around it for max pooling, where padded taps never
// win; x - zp with zeros around it for averaging, where a padded tap adds 0), or read directly
// where there is neither padding nor an offset, so the window loops run without bounds checks and
// vectorize across output pixels (on AVX-512, max pooling 16 pixels per vector). The divisor of a window is the
// product of its valid rows and columns (or the whole kernel with count_include_pad), and its
// multiplier is derived only for the divisors that occur. Results and errors equal fx::max_pool,
// fx::average_pool and fx::global_average_pool: anything the reference refuses goes to it.
#include <algorithm>
#include <climits>

#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FAST_POOL_X86 1
#endif

namespace qflow::fx::fast {
namespace {

struct PoolScratch {
  std::vector<int32_t> plane, acc;
  std::vector<int64_t> rows, cols;  // valid taps per output row / column
  std::vector<Multiplier> per_count;
  std::vector<char> made;
};
PoolScratch& pool_scratch() {
  thread_local PoolScratch s;
  return s;
}

// Every check of the reference's check_pool, as a yes / no; the values' range only when not
// known.
bool pool_ok(const Pool2DParams& p, std::span<const int32_t> x, std::span<int32_t> y, bool inputs_in_range) {
  if (p.batch < 1 || p.channels < 1 || p.in_h < 1 || p.in_w < 1 || p.kernel_h < 1 || p.kernel_w < 1 ||
      p.strides[0] < 1 || p.strides[1] < 1 || p.dilations[0] < 1 || p.dilations[1] < 1 ||
      std::any_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v < 0; }))
    return false;
  if (p.pads[0] >= p.kernel_h || p.pads[2] >= p.kernel_h || p.pads[1] >= p.kernel_w || p.pads[3] >= p.kernel_w)
    return false;
  const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
  if (oh < 1 || ow < 1) return false;
  if (x.size() != static_cast<size_t>(p.batch * p.channels * p.in_h * p.in_w) ||
      y.size() != static_cast<size_t>(p.batch * p.channels * oh * ow))
    return false;
  const Range r = range_of(p.input.type), ro = range_of(p.output.type);
  if (p.input.zero_point < r.min || p.input.zero_point > r.max || p.output.zero_point < ro.min ||
      p.output.zero_point > ro.max)
    return false;
  return inputs_in_range || check_range(x, p.input.type, "").is_ok();
}

// Copies channel plane xc (in_h x in_w) into the interior of `plane` (row pitch pw), offset by
// `offset`; the border keeps its fill value.
void fill_interior(const Pool2DParams& p, const int32_t* xc, int32_t offset, int64_t pw, int32_t* plane) {
  for (int64_t iy = 0; iy < p.in_h; ++iy) {
    int32_t* dst = plane + (iy + p.pads[0]) * pw + p.pads[1];
    const int32_t* src = xc + iy * p.in_w;
    for (int64_t ix = 0; ix < p.in_w; ++ix) dst[ix] = src[ix] - offset;
  }
}

// acc[ox] = op over the window of output row oy (taps at plane[(oy*sy + ky*dy) * pw + ox*sx + kx*dx]).
template <typename Op>
[[gnu::always_inline]] inline void window_row(const Pool2DParams& p, const int32_t* plane, int64_t pw, int64_t oy,
                                              int64_t ow, int32_t init, int32_t* acc, Op op) {
  const int64_t sy = p.strides[0], sx = p.strides[1], dy = p.dilations[0], dx = p.dilations[1];
  std::fill(acc, acc + ow, init);
  for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
    const int32_t* row = plane + (oy * sy + ky * dy) * pw;
    if (ow == 1) {  // a global window: one long row sum
      int32_t a = acc[0];
      for (int64_t kx = 0; kx < p.kernel_w; ++kx) a = op(a, row[kx * dx]);
      acc[0] = a;
      continue;
    }
    for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
      const int32_t* src = row + kx * dx;
      if (sx == 1)
        for (int64_t ox = 0; ox < ow; ++ox) acc[ox] = op(acc[ox], src[ox]);
      else
        for (int64_t ox = 0; ox < ow; ++ox) acc[ox] = op(acc[ox], src[ox * sx]);
    }
  }
}

struct Max {
  int32_t operator()(int32_t a, int32_t b) const { return std::max(a, b); }
};
struct Sum {
  int32_t operator()(int32_t a, int32_t b) const { return a + b; }
};

// The padded input's rows and columns, extended with the fill to every tap read: pool_out_h
// truncates toward zero, so a window taller than the padded input may still make one output row.
std::pair<int64_t, int64_t> padded_extent(const Pool2DParams& p, int64_t oh, int64_t ow) {
  return {std::max(p.in_h + p.pads[0] + p.pads[2], (oh - 1) * p.strides[0] + (p.kernel_h - 1) * p.dilations[0] + 1),
          std::max(p.in_w + p.pads[1] + p.pads[3], (ow - 1) * p.strides[1] + (p.kernel_w - 1) * p.dilations[1] + 1)};
}

// Calls f(nc, plane, pw) for every channel nc with its input as a plane of pitch pw: x - offset
// inside a border of `fill` reaching every tap read, or without padding and offset the input
// itself.
template <typename F>
void for_each_plane(const Pool2DParams& p, std::span<const int32_t> x, int32_t fill, int32_t offset, F f) {
  const auto [ph, pw] = padded_extent(p, pool_out_h(p), pool_out_w(p));
  const bool direct = offset == 0 && ph == p.in_h && pw == p.in_w && p.pads[0] == 0 && p.pads[1] == 0;
  std::vector<int32_t>& plane = pool_scratch().plane;
  if (!direct) {
    if (plane.size() < static_cast<size_t>(ph * pw)) plane.resize(static_cast<size_t>(ph * pw));
    // The border stays as filled: only the interior is rewritten per channel.
    std::fill(plane.begin(), plane.begin() + ph * pw, fill);
  }
  for (int64_t nc = 0; nc < p.batch * p.channels; ++nc) {
    const int32_t* xc = x.data() + nc * p.in_h * p.in_w;
    if (direct) {
      f(nc, xc, pw);
    } else {
      fill_interior(p, xc, offset, pw, plane.data());
      f(nc, plane.data(), pw);
    }
  }
}

// Runs `op` windows over every channel, handing each output row's accumulators to `emit`;
// `fill` is the padding value and the accumulators' start (the identity of `op`).
template <typename Op, typename Emit>
void run_planes(const Pool2DParams& p, std::span<const int32_t> x, int32_t fill, int32_t offset, Op op, Emit emit) {
  const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
  std::vector<int32_t>& acc = pool_scratch().acc;
  if (acc.size() < static_cast<size_t>(ow)) acc.resize(static_cast<size_t>(ow));
  for_each_plane(p, x, fill, offset, [&](int64_t nc, const int32_t* plane, int64_t pw) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      window_row(p, plane, pw, oy, ow, fill, acc.data(), op);
      emit(nc, oy, acc.data());
    }
  });
}

#ifdef QFLOW_FAST_POOL_X86
// The max pool of one channel's padded plane (pitch pw) on AVX-512, 16 output pixels per
// vector: stride 1 loads each tap's run, stride 2 takes the even lanes of two loads, larger
// strides gather. y: the channel's oh x ow outputs.
__attribute__((target("avx512f"))) void max_plane_avx512(const Pool2DParams& p, const int32_t* plane, int64_t pw,
                                                         int64_t oh, int64_t ow, int32_t lowest, int32_t* y) {
  const int64_t sy = p.strides[0], sx = p.strides[1], dy = p.dilations[0], dx = p.dilations[1];
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i steps = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int32_t>(sx)));
  const __m512i init = _mm512_set1_epi32(lowest);
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ox += 16) {
      const int64_t n = std::min<int64_t>(16, ow - ox);
      const auto lanes = static_cast<__mmask16>((1u << n) - 1);
      // Stride 2: elements 0 .. 2 (n - 1) of the tap's run, 16 per load.
      const auto low = static_cast<__mmask16>((1u << std::min<int64_t>(16, 2 * n - 1)) - 1);
      const auto high = static_cast<__mmask16>((1u << std::max<int64_t>(0, 2 * n - 17)) - 1);
      __m512i acc = init;
      for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
        const int32_t* row = plane + (oy * sy + ky * dy) * pw + ox * sx;
        for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
          const int32_t* src = row + kx * dx;
          __m512i v;
          if (sx == 1) {
            v = _mm512_maskz_loadu_epi32(lanes, src);
          } else if (sx == 2) {
            v = _mm512_maskz_permutex2var_epi32(lanes, _mm512_maskz_loadu_epi32(low, src), even,
                                                _mm512_maskz_loadu_epi32(high, src + 16));
          } else {
            v = _mm512_mask_i32gather_epi32(init, lanes, steps, src, 4);
          }
          acc = _mm512_maskz_max_epi32(0xFFFF, acc, v);  // zero-masked: GCC 12 warns on the plain form
        }
      }
      _mm512_mask_storeu_epi32(y + oy * ow + ox, lanes, acc);
    }
}
#endif

// Valid taps of each window along one axis (dilation 1).
void valid_counts(int64_t out, int64_t in, int64_t kernel, int64_t stride, int64_t pad, std::vector<int64_t>& v) {
  v.resize(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t b = o * stride - pad;
    v[static_cast<size_t>(o)] = std::min(b + kernel, in) - std::max<int64_t>(b, 0);
  }
}

}  // namespace

Status max_pool(const Pool2DParams& p, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                bool inputs_in_range) {
  if (!pool_ok(p, x, y, inputs_in_range) || p.input != p.output) return fx::max_pool(p, x, y);
  const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
  const int32_t lowest = range_of(p.input.type).min;
#ifdef QFLOW_FAST_POOL_X86
  // The gather's lane offsets (up to 15 strides) stay within int32.
  if (isa == Isa::Avx512Vnni && p.strides[1] <= (int64_t{1} << 26)) {
    for_each_plane(p, x, lowest, 0, [&](int64_t nc, const int32_t* plane, int64_t pw) {
      max_plane_avx512(p, plane, pw, oh, ow, lowest, y.data() + nc * oh * ow);
    });
    return Status{};
  }
#else
  (void)isa;
#endif
  run_planes(p, x, lowest, 0, Max{}, [&](int64_t nc, int64_t oy, const int32_t* acc) {
    std::copy(acc, acc + ow, y.data() + (nc * oh + oy) * ow);
  });
  return Status{};
}

Status average_pool(const Pool2DParams& p, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                    bool inputs_in_range) {
  (void)isa;
  if (!pool_ok(p, x, y, inputs_in_range) || p.dilations[0] != 1 || p.dilations[1] != 1 || !(p.input.scale > 0.0) ||
      !(p.output.scale > 0.0))
    return fx::average_pool(p, x, y);
  const Range r = range_of(p.input.type), ro = range_of(p.output.type);
  const int64_t offset = std::max<int64_t>(int64_t{p.input.zero_point} - r.min, int64_t{r.max} - p.input.zero_point);
  const int64_t window = p.kernel_h * p.kernel_w;
  if (window > INT32_MAX / std::max<int64_t>(offset, 1)) return fx::average_pool(p, x, y);
  const bool same = p.input == p.output;
  const double ratio = p.input.scale / p.output.scale;
  // ratio / c shrinks with c: when the reference can derive the multiplier of divisor 1 it can
  // derive every one, so a failure there is the only one it reports.
  Multiplier probe;
  if (!same && !make_multiplier(ratio, probe).is_ok()) return fx::average_pool(p, x, y);
  PoolScratch& s = pool_scratch();
  const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
  valid_counts(oh, p.in_h, p.kernel_h, p.strides[0], p.pads[0], s.rows);
  valid_counts(ow, p.in_w, p.kernel_w, p.strides[1], p.pads[1], s.cols);
  s.per_count.assign(static_cast<size_t>(window + 1), Multiplier{});
  s.made.assign(static_cast<size_t>(window + 1), 0);
  const int32_t zo = p.output.zero_point;
  run_planes(p, x, 0, p.input.zero_point, Sum{}, [&](int64_t nc, int64_t oy, const int32_t* acc) {
    int32_t* out = y.data() + (nc * oh + oy) * ow;
    for (int64_t ox = 0; ox < ow; ++ox) {
      const int64_t count = p.count_include_pad ? window : s.rows[static_cast<size_t>(oy)] * s.cols[static_cast<size_t>(ox)];
      if (same) {
        out[ox] = static_cast<int32_t>(std::clamp<int64_t>(rounding_divide(acc[ox], count) + zo, ro.min, ro.max));
        continue;
      }
      const auto c = static_cast<size_t>(count);
      if (!s.made[c]) {
        (void)make_multiplier(ratio / static_cast<double>(count), s.per_count[c]);  // cannot fail, see above
        s.made[c] = 1;
      }
      out[ox] = requantize(acc[ox], s.per_count[c], zo, ro.min, ro.max);
    }
  });
  return Status{};
}

namespace {

// sum of x[i] - zp for i < n (n * |x - zp| < 2^31, which the caller checks).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) int32_t centred_sum_avx2(const int32_t* x, int64_t n, int32_t zp) {
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] - zp;
  return sum;
}
#endif

int32_t centred_sum(Isa isa, const int32_t* x, int64_t n, int32_t zp) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa != Isa::Portable) return centred_sum_avx2(x, n, zp);
#else
  (void)isa;
#endif
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] - zp;
  return sum;
}

}  // namespace

Status global_average_pool(int64_t batch, int64_t channels, int64_t h, int64_t w, const QParams& input,
                           const QParams& output, Isa isa, std::span<const int32_t> x, std::span<int32_t> y,
                           bool inputs_in_range) {
  Pool2DParams p;
  p.batch = batch;
  p.channels = channels;
  p.in_h = h;
  p.in_w = w;
  p.kernel_h = h;
  p.kernel_w = w;
  p.input = input;
  p.output = output;
  // The reference's own checks and message prefix when anything is refused.
  if (!pool_ok(p, x, y, inputs_in_range) || !(input.scale > 0.0) || !(output.scale > 0.0))
    return fx::global_average_pool(batch, channels, h, w, input, output, x, y);
  // One window per channel, no padding: the average pool's steps on a plain sum of x - zp.
  const Range r = range_of(input.type), ro = range_of(output.type);
  const int64_t offset = std::max<int64_t>(int64_t{input.zero_point} - r.min, int64_t{r.max} - input.zero_point);
  const int64_t count = h * w;
  Multiplier m;
  const bool same = input == output;
  if (count > INT32_MAX / std::max<int64_t>(offset, 1) || (!same && !make_multiplier(input.scale / output.scale / static_cast<double>(count), m).is_ok())) {
    if (Status s = average_pool(p, isa, x, y, inputs_in_range); !s.is_ok()) return invalid_input("global_" + s.message());
    return Status{};
  }
  for (int64_t nc = 0; nc < batch * channels; ++nc) {
    const int64_t acc = centred_sum(isa, x.data() + nc * count, count, input.zero_point);
    y[static_cast<size_t>(nc)] = same ? static_cast<int32_t>(std::clamp<int64_t>(rounding_divide(acc, count) + output.zero_point, ro.min, ro.max))
                                      : requantize(acc, m, output.zero_point, ro.min, ro.max);
  }
  return Status{};
}

}  // namespace qflow::fx::fast
