// Direct conv2d for one input channel per output channel (depthwise, and depthwise with a
// channel multiplier): the im2col + block product would waste most of its rows and padding
// there. Per channel, the centered input is copied once into a zero-padded plane split by
// column phase (x mod stride), so every tap reads a contiguous run of it whatever the stride,
// and the int32 accumulators of several 8-pixel vectors stay in registers over all taps.
// Kernels of 25 taps and more go in pairs on x86: two taps of one plane row whose columns
// differ by one read one int32 slot (q[j], q[j + 1]) as int16 of a pair plane, and one pmaddwd
// / vpdpwssd adds both products (x - zp and the weights fit int16, a pair of products int32).
// With AVX-512, int16 weights split into halves pair any kernel, and one pass of 16-pixel
// vectors accumulates both halves.
// Integer sums are exact: any order gives the reference's bits.
#include <algorithm>

#include "fixed_point/fast_depthwise.h"
#include "fixed_point/fast_dpwssd.h"
#include "qflow/runtime/vector_groups.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FX_DEPTHWISE_AVX2 1
#endif

namespace qflow::fx::fast::detail {
namespace {

using vector_groups::for_each_vector_group;

// Elements after the last phase row that a vector load at a row's end may read (16 lanes).
constexpr int64_t kOverRead = 16;

// The phase-split padded plane: phase p, row y, column j is padded column j * phases + p.
struct PhasedPlane {
  int64_t phases = 1, rows = 0, width = 0;
  int64_t size() const { return phases * rows * width + kOverRead; }
};

// acc[oy * ow + ox] = bias + sum over taps, row by row (loops the compiler vectorizes).
void accumulate_portable(const int32_t* q, const PhasedPlane& plane, const std::vector<int64_t>& offsets,
                         const int32_t* taps, int64_t sy, int64_t oh, int64_t ow, int32_t bias, int32_t* acc) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    int32_t* a = acc + oy * ow;
    std::fill(a, a + ow, bias);
    const int32_t* start = q + oy * sy * plane.width;
    for (std::size_t t = 0; t < offsets.size(); ++t) {
      const int32_t w = taps[t];
      const int32_t* src = start + offsets[t];
      for (int64_t ox = 0; ox < ow; ++ox) a[ox] += w * src[ox];
    }
  }
}

#ifdef QFLOW_FX_DEPTHWISE_AVX2
// How a tap's (or a pair of taps') products join the accumulators.
enum class Dot {
  Mullo,        // int32 plane: acc += w * x
  Pairs,        // pair plane: acc += w0 * x0 + w1 * x1 (pmaddwd)
  PairsAvxVnni, // the same with vpdpwssd, 256-bit AVX-VNNI
  PairsAvx512,  // the same with vpdpwssd, AVX-512 VNNI on 256-bit vectors
};

// N vectors of 8 accumulators over all taps: `at[i]` is vector i's offset in the plane,
// `dst[i]` in acc, `lanes[i]` how many of its 8 pixels exist.
#define QFLOW_DEPTHWISE_VECTORS(NAME, TARGET, DOT)                                                                   \
  template <int N>                                                                                                   \
  __attribute__((target(TARGET))) void NAME(const int32_t* q, const int64_t* offsets, const int32_t* taps,          \
                                            int64_t tap_count, int32_t bias, const int64_t* at, const int64_t* dst,  \
                                            const int* lanes, int32_t* acc) {                                        \
    __m256i sum[N];                                                                                                  \
    _Pragma("GCC unroll 8") for (int i = 0; i < N; ++i) sum[i] = _mm256_set1_epi32(bias);                            \
    for (int64_t t = 0; t < tap_count; ++t) {                                                                        \
      const __m256i w = _mm256_set1_epi32(taps[t]);                                                                  \
      const int32_t* src = q + offsets[t];                                                                           \
      _Pragma("GCC unroll 8") for (int i = 0; i < N; ++i) sum[i] =                                                   \
          DOT(sum[i], w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + at[i])));                         \
    }                                                                                                                \
    _Pragma("GCC unroll 8") for (int i = 0; i < N; ++i) {                                                            \
      if (lanes[i] == 8) {                                                                                           \
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + dst[i]), sum[i]);                                       \
      } else { /* a masked store: a copy of the lanes was a memmove call per row end */                              \
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes[i]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); \
        _mm256_maskstore_epi32(acc + dst[i], mask, sum[i]);                                                          \
      }                                                                                                              \
    }                                                                                                                \
  }

