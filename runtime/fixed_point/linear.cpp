// Conv2D and MatMul / Gemm: integer products, wide accumulation, per-channel requantization
// (docs/fixed-point.md, section 3).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

#include "qflow/runtime/fixed_point.h"
#include "qflow/runtime/isa_cap.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::fx {
namespace {

int64_t accumulator_limit(QType activation) {
  // int32 for 8-bit activations; the 16-bit datapath accumulates in 48 bits.
  return is_16bit(activation) ? (int64_t{1} << 47) - 1 : int64_t{std::numeric_limits<int32_t>::max()};
}

int64_t max_abs_offset(QType type, int32_t zero_point) {
  const Range r = range_of(type);
  return std::max<int64_t>(int64_t{zero_point} - r.min, int64_t{r.max} - zero_point);
}

int64_t max_abs_value(QType type) {
  const Range r = range_of(type);
  return std::max<int64_t>(-int64_t{r.min}, r.max);
}

Range output_bounds(QType type, Clamp clamp) {
  const Range r = range_of(type);
  return Range{std::max(r.min, clamp.min), std::min(r.max, clamp.max)};
}

Status check_zero_point(const QParams& q, const char* what) {
  const Range r = range_of(q.type);
  if (q.zero_point < r.min || q.zero_point > r.max)
    return invalid_input(std::string(what) + " zero point " + std::to_string(q.zero_point) + " is outside its type");
  return Status{};
}

Status check_common(QType activation, const QParams& in, const QParams& out, QType weight, int64_t k,
                    std::span<const int32_t> bias, size_t channels, size_t multipliers, Clamp clamp) {
  if (Status s = check_type_pair(activation, weight); !s.is_ok()) return s;
  if (Status s = check_zero_point(in, "input"); !s.is_ok()) return s;
  if (Status s = check_zero_point(out, "output"); !s.is_ok()) return s;
  if (!bias.empty() && bias.size() != channels)
    return invalid_input("bias has " + std::to_string(bias.size()) + " values, expected " + std::to_string(channels));
  if (multipliers != 1 && multipliers != channels)
    return invalid_input("expected 1 or " + std::to_string(channels) + " multipliers, got " +
                         std::to_string(multipliers));
  const Range b = output_bounds(out.type, clamp);
  if (b.min > b.max) return invalid_input("the clamp bounds leave no output value");
  int64_t max_bias = 0;
  for (const int32_t v : bias) max_bias = std::max<int64_t>(max_bias, std::llabs(v));
  const int64_t limit = max_reduction(activation, in.zero_point, weight, max_bias);
  if (k > limit)
    return invalid_input("reduction length " + std::to_string(k) + " may overflow the accumulator (at most " +
                         std::to_string(limit) + " for these types and this bias)");
  return Status{};
}

}  // namespace

namespace {

// The smallest and largest of v and [lo, hi]: a branch-free pass that vectorizes (with 32-bit
// min / max when the CPU has AVX2 and the instruction-set cap allows it; every fast kernel
// checks its input with it). Chosen by a branch rather than target_clones, whose ifunc
// resolver would also run, instrumented, before ThreadSanitizer starts.
[[gnu::always_inline]] inline void min_max_body(const int32_t* v, size_t n, int32_t& lo, int32_t& hi) {
  int32_t l = lo, h = hi;
  for (size_t i = 0; i < n; ++i) {
    l = std::min(l, v[i]);
    h = std::max(h, v[i]);
  }
  lo = l;
  hi = h;
}

void min_max_baseline(const int32_t* v, size_t n, int32_t& lo, int32_t& hi) { min_max_body(v, n, lo, hi); }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void min_max_avx2(const int32_t* v, size_t n, int32_t& lo, int32_t& hi) {
  min_max_body(v, n, lo, hi);
}
#endif

void min_max(const int32_t* v, size_t n, int32_t& lo, int32_t& hi) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
  if (avx2 && isa::allows(isa::Level::avx2)) return min_max_avx2(v, n, lo, hi);
#endif
  min_max_baseline(v, n, lo, hi);
}

