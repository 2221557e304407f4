// Depthwise convolution of one plane. The plane is laid out as `phases` (the column stride)
// zero-padded copies, phase p holding the padded columns p, p + sw, p + 2 sw, ...: tap (ky, kx)
// of output (oy, ox) is then element ox of one contiguous row, whatever the stride, dilation
// or padding, so the loops below have no bounds tests. Products are added in (ky, kx) order,
// padding included: a padded zero adds w * 0 = +-0, which leaves every sum that started at +0
// unchanged, so the result equals the sum over the taps inside the image alone.
#include "framework/runtime/kernels/depthwise_conv.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_DEPTHWISE_AVX2 1
#endif

namespace qflow {

namespace {

// Elements after the last phase row that a vector load at a row's end may read.
constexpr int64_t kOverRead = 8;

struct PhasedPlane {
  int64_t phases = 1;  // column stride sw
  int64_t rows = 0;    // padded rows the outputs read
  int64_t width = 0;   // columns of one phase row
  int64_t size() const { return phases * rows * width + kOverRead; }
  // Offset of tap (ky, kx) for output (0, 0).
  int64_t tap(const ConvGeometry& g, int64_t ky, int64_t kx) const {
    const int64_t column = kx * g.dilations[1];
    return ((column % phases) * rows + ky * g.dilations[0]) * width + column / phases;
  }
};

PhasedPlane phased_plane(const ConvGeometry& g) {
  PhasedPlane plane;
  const int64_t oh = g.out_spatial[0], ow = g.out_spatial[1];
  plane.phases = g.strides[1];
  if (oh <= 0 || ow <= 0) return plane;
  plane.rows = (oh - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1;
  plane.width = ow + (g.kernel[1] - 1) * g.dilations[1] / plane.phases;
  return plane;
}

// Plain loops, not memset/memcpy: rows are tens of elements, where a libc call per piece
// costs more than the copy.
template <typename T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void fill_phased(const T* image, const ConvGeometry& g,
                                                                              const PhasedPlane& plane, T* q) {
  const int64_t ih = g.in_spatial[0], iw = g.in_spatial[1], ph = g.pads_begin[0], pw = g.pads_begin[1];
  const int64_t sw = plane.phases, width = plane.width;
  for (int64_t p = 0; p < sw; ++p) {
    // Column j of phase p is image column j * sw + shift.
    const int64_t shift = p - pw;
    const int64_t first = std::min(width, shift >= 0 ? int64_t{0} : (-shift + sw - 1) / sw);
    const int64_t last = std::max(first, iw - 1 - shift < 0 ? int64_t{0} : std::min(width, (iw - 1 - shift) / sw + 1));
    for (int64_t y = 0; y < plane.rows; ++y) {
      T* __restrict row = q + (p * plane.rows + y) * width;
      const int64_t iy = y - ph;
      if (iy < 0 || iy >= ih) {
        for (int64_t j = 0; j < width; ++j) row[j] = T(0);
        continue;
      }
      const T* __restrict line = image + iy * iw + shift;
      for (int64_t j = 0; j < first; ++j) row[j] = T(0);
      if (sw == 1)
        for (int64_t j = first; j < last; ++j) row[j] = line[j];
      else
        for (int64_t j = first; j < last; ++j) row[j] = line[j * sw];
      for (int64_t j = last; j < width; ++j) row[j] = T(0);
    }
  }
  for (int64_t i = plane.size() - kOverRead; i < plane.size(); ++i) q[i] = T(0);
}

// Row by row, tap by tap over the row: loops the compiler vectorizes for any type.
template <typename T>
void plane_portable(const T* q, const T* weights, T* out, const ConvGeometry& g, const PhasedPlane& plane) {
  const int64_t oh = g.out_spatial[0], ow = g.out_spatial[1], kh = g.kernel[0], kw = g.kernel[1];
  for (int64_t oy = 0; oy < oh; ++oy) {
    T* __restrict row = out + oy * ow;
    std::fill(row, row + ow, T(0));
    const T* start = q + oy * g.strides[0] * plane.width;
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        const T w = weights[ky * kw + kx];
        const T* __restrict src = start + plane.tap(g, ky, kx);
        for (int64_t ox = 0; ox < ow; ++ox) row[ox] += w * src[ox];
      }
  }
}

#ifdef QFLOW_DEPTHWISE_AVX2

// N vectors of 8 outputs, each accumulated over all taps in a register: N independent add
// chains hide the add latency. `at[i]` is vector i's offset in the phased plane, `dst[i]` in
// the output, `lanes[i]` how many of its 8 outputs exist. No "fma" target: products are
// rounded before the add, as in the portable loop.
template <int N>
__attribute__((target("avx2"))) void vectors_avx2(const float* q, const float* weights, const int64_t* taps,
                                                  int64_t tap_count, float* out, const int64_t* at, const int64_t* dst,
                                                  const int* lanes) {
  __m256 acc[N];
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t t = 0; t < tap_count; ++t) {
    const __m256 w = _mm256_broadcast_ss(weights + t);
    const float* src = q + taps[t];
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(w, _mm256_loadu_ps(src + at[i])));
  }
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) {
    if (lanes[i] == 8) {
      _mm256_storeu_ps(out + dst[i], acc[i]);
    } else {
      alignas(32) float tail[8];
      _mm256_store_ps(tail, acc[i]);
      std::copy(tail, tail + lanes[i], out + dst[i]);
    }
  }
}