#define QFLOW_DOT_MULLO(acc, w, x) _mm256_add_epi32(acc, _mm256_mullo_epi32(w, x))
#define QFLOW_DOT_PAIRS(acc, w, x) _mm256_add_epi32(acc, _mm256_madd_epi16(w, x))
#define QFLOW_DOT_AVXVNNI(acc, w, x) _mm256_dpwssd_avx_epi32(acc, w, x)
#define QFLOW_DOT_AVX512VNNI(acc, w, x) _mm256_dpwssd_epi32(acc, w, x)
QFLOW_DEPTHWISE_VECTORS(vectors_mullo, "avx2", QFLOW_DOT_MULLO)
QFLOW_DEPTHWISE_VECTORS(vectors_pairs, "avx2", QFLOW_DOT_PAIRS)
#if !defined(__clang__) || __clang_major__ >= 16
QFLOW_DEPTHWISE_VECTORS(vectors_pairs_avxvnni, "avx2,avxvnni", QFLOW_DOT_AVXVNNI)
#endif
QFLOW_DEPTHWISE_VECTORS(vectors_pairs_avx512, "avx2,avx512vl,avx512vnni", QFLOW_DOT_AVX512VNNI)

template <int N>
void vectors(Dot dot, const int32_t* q, const int64_t* offsets, const int32_t* taps, int64_t tap_count, int32_t bias,
             const int64_t* at, const int64_t* dst, const int* lanes, int32_t* acc) {
  switch (dot) {
    case Dot::Mullo: return vectors_mullo<N>(q, offsets, taps, tap_count, bias, at, dst, lanes, acc);
    case Dot::Pairs: return vectors_pairs<N>(q, offsets, taps, tap_count, bias, at, dst, lanes, acc);
#if !defined(__clang__) || __clang_major__ >= 16
    case Dot::PairsAvxVnni: return vectors_pairs_avxvnni<N>(q, offsets, taps, tap_count, bias, at, dst, lanes, acc);
#else
    case Dot::PairsAvxVnni: return vectors_pairs<N>(q, offsets, taps, tap_count, bias, at, dst, lanes, acc);
#endif
    case Dot::PairsAvx512: return vectors_pairs_avx512<N>(q, offsets, taps, tap_count, bias, at, dst, lanes, acc);
  }
}

void accumulate_avx2(Dot dot, const int32_t* q, const PhasedPlane& plane, const std::vector<int64_t>& offsets,
                     const int32_t* taps, int64_t sy, int64_t oh, int64_t ow, int32_t bias, int32_t* acc) {
  const auto tap_count = static_cast<int64_t>(offsets.size());
  for_each_vector_group(oh, ow, sy * plane.width, 8, [&]<int N>(const int64_t* at, const int64_t* dst, const int* lanes) {
    vectors<N>(dot, q, offsets.data(), taps, tap_count, bias, at, dst, lanes, acc);
  });
}