// acc[i] += (x[i * step] - zp) * w for i < n: one kernel tap along an output row. Integer sums
// are exact in any order, so conv2d accumulates tap by tap over a plane of outputs, which
// vectorizes, instead of output by output.
[[gnu::always_inline]] inline void tap_row_body(int64_t* acc, const int32_t* x, int64_t n, int64_t step, int32_t zp,
                                                int32_t w) {
  if (step == 1)
    for (int64_t i = 0; i < n; ++i) acc[i] += int64_t{x[i] - zp} * w;
  else
    for (int64_t i = 0; i < n; ++i) acc[i] += int64_t{x[i * step] - zp} * w;
}

void tap_row_baseline(int64_t* acc, const int32_t* x, int64_t n, int64_t step, int32_t zp, int32_t w) {
  tap_row_body(acc, x, n, step, zp, w);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The contiguous rows with signed 32 x 32 -> 64-bit products (vpmuldq), which the compiler
// does not find in the loop above: x - zp and w both fit int32.
__attribute__((target("avx512f"))) void tap_row_avx512(int64_t* acc, const int32_t* x, int64_t n, int64_t step,
                                                       int32_t zp, int32_t w) {
  int64_t i = 0;
  if (step == 1) {
    const __m512i wv = _mm512_set1_epi64(w);
    const __m256i zv = _mm256_set1_epi32(zp);
    for (; i + 8 <= n; i += 8) {
      const __m256i xi = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), zv);
      // maskz forms: GCC 12 warns about the undefined pass-through of the plain ones.
      const __m512i product = _mm512_maskz_mul_epi32(0xFF, _mm512_maskz_cvtepi32_epi64(0xFF, xi), wv);
      _mm512_storeu_si512(acc + i, _mm512_add_epi64(_mm512_loadu_si512(acc + i), product));
    }
  }
  tap_row_body(acc + i, x + i * step, n - i, step, zp, w);
}

__attribute__((target("avx2"))) void tap_row_avx2(int64_t* acc, const int32_t* x, int64_t n, int64_t step, int32_t zp,
                                                  int32_t w) {
  int64_t i = 0;
  if (step == 1) {
    const __m256i wv = _mm256_set1_epi64x(w);
    const __m128i zv = _mm_set1_epi32(zp);
    for (; i + 4 <= n; i += 4) {
      const __m128i xi = _mm_sub_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)), zv);
      const __m256i product = _mm256_mul_epi32(_mm256_cvtepi32_epi64(xi), wv);
      __m256i* a = reinterpret_cast<__m256i*>(acc + i);
      _mm256_storeu_si256(a, _mm256_add_epi64(_mm256_loadu_si256(a), product));
    }
  }
  tap_row_body(acc + i, x + i * step, n - i, step, zp, w);
}
#endif

// acc[i] += sum over c < channels of (x[c * x_stride + i] - zp) * w[c * w_stride] for i < n:
// one tap position of every input channel along a row of outputs (or a whole 1x1 plane), with
// the accumulators of a block of outputs held in registers while the channels stream past
// (one call per tap instead of one per tap and channel).
[[gnu::always_inline]] inline void channels_body(int64_t* acc, const int32_t* x, int64_t x_stride, const int32_t* w,
                                                 int64_t w_stride, int64_t channels, int64_t n, int32_t zp) {
  for (int64_t c = 0; c < channels; ++c) tap_row_body(acc, x + c * x_stride, n, 1, zp, w[c * w_stride]);
}