void plane_avx2(const float* q, const float* weights, float* out, const ConvGeometry& g, const PhasedPlane& plane) {
  constexpr int kGroup = 6;
  const int64_t oh = g.out_spatial[0], ow = g.out_spatial[1];
  const int64_t total = oh * ((ow + 7) / 8);
  // Tap offsets in (ky, kx) order, computed once: they take divisions by the stride.
  thread_local std::vector<int64_t> taps;
  taps.clear();
  for (int64_t ky = 0; ky < g.kernel[0]; ++ky)
    for (int64_t kx = 0; kx < g.kernel[1]; ++kx) taps.push_back(plane.tap(g, ky, kx));
  const int64_t tap_count = static_cast<int64_t>(taps.size());
  const int64_t row_step = g.strides[0] * plane.width;
  int64_t oy = 0, ox = 0;  // the next vector's first output
  for (int64_t v0 = 0; v0 < total; v0 += kGroup) {
    const int n = static_cast<int>(std::min<int64_t>(kGroup, total - v0));
    int64_t at[kGroup], dst[kGroup];
    int lanes[kGroup];
    for (int i = 0; i < n; ++i) {
      at[i] = oy * row_step + ox;
      dst[i] = oy * ow + ox;
      lanes[i] = static_cast<int>(std::min<int64_t>(8, ow - ox));
      ox += 8;
      if (ox >= ow) ox = 0, ++oy;
    }
    switch (n) {
      case 6: vectors_avx2<6>(q, weights, taps.data(), tap_count, out, at, dst, lanes); break;
      case 5: vectors_avx2<5>(q, weights, taps.data(), tap_count, out, at, dst, lanes); break;
      case 4: vectors_avx2<4>(q, weights, taps.data(), tap_count, out, at, dst, lanes); break;
      case 3: vectors_avx2<3>(q, weights, taps.data(), tap_count, out, at, dst, lanes); break;
      case 2: vectors_avx2<2>(q, weights, taps.data(), tap_count, out, at, dst, lanes); break;
      default: vectors_avx2<1>(q, weights, taps.data(), tap_count, out, at, dst, lanes); break;
    }
  }
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

#endif

template <typename T>
void run_plane(const T* image, const T* weights, T* out, const ConvGeometry& g, T* scratch, DepthwiseIsa isa) {
  const PhasedPlane plane = phased_plane(g);
  if (plane.rows == 0) return;
  fill_phased(image, g, plane, scratch);
#ifdef QFLOW_DEPTHWISE_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (isa == DepthwiseIsa::Avx2 && depthwise_isa_supported(isa)) {
      plane_avx2(scratch, weights, out, g, plane);
      return;
    }
  }
#endif
  (void)isa;
  plane_portable(scratch, weights, out, g, plane);
}

}  // namespace

bool depthwise_isa_supported(DepthwiseIsa isa) {
  if (isa == DepthwiseIsa::Portable) return true;
#ifdef QFLOW_DEPTHWISE_AVX2
  static const bool avx2 = cpu_has_avx2();
  return avx2;
#else
  return false;
#endif
}

DepthwiseIsa depthwise_best_isa() {
  return depthwise_isa_supported(DepthwiseIsa::Avx2) ? DepthwiseIsa::Avx2 : DepthwiseIsa::Portable;
}

int64_t depthwise_scratch_size(const ConvGeometry& g) {
  // Strides, dilations and pads come from the file: saturate instead of overflowing, so the
  // caller's memory check refuses the plane.
  const int64_t oh = g.out_spatial[0], ow = g.out_spatial[1];
  if (oh <= 0 || ow <= 0) return kOverRead;
  int64_t rows = 0, span = 0, width = 0, size = 0;
  const bool overflow = __builtin_mul_overflow(oh - 1, g.strides[0], &rows) ||
                        __builtin_mul_overflow(g.kernel[0] - 1, g.dilations[0], &span) ||
                        __builtin_add_overflow(rows, span + 1, &rows) ||
                        __builtin_mul_overflow(g.kernel[1] - 1, g.dilations[1], &width) ||
                        __builtin_add_overflow(ow, width / g.strides[1], &width) ||
                        __builtin_mul_overflow(g.strides[1], rows, &size) || __builtin_mul_overflow(size, width, &size) ||
                        __builtin_add_overflow(size, kOverRead, &size);
  return overflow ? std::numeric_limits<int64_t>::max() : size;
}

void depthwise_plane(const float* image, const float* weights, float* out, const ConvGeometry& g, float* scratch,
                     DepthwiseIsa isa) {
  run_plane(image, weights, out, g, scratch, isa);
}

void depthwise_plane(const double* image, const double* weights, double* out, const ConvGeometry& g,
                     double* scratch, DepthwiseIsa isa) {
  run_plane(image, weights, out, g, scratch, isa);
}

}  // namespace qflow