// Both halves of split int16 weights at once with AVX-512 on a pair plane: N vectors of 16
// pixels, each load of the plane feeding the high and the low accumulators; `lanes[i]` of
// vector i's pixels exist.
template <int N>
__attribute__((target("avx512f,avx512vnni"))) void halves_avx512(const int32_t* q, const int64_t* offsets,
                                                                  const int32_t* high, const int32_t* low,
                                                                  int64_t tap_count, const int64_t* at,
                                                                  const int64_t* dst, const int* lanes,
                                                                  int32_t* out_high, int32_t* out_low) {
  __m512i h[N], l[N];
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) h[i] = l[i] = _mm512_setzero_si512();
  for (int64_t t = 0; t < tap_count; ++t) {
    const __m512i wh = _mm512_set1_epi32(high[t]), wl = _mm512_set1_epi32(low[t]);
    const int32_t* src = q + offsets[t];
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {
      const __m512i v = _mm512_loadu_si512(src + at[i]);
      dpwssd_avx512(h[i], wh, v);
      dpwssd_avx512(l[i], wl, v);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) {
    const auto mask = static_cast<__mmask16>(lanes[i] == 16 ? 0xFFFF : (1u << lanes[i]) - 1);
    _mm512_mask_storeu_epi32(out_high + dst[i], mask, h[i]);
    _mm512_mask_storeu_epi32(out_low + dst[i], mask, l[i]);
  }
}

// The high and the low halves' sums of every output pixel (no bias), in groups of 16-pixel
// vectors as accumulate_avx2's.
void accumulate_halves_avx512(const int32_t* q, const PhasedPlane& plane, const std::vector<int64_t>& offsets,
                              const int32_t* high, const int32_t* low, int64_t sy, int64_t oh, int64_t ow,
                              int32_t* out_high, int32_t* out_low) {
  const auto tap_count = static_cast<int64_t>(offsets.size());
  for_each_vector_group(oh, ow, sy * plane.width, 16, [&]<int N>(const int64_t* at, const int64_t* dst, const int* lanes) {
    halves_avx512<N>(q, offsets.data(), high, low, tap_count, at, dst, lanes, out_high, out_low);
  });
}

// Taps in pairs: two taps of one plane row whose columns differ by one read one int32 slot
// (q[j], q[j + 1]) of the pair plane; a tap without such a neighbour pairs with weight 0.
struct TapPairs {
  std::vector<int64_t> offsets;
  std::vector<std::pair<int, int>> taps;  // (first, second or -1)
};

TapPairs pair_taps(const std::vector<int64_t>& offsets, int64_t width) {
  std::vector<int> order(offsets.size());
  for (size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return offsets[static_cast<size_t>(a)] < offsets[static_cast<size_t>(b)]; });
  TapPairs tp;
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t o = offsets[static_cast<size_t>(order[i])];
    const bool pair = i + 1 < order.size() && offsets[static_cast<size_t>(order[i + 1])] == o + 1 && (o + 1) % width != 0;
    tp.offsets.push_back(o);
    tp.taps.emplace_back(order[i], pair ? order[i + 1] : -1);
    if (pair) ++i;
  }
  return tp;
}

// (a, b) as one pmaddwd slot: a in the low int16, b in the high one.
inline int32_t pack_pair(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(a)) | static_cast<uint32_t>(b) << 16);
}

// The weights of one pair as pmaddwd reads them (0 for a missing second tap).
int32_t weight_pair(const int32_t* taps, std::pair<int, int> pair) {
  return pack_pair(taps[pair.first], pair.second < 0 ? 0 : taps[pair.second]);
}

// pairs[i] = (x[i * step] - zp, x[(i + 1) * step] - zp) for i < n - 1 and (x[(n - 1) * step] -
// zp, 0) last, straight from the input (a centred copy read back at an offset stalled on store
// forwarding); step is S, or `stride` for S = 0.
template <int S>
__attribute__((target("avx2"))) void pack_row_avx2(const int32_t* x, int64_t n, int64_t stride, int32_t zp,
                                                   int32_t* pairs) {
  const int64_t step = S > 0 ? S : stride;
  for (int64_t i = 0; i + 1 < n; ++i) pairs[i] = pack_pair(x[i * step] - zp, x[(i + 1) * step] - zp);
  pairs[n - 1] = pack_pair(x[(n - 1) * step] - zp, 0);
}