void channels_baseline(int64_t* acc, const int32_t* x, int64_t x_stride, const int32_t* w, int64_t w_stride,
                       int64_t channels, int64_t n, int32_t zp) {
  channels_body(acc, x, x_stride, w, w_stride, channels, n, zp);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) void channels_avx512(int64_t* acc, const int32_t* x, int64_t x_stride,
                                                        const int32_t* w, int64_t w_stride, int64_t channels, int64_t n,
                                                        int32_t zp) {
  const __m256i zv = _mm256_set1_epi32(zp);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i lo = _mm512_loadu_si512(acc + i), hi = _mm512_loadu_si512(acc + i + 8);
    for (int64_t c = 0; c < channels; ++c) {
      const int32_t* xc = x + c * x_stride + i;
      const __m256i x0 = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc)), zv);
      const __m256i x1 = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc + 8)), zv);
      const __m512i wv = _mm512_set1_epi64(w[c * w_stride]);
      // maskz forms: GCC 12 warns about the undefined pass-through of the plain ones.
      lo = _mm512_add_epi64(lo, _mm512_maskz_mul_epi32(0xFF, _mm512_maskz_cvtepi32_epi64(0xFF, x0), wv));
      hi = _mm512_add_epi64(hi, _mm512_maskz_mul_epi32(0xFF, _mm512_maskz_cvtepi32_epi64(0xFF, x1), wv));
    }
    _mm512_storeu_si512(acc + i, lo);
    _mm512_storeu_si512(acc + i + 8, hi);
  }
  if (i + 8 <= n) {  // a block of 8 outputs (rows of 40 are common)
    __m512i lo = _mm512_loadu_si512(acc + i);
    for (int64_t c = 0; c < channels; ++c) {
      const __m256i x0 = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c * x_stride + i)), zv);
      lo = _mm512_add_epi64(lo, _mm512_maskz_mul_epi32(0xFF, _mm512_maskz_cvtepi32_epi64(0xFF, x0),
                                                       _mm512_set1_epi64(w[c * w_stride])));
    }
    _mm512_storeu_si512(acc + i, lo);
    i += 8;
  }
  channels_body(acc + i, x + i, x_stride, w, w_stride, channels, n - i, zp);
}

__attribute__((target("avx2"))) void channels_avx2(int64_t* acc, const int32_t* x, int64_t x_stride, const int32_t* w,
                                                   int64_t w_stride, int64_t channels, int64_t n, int32_t zp) {
  const __m128i zv = _mm_set1_epi32(zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i + 4));
    for (int64_t c = 0; c < channels; ++c) {
      const int32_t* xc = x + c * x_stride + i;
      const __m128i x0 = _mm_sub_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xc)), zv);
      const __m128i x1 = _mm_sub_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xc + 4)), zv);
      const __m256i wv = _mm256_set1_epi64x(w[c * w_stride]);
      lo = _mm256_add_epi64(lo, _mm256_mul_epi32(_mm256_cvtepi32_epi64(x0), wv));
      hi = _mm256_add_epi64(hi, _mm256_mul_epi32(_mm256_cvtepi32_epi64(x1), wv));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i + 4), hi);
  }
  channels_body(acc + i, x + i, x_stride, w, w_stride, channels, n - i, zp);
}
#endif

// The widest of the three versions of a loop that this CPU runs and the cap allows.
template <typename F>
F widest_allowed([[maybe_unused]] F avx512, [[maybe_unused]] F avx2, F baseline) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has_avx2 = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
  static const bool has_avx512 = __builtin_cpu_supports("avx512f");
  if (has_avx512 && isa::allows(isa::Level::avx512)) return avx512;
  if (has_avx2 && isa::allows(isa::Level::avx2)) return avx2;
#endif
  return baseline;
}

using Channels = void (*)(int64_t*, const int32_t*, int64_t, const int32_t*, int64_t, int64_t, int64_t, int32_t);

Channels channels_fn() {
#if defined(__x86_64__) && defined(__GNUC__)
  return widest_allowed<Channels>(channels_avx512, channels_avx2, channels_baseline);
#else
  return channels_baseline;
#endif
}

using TapRow = void (*)(int64_t*, const int32_t*, int64_t, int64_t, int32_t, int32_t);

TapRow tap_row() {
#if defined(__x86_64__) && defined(__GNUC__)
  return widest_allowed<TapRow>(tap_row_avx512, tap_row_avx2, tap_row_baseline);
#else
  return tap_row_baseline;
#endif
}

}  // namespace