void pack_row(int64_t stride, const int32_t* x, int64_t n, int32_t zp, int32_t* pairs) {
  if (stride == 1) return pack_row_avx2<1>(x, n, stride, zp, pairs);
  if (stride == 2) return pack_row_avx2<2>(x, n, stride, zp, pairs);
  pack_row_avx2<0>(x, n, stride, zp, pairs);
}
#endif

// Rows [0, count) of one phase: row y (pitch `width`) gets columns [first, last) of line y
// (pitch `line_pitch`, column j at line[j * stride]) minus zp. One function per stride, so the
// row loop runs without a call per row (Fashion-MNIST's rows are 7 to 16 values).
#define QFLOW_CENTER_ROWS(NAME, ATTRIBUTES)                                                                   \
  template <int S>                                                                                           \
  ATTRIBUTES void NAME(const int32_t* line, int64_t line_pitch, int64_t stride, int64_t count, int64_t first, \
                       int64_t last, int32_t zp, int32_t* row, int64_t width) {                              \
    const int64_t step = S > 0 ? S : stride;                                                                  \
    for (int64_t y = 0; y < count; ++y, line += line_pitch, row += width)                                     \
      for (int64_t j = first; j < last; ++j) row[j] = line[j * step] - zp;                                    \
  }
QFLOW_CENTER_ROWS(center_rows_portable, )
#ifdef QFLOW_FX_DEPTHWISE_AVX2
QFLOW_CENTER_ROWS(center_rows_avx2, __attribute__((target("avx2"))))
#endif

template <int S>
void center_rows(Isa isa, const int32_t* line, int64_t line_pitch, int64_t stride, int64_t count, int64_t first,
                 int64_t last, int32_t zp, int32_t* row, int64_t width) {
#ifdef QFLOW_FX_DEPTHWISE_AVX2
  if (isa != Isa::Portable) return center_rows_avx2<S>(line, line_pitch, stride, count, first, last, zp, row, width);
#else
  (void)isa;
#endif
  center_rows_portable<S>(line, line_pitch, stride, count, first, last, zp, row, width);
}

// Where channel data lands in the plane: plane rows [y_begin, y_end) hold image rows, and in
// phase `phase` columns [first, last) hold image columns j * phases + shift.
struct ImageSpan {
  int64_t y_begin = 0, y_end = 0;
  int64_t shift = 0, first = 0, last = 0;
};
ImageSpan image_span(const Conv2DParams& p, const PhasedPlane& plane, int64_t phase) {
  const int64_t sx = plane.phases, iw = p.in_w, top = p.pads[0];
  ImageSpan s;
  s.y_begin = std::min(plane.rows, top);
  s.y_end = std::max(s.y_begin, std::min(plane.rows, p.in_h + top));
  s.shift = phase - p.pads[1];
  s.first = std::min(plane.width, s.shift >= 0 ? int64_t{0} : (-s.shift + sx - 1) / sx);
  s.last = std::max(s.first, iw - 1 - s.shift < 0 ? int64_t{0} : std::min(plane.width, (iw - 1 - s.shift) / sx + 1));
  return s;
}

// Writes channel xc minus the zero point into the image part of the plane; the padding
// around it was zeroed once for the call.
void fill_plane(const Conv2DParams& p, Isa isa, const PhasedPlane& plane, const int32_t* xc, int32_t zp, int32_t* q) {
  const int64_t sx = plane.phases, iw = p.in_w;
  for (int64_t phase = 0; phase < sx; ++phase) {
    const ImageSpan s = image_span(p, plane, phase);
    if (s.y_begin >= s.y_end) return;
    int32_t* row = q + (phase * plane.rows + s.y_begin) * plane.width;
    const int32_t* line = xc + (s.y_begin - p.pads[0]) * iw + s.shift;
    const int64_t count = s.y_end - s.y_begin;
    if (sx == 1) center_rows<1>(isa, line, iw, sx, count, s.first, s.last, zp, row, plane.width);
    else if (sx == 2) center_rows<2>(isa, line, iw, sx, count, s.first, s.last, zp, row, plane.width);
    else center_rows<0>(isa, line, iw, sx, count, s.first, s.last, zp, row, plane.width);
  }
}