Status check_range(std::span<const int32_t> v, QType type, const char* what) {
  const Range r = range_of(type);
  // The offender is looked for only on failure.
  int32_t lo = r.min, hi = r.max;
  min_max(v.data(), v.size(), lo, hi);
  if (lo >= r.min && hi <= r.max) return Status{};
  for (const int32_t x : v)
    if (x < r.min || x > r.max)
      return invalid_input(std::string(what) + " holds " + std::to_string(x) + ", outside its type's range [" +
                           std::to_string(r.min) + ", " + std::to_string(r.max) + "]");
  return Status{};
}

Status check_type_pair(QType activation, QType weight) {
  if (weight != QType::Int8 && weight != QType::Int16)
    return invalid_input("weights must be int8 or int16");
  if (!is_16bit(activation) && weight == QType::Int16)
    return invalid_input("8-bit activations with int16 weights are not supported");
  return Status{};
}

int64_t max_reduction(QType activation, int32_t activation_zero_point, QType weight, int64_t max_abs_bias) {
  return max_reduction(activation, activation_zero_point, weight, max_abs_bias, accumulator_limit(activation));
}

int64_t max_reduction(QType activation, int32_t activation_zero_point, QType weight, int64_t max_abs_bias,
                      int64_t accumulator_max) {
  const int64_t product = max_abs_offset(activation, activation_zero_point) * max_abs_value(weight);
  const int64_t room = accumulator_max - max_abs_bias;
  if (room <= 0 || product == 0) return room <= 0 ? 0 : std::numeric_limits<int64_t>::max();
  return room / product;
}

int64_t conv_out_h(const Conv2DParams& p) {
  const int64_t eff = p.dilations[0] * (p.kernel_h - 1) + 1;
  return (p.in_h + p.pads[0] + p.pads[2] - eff) / p.strides[0] + 1;
}

int64_t conv_out_w(const Conv2DParams& p) {
  const int64_t eff = p.dilations[1] * (p.kernel_w - 1) + 1;
  return (p.in_w + p.pads[1] + p.pads[3] - eff) / p.strides[1] + 1;
}

// x is checked only when `x` is non-null (the fast kernels check it at run time).
Status check_conv2d(const Conv2DParams& p, size_t x_size, const std::span<const int32_t>* x,
                    std::span<const int32_t> w, std::span<const int32_t> bias, size_t y_size) {
  if (p.batch < 1 || p.in_channels < 1 || p.in_h < 1 || p.in_w < 1 || p.out_channels < 1 || p.kernel_h < 1 ||
      p.kernel_w < 1 || p.group < 1 || p.strides[0] < 1 || p.strides[1] < 1 || p.dilations[0] < 1 ||
      p.dilations[1] < 1 || std::any_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v < 0; }))
    return invalid_input("conv2d: dimensions, strides and dilations must be positive, pads non-negative");
  if (p.in_channels % p.group != 0 || p.out_channels % p.group != 0)
    return invalid_input("conv2d: group " + std::to_string(p.group) + " does not divide the channel counts");
  const int64_t oh = conv_out_h(p), ow = conv_out_w(p);
  if (oh < 1 || ow < 1) return invalid_input("conv2d: the kernel does not fit the padded input");
  const int64_t cg = p.in_channels / p.group;
  const int64_t k = cg * p.kernel_h * p.kernel_w;
  if (Status s = check_common(p.input.type, p.input, p.output, p.weight_type, k, bias,
                              static_cast<size_t>(p.out_channels), p.multipliers.size(), p.clamp);
      !s.is_ok())
    return invalid_input("conv2d: " + s.message());
  if (x_size != static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w) ||
      w.size() != static_cast<size_t>(p.out_channels * k) || y_size != static_cast<size_t>(p.batch * p.out_channels * oh * ow))
    return invalid_input("conv2d: tensor sizes do not match the parameters");
  if (x)
    if (Status s = check_range(*x, p.input.type, "conv2d input"); !s.is_ok()) return s;
  return check_range(w, p.weight_type, "conv2d weight");
}

Status conv2d(const Conv2DParams& p, std::span<const int32_t> x, std::span<const int32_t> w,
              std::span<const int32_t> bias, std::span<int32_t> y) {
  if (Status s = check_conv2d(p, x.size(), &x, w, bias, y.size()); !s.is_ok()) return s;
  const int64_t oh = conv_out_h(p), ow = conv_out_w(p);
  const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group;
  const int64_t k = cg * p.kernel_h * p.kernel_w;
  const Range b = output_bounds(p.output.type, p.clamp);
  const auto zp = static_cast<int32_t>(p.input.zero_point);
  const TapRow accumulate = tap_row();
  const Channels accumulate_channels = channels_fn();
  const bool one_by_one = p.kernel_h == 1 && p.kernel_w == 1 && p.strides[0] == 1 && p.strides[1] == 1 &&
                          std::all_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v == 0; });
  const int64_t taps = p.kernel_h * p.kernel_w, in_plane = p.in_h * p.in_w;
  std::vector<int64_t> plane(static_cast<size_t>(oh * ow));
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t m = 0; m < p.out_channels; ++m) {
      const int64_t g = m / mg;
      const Multiplier mult = p.multipliers.size() == 1 ? p.multipliers[0] : p.multipliers[static_cast<size_t>(m)];
      const int32_t* wm = w.data() + m * k;
      std::fill(plane.begin(), plane.end(), bias.empty() ? 0 : int64_t{bias[static_cast<size_t>(m)]});
      const int32_t* xg = x.data() + (n * p.in_channels + g * cg) * in_plane;
      if (one_by_one) {
        accumulate_channels(plane.data(), xg, in_plane, wm, 1, cg, oh * ow, zp);
      } else if (p.strides[1] == 1 && cg > 1) {  // a tap of all channels along a row at a time
        for (int64_t ky = 0; ky < p.kernel_h; ++ky)
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t off = kx * p.dilations[1] - p.pads[1];
            const int64_t ox0 = std::max<int64_t>(0, -off), ox1 = std::min(ow, p.in_w - off);
            if (ox0 >= ox1) continue;
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
              if (iy < 0 || iy >= p.in_h) continue;
              accumulate_channels(plane.data() + oy * ow + ox0, xg + iy * p.in_w + ox0 + off, in_plane,
                                  wm + ky * p.kernel_w + kx, taps, cg, ox1 - ox0, zp);
            }
          }
      } else {
        for (int64_t c = 0; c < cg; ++c) {
          const int32_t* xc = x.data() + ((n * p.in_channels + g * cg + c) * p.in_h) * p.in_w;
          const int32_t* wc = wm + c * p.kernel_h * p.kernel_w;
          for (int64_t ky = 0; ky < p.kernel_h; ++ky)
            for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
              // Padding contributes (zp - zp) * w = 0, so padded taps are skipped: the tap reads
              // input column ox * stride + off, inside the row for ox in [ox0, ox1).
              const int64_t off = kx * p.dilations[1] - p.pads[1], s = p.strides[1];
              const int64_t ox0 = off >= 0 ? 0 : (-off + s - 1) / s;
              const int64_t ox1 = std::min(ow, p.in_w - off <= 0 ? int64_t{0} : (p.in_w - off + s - 1) / s);
              if (ox0 >= ox1) continue;
              for (int64_t oy = 0; oy < oh; ++oy) {
                const int64_t iy = oy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
                if (iy < 0 || iy >= p.in_h) continue;
                accumulate(plane.data() + oy * ow + ox0, xc + iy * p.in_w + ox0 * s + off, ox1 - ox0, s, zp,
                           wc[ky * p.kernel_w + kx]);
              }
            }
        }
      }
      int32_t* ym = y.data() + (n * p.out_channels + m) * oh * ow;
      for (int64_t i = 0; i < oh * ow; ++i) ym[i] = requantize(plane[static_cast<size_t>(i)], mult, p.output.zero_point, b.min, b.max);
    }
  return Status{};
}