#ifdef QFLOW_FX_DEPTHWISE_AVX2
// The pair plane of channel xc: slot j of a plane row holds (q[j], q[j + 1]) of the centred,
// zero-padded row (q past the row's end is 0; no pair with a non-zero second weight reads
// there). Only the slots next to image columns are rewritten; the rest stay zero. Not inlined:
// inside depthwise_conv2d its row loop kept its counters on the stack.
[[gnu::noinline]] void fill_pair_plane(const Conv2DParams& p, const PhasedPlane& plane, const int32_t* xc, int32_t zp,
                                       int32_t* pairs) {
  for (int64_t phase = 0; phase < plane.phases; ++phase) {
    const ImageSpan s = image_span(p, plane, phase);
    if (s.first == s.last) continue;
    for (int64_t y = s.y_begin; y < s.y_end; ++y) {
      int32_t* row = pairs + (phase * plane.rows + y) * plane.width;
      const int32_t* line = xc + (y - p.pads[0]) * p.in_w + s.shift + s.first * plane.phases;  // column first
      if (s.first > 0) row[s.first - 1] = pack_pair(0, line[0] - zp);  // padding, then the first column
      pack_row(plane.phases, line, s.last - s.first, zp, row + s.first);
    }
  }
}
#endif

}  // namespace

void depthwise_conv2d(const PackedConv2D& k, Isa isa, const int32_t* x, int32_t* y, std::vector<int32_t>& plane,
                      std::vector<int32_t>& acc, std::vector<int64_t>& sums) {
  const Conv2DParams& p = k.params;
  const int64_t oh = k.out_h, ow = k.out_w, sy = p.strides[0], sx = p.strides[1];
  const int64_t dy = p.dilations[0], dx = p.dilations[1], kh = p.kernel_h, kw = p.kernel_w;
  const int64_t pixels = oh * ow, mg = p.out_channels / p.group, taps = kh * kw;
  if (pixels <= 0) return;
  PhasedPlane layout;
  layout.phases = sx;
  layout.rows = (oh - 1) * sy + (kh - 1) * dy + 1;
  layout.width = ow + (kw - 1) * dx / sx;
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(taps));
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int64_t kx = 0; kx < kw; ++kx) {
      const int64_t column = kx * dx;
      offsets.push_back(((column % sx) * layout.rows + ky * dy) * layout.width + column / sx);
    }
  const auto plane_size = static_cast<size_t>(layout.size());
  if (plane.size() < plane_size) plane.resize(plane_size);
  // Chunked: the taps sum in int32 without the bias, once per weight half (each into its own
  // half of acc), and the halves and the bias add up in int64.
  const bool chunked = k.chunk_pairs > 0, split = !k.taps_low.empty();
  const auto acc_size = static_cast<size_t>(split ? 2 * pixels : pixels);
  if (acc.size() < acc_size) acc.resize(acc_size);
  if (chunked && !split && sums.size() < static_cast<size_t>(pixels)) sums.resize(static_cast<size_t>(pixels));
  // The padding stays zero for the whole call: only the image part is rewritten per channel.
  std::fill(plane.begin(), plane.begin() + static_cast<std::ptrdiff_t>(plane_size), 0);