int64_t conv_transpose_out_h(const ConvTranspose2DParams& p) {
  return p.strides[0] * (p.in_h - 1) + p.output_padding[0] + p.dilations[0] * (p.kernel_h - 1) + 1 - p.pads[0] - p.pads[2];
}

int64_t conv_transpose_out_w(const ConvTranspose2DParams& p) {
  return p.strides[1] * (p.in_w - 1) + p.output_padding[1] + p.dilations[1] * (p.kernel_w - 1) + 1 - p.pads[1] - p.pads[3];
}

Status conv_transpose2d(const ConvTranspose2DParams& p, std::span<const int32_t> x, std::span<const int32_t> w,
                        std::span<const int32_t> bias, std::span<int32_t> y) {
  if (p.batch < 1 || p.in_channels < 1 || p.in_h < 1 || p.in_w < 1 || p.out_channels < 1 || p.kernel_h < 1 ||
      p.kernel_w < 1 || p.group < 1 || p.strides[0] < 1 || p.strides[1] < 1 || p.dilations[0] < 1 ||
      p.dilations[1] < 1 || std::any_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v < 0; }) ||
      p.output_padding[0] < 0 || p.output_padding[1] < 0 || p.output_padding[0] >= std::max(p.strides[0], p.dilations[0]) ||
      p.output_padding[1] >= std::max(p.strides[1], p.dilations[1]))
    return invalid_input("conv_transpose2d: dimensions, strides and dilations must be positive, pads non-negative, "
                         "output padding below the stride or dilation");
  if (p.in_channels % p.group != 0 || p.out_channels % p.group != 0)
    return invalid_input("conv_transpose2d: group " + std::to_string(p.group) + " does not divide the channel counts");
  const int64_t oh = conv_transpose_out_h(p), ow = conv_transpose_out_w(p);
  if (oh < 1 || ow < 1) return invalid_input("conv_transpose2d: the pads remove the whole output");
  const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group;
  const int64_t kk = p.kernel_h * p.kernel_w;
  // Each output sums at most cg * kH * kW products.
  if (Status s = check_common(p.input.type, p.input, p.output, p.weight_type, cg * kk, bias,
                              static_cast<size_t>(p.out_channels), p.multipliers.size(), p.clamp);
      !s.is_ok())
    return invalid_input("conv_transpose2d: " + s.message());
  if (x.size() != static_cast<size_t>(p.batch * p.in_channels * p.in_h * p.in_w) ||
      w.size() != static_cast<size_t>(p.in_channels * mg * kk) ||
      y.size() != static_cast<size_t>(p.batch * p.out_channels * oh * ow))
    return invalid_input("conv_transpose2d: tensor sizes do not match the parameters");
  if (Status s = check_range(x, p.input.type, "conv_transpose2d input"); !s.is_ok()) return s;
  if (Status s = check_range(w, p.weight_type, "conv_transpose2d weight"); !s.is_ok()) return s;
  const Range b = output_bounds(p.output.type, p.clamp);
  const int64_t zp = p.input.zero_point;
  std::vector<int64_t> acc(static_cast<size_t>(oh * ow));
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t m = 0; m < p.out_channels; ++m) {
      const int64_t g = m / mg, mm = m % mg;
      std::fill(acc.begin(), acc.end(), bias.empty() ? 0 : int64_t{bias[static_cast<size_t>(m)]});
      // Scatter: input pixel (iy, ix) reaches output (iy * s - pad + ky * d, ...).
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t ci = g * cg + c;
        const int32_t* xc = x.data() + ((n * p.in_channels + ci) * p.in_h) * p.in_w;
        const int32_t* wc = w.data() + (ci * mg + mm) * kk;
        for (int64_t iy = 0; iy < p.in_h; ++iy)
          for (int64_t ix = 0; ix < p.in_w; ++ix) {
            const int64_t v = xc[iy * p.in_w + ix] - zp;
            if (v == 0) continue;
            for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
              const int64_t oy = iy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
              if (oy < 0 || oy >= oh) continue;
              for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
                const int64_t ox = ix * p.strides[1] - p.pads[1] + kx * p.dilations[1];
                if (ox >= 0 && ox < ow) acc[static_cast<size_t>(oy * ow + ox)] += v * wc[ky * p.kernel_w + kx];
              }
            }
          }
      }
      const Multiplier mult = p.multipliers.size() == 1 ? p.multipliers[0] : p.multipliers[static_cast<size_t>(m)];
      int32_t* ym = y.data() + (n * p.out_channels + m) * oh * ow;
      for (int64_t i = 0; i < oh * ow; ++i)
        ym[i] = requantize(acc[static_cast<size_t>(i)], mult, p.output.zero_point, b.min, b.max);
    }
  return Status{};
}

Status check_matmul(const MatMulParams& p, size_t a_size, const std::span<const int32_t>* a,
                    std::span<const int32_t> bm, std::span<const int32_t> bias, size_t y_size) {
  if (p.m < 1 || p.k < 1 || p.n < 1) return invalid_input("matmul: dimensions must be positive");
  if (Status s = check_common(p.a.type, p.a, p.output, p.b_type, p.k, bias, static_cast<size_t>(p.n),
                              p.multipliers.size(), p.clamp);
      !s.is_ok())
    return invalid_input("matmul: " + s.message());
  const Range br = range_of(p.b_type);
  if (p.b_zero_point < br.min || p.b_zero_point > br.max) return invalid_input("matmul: B zero point outside its type");
  if (p.b_zero_point != 0) {
    // An asymmetric B widens |b - zp_b|; the bound is checked with that magnitude.
    const int64_t bmax = std::max<int64_t>(int64_t{p.b_zero_point} - br.min, int64_t{br.max} - p.b_zero_point);
    const int64_t amax = max_abs_offset(p.a.type, p.a.zero_point);
    int64_t max_bias = 0;
    for (const int32_t v : bias) max_bias = std::max<int64_t>(max_bias, std::llabs(v));
    if (p.k > (accumulator_limit(p.a.type) - max_bias) / (amax * bmax))
      return invalid_input("matmul: reduction length " + std::to_string(p.k) + " may overflow the accumulator");
  }
  if (a_size != static_cast<size_t>(p.m * p.k) || bm.size() != static_cast<size_t>(p.k * p.n) ||
      y_size != static_cast<size_t>(p.m * p.n))
    return invalid_input("matmul: tensor sizes do not match the parameters");
  if (a)
    if (Status s = check_range(*a, p.a.type, "matmul A"); !s.is_ok()) return s;
  return check_range(bm, p.b_type, "matmul B");
}

Status matmul(const MatMulParams& p, std::span<const int32_t> a, std::span<const int32_t> bm,
              std::span<const int32_t> bias, std::span<int32_t> y) {
  if (Status s = check_matmul(p, a.size(), &a, bm, bias, y.size()); !s.is_ok()) return s;
  const Range b = output_bounds(p.output.type, p.clamp);
  const int64_t za = p.a.zero_point, zb = p.b_zero_point;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      int64_t acc = bias.empty() ? 0 : bias[static_cast<size_t>(j)];
      for (int64_t t = 0; t < p.k; ++t) {
        const int64_t bv = p.b_transposed ? bm[static_cast<size_t>(j * p.k + t)] : bm[static_cast<size_t>(t * p.n + j)];
        acc += (a[static_cast<size_t>(i * p.k + t)] - za) * (bv - zb);
      }
      const Multiplier mult = p.multipliers.size() == 1 ? p.multipliers[0] : p.multipliers[static_cast<size_t>(j)];
      y[static_cast<size_t>(i * p.n + j)] = requantize(acc, mult, p.output.zero_point, b.min, b.max);
    }
  return Status{};
}

}  // namespace qflow::fx