#ifdef QFLOW_FX_DEPTHWISE_AVX2
  // Pairs for kernels of 5x5 taps and more (25 -> 15 passes on PP-OCR cls's; a 3x3's 9 -> 6
  // did not repay building the pair plane on Fashion-MNIST), not for a 1-wide output, where
  // taps of consecutive rows would be neighbours in memory. Split int16 weights on AVX-512
  // pair any kernel: both halves go in one pass of vpdpwssd instead of two of vpmulld.
  const bool halves = split && isa == Isa::Avx512Vnni;
  const bool pairable = isa != Isa::Portable && (taps >= 25 || (halves && taps > 1)) && ow > 1;
  const TapPairs tp = pairable ? pair_taps(offsets, layout.width) : TapPairs{};
  const bool paired = pairable && tp.offsets.size() < offsets.size();
  const Dot dot = !paired                   ? Dot::Mullo
                  : isa == Isa::Avx512Vnni ? Dot::PairsAvx512
                  : isa == Isa::AvxVnni    ? Dot::PairsAvxVnni
                                           : Dot::Pairs;
  std::vector<int32_t> weights(paired ? tp.offsets.size() : 0), weights_low(paired && halves ? tp.offsets.size() : 0);
#endif
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      const int32_t* xc = x + (n * p.in_channels + g) * p.in_h * p.in_w;
#ifdef QFLOW_FX_DEPTHWISE_AVX2
      if (paired) fill_pair_plane(p, layout, xc, p.input.zero_point, plane.data());
      else
#endif
        fill_plane(p, isa, layout, xc, p.input.zero_point, plane.data());
      for (int64_t r = 0; r < mg; ++r) {
        const int64_t m = g * mg + r;
        const int32_t bias = k.bias[static_cast<size_t>(g * k.group_rows + r)];
        auto accumulate = [&](const int32_t* w, int32_t init, int32_t* out) {
#ifdef QFLOW_FX_DEPTHWISE_AVX2
          if (paired) {
            for (size_t t = 0; t < weights.size(); ++t) weights[t] = weight_pair(w, tp.taps[t]);
            accumulate_avx2(dot, plane.data(), layout, tp.offsets, weights.data(), sy, oh, ow, init, out);
          } else if (isa != Isa::Portable) {
            accumulate_avx2(Dot::Mullo, plane.data(), layout, offsets, w, sy, oh, ow, init, out);
          } else
#endif
            accumulate_portable(plane.data(), layout, offsets, w, sy, oh, ow, init, out);
        };
        const Multiplier mult = k.multipliers[static_cast<size_t>(m)];
        int32_t* ym = y + (n * p.out_channels + m) * pixels;
        if (!chunked) {
          accumulate(k.taps.data() + m * taps, bias, acc.data());
          requantize_row(isa, acc.data(), pixels, mult, p.output.zero_point, k.lo, k.hi, ym, 1);
          continue;
        }
#ifdef QFLOW_FX_DEPTHWISE_AVX2
        if (paired && halves) {
          for (size_t t = 0; t < weights.size(); ++t) {
            weights[t] = weight_pair(k.taps.data() + m * taps, tp.taps[t]);
            weights_low[t] = weight_pair(k.taps_low.data() + m * taps, tp.taps[t]);
          }
          accumulate_halves_avx512(plane.data(), layout, tp.offsets, weights.data(), weights_low.data(), sy, oh, ow,
                                   acc.data(), acc.data() + pixels);
          requantize_halves_row(isa, acc.data(), acc.data() + pixels, bias, pixels, mult, p.output.zero_point, k.lo, k.hi,
                                ym, 1);
          continue;
        }
#endif
        accumulate(k.taps.data() + m * taps, 0, acc.data());
        if (split) {  // the halves combine in the epilogue
          accumulate(k.taps_low.data() + m * taps, 0, acc.data() + pixels);
          requantize_halves_row(isa, acc.data(), acc.data() + pixels, bias, pixels, mult, p.output.zero_point, k.lo, k.hi,
                                ym, 1);
          continue;
        }
        for (int64_t i = 0; i < pixels; ++i) sums[static_cast<size_t>(i)] = bias + int64_t{acc[static_cast<size_t>(i)]};
        requantize_wide_row(isa, sums.data(), pixels, mult, p.output.zero_point, k.lo, k.hi, ym, 1);
      }
    }
}

}  // namespace qflow::fx::fast::detail
