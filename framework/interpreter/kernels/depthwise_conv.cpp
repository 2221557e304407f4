// Depthwise convolution of one plane. The plane is laid out as `phases` (the column stride)
// zero-padded copies, phase p holding the padded columns p, p + sw, p + 2 sw, ...: tap (ky, kx)
// of output (oy, ox) is then element ox of one contiguous row, whatever the stride, dilation
// or padding, so the loops below have no bounds tests. Products are added in (ky, kx) order,
// padding included: a padded zero adds w * 0 = +-0, which leaves every sum that started at +0
// unchanged, so the result equals the sum over the taps inside the image alone.
#include "framework/interpreter/kernels/depthwise_conv.h"

#include <algorithm>
#include <type_traits>

#include "qflow/runtime/isa_cap.h"
#include "qflow/runtime/vector_groups.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_DEPTHWISE_AVX2 1
#endif

namespace qflow {

namespace {

using vector_groups::for_each_vector_group;

// Elements after the last phase row that a vector load at a row's end may read.
constexpr int64_t kOverRead = 16;

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
    } else {  // a masked store: a copy of the lanes was a memmove call per row end
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes[i]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      _mm256_maskstore_ps(out + dst[i], mask, acc[i]);
    }
  }
}

// All outputs of a plane, in groups of kVectorGroup vectors along the rows.
void accumulate_avx2(const float* q, const float* weights, const std::vector<int64_t>& taps, int64_t oh, int64_t ow,
                     int64_t row_step, float* out) {
  const auto tap_count = static_cast<int64_t>(taps.size());
  for_each_vector_group(oh, ow, row_step, 8, [&]<int N>(const int64_t* at, const int64_t* dst, const int* lanes) {
    vectors_avx2<N>(q, weights, taps.data(), tap_count, out, at, dst, lanes);
  });
}

// vectors_avx2 with 16 outputs a vector. The file is compiled with -ffp-contract=off
// (AVX-512F implies FMA), so each product is rounded before the add here too: the same bits.
template <int N>
__attribute__((target("avx512f"))) void vectors_avx512(const float* q, const float* weights, const int64_t* taps,
                                                       int64_t tap_count, float* out, const int64_t* at,
                                                       const int64_t* dst, const int* lanes) {
  __m512 acc[N];
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t t = 0; t < tap_count; ++t) {
    const __m512 w = _mm512_set1_ps(weights[t]);
    const float* src = q + taps[t];
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(w, _mm512_loadu_ps(src + at[i])));
  }
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) {
    if (lanes[i] == 16) _mm512_storeu_ps(out + dst[i], acc[i]);
    else _mm512_mask_storeu_ps(out + dst[i], static_cast<__mmask16>((1u << lanes[i]) - 1u), acc[i]);
  }
}

void accumulate_avx512(const float* q, const float* weights, const std::vector<int64_t>& taps, int64_t oh, int64_t ow,
                       int64_t row_step, float* out) {
  const auto tap_count = static_cast<int64_t>(taps.size());
  for_each_vector_group(oh, ow, row_step, 16, [&]<int N>(const int64_t* at, const int64_t* dst, const int* lanes) {
    vectors_avx512<N>(q, weights, taps.data(), tap_count, out, at, dst, lanes);
  });
}

// rows x len floats from src (row pitch src_pitch) to dst (pitch dst_pitch): whole vectors,
// then one masked vector, so a short row costs a few instructions and nothing outside the
// rows is read or written.
__attribute__((target("avx2"))) void copy_rows_avx2(const float* src, int64_t src_pitch, float* dst,
                                                    int64_t dst_pitch, int64_t rows, int64_t len) {
  const int64_t whole = len / 8 * 8;
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(len - whole)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int64_t r = 0; r < rows; ++r, src += src_pitch, dst += dst_pitch) {
    for (int64_t j = 0; j < whole; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
    if (whole < len) _mm256_maskstore_ps(dst + whole, mask, _mm256_maskload_ps(src + whole, mask));
  }
}

#endif

}  // namespace

bool depthwise_isa_supported(DepthwiseIsa isa) {
  if (isa == DepthwiseIsa::Portable) return true;
#ifdef QFLOW_DEPTHWISE_AVX2
  static const bool avx2 = isa::cpu_has(isa::Level::avx2), avx512 = isa::cpu_has(isa::Level::avx512);
  return isa == DepthwiseIsa::Avx512 ? avx512 : avx2;
#else
  return false;
#endif
}

DepthwiseIsa depthwise_best_isa() {
  if (depthwise_isa_supported(DepthwiseIsa::Avx512) && isa::allows(isa::Level::avx512)) return DepthwiseIsa::Avx512;
  return depthwise_isa_supported(DepthwiseIsa::Avx2) && isa::allows(isa::Level::avx2) ? DepthwiseIsa::Avx2
                                                                                      : DepthwiseIsa::Portable;
}

DepthwisePlan::DepthwisePlan(const ConvGeometry& g) : g_(g), phases_(g.strides[1]) {
  const int64_t oh = g.out_spatial[0], ow = g.out_spatial[1];
  if (oh <= 0 || ow <= 0) return;
  // Strides, dilations and pads come from the file: sizes that overflow, like planes past
  // the budget below, take the direct loop.
  int64_t span = 0, size = 0;
  const bool overflow = __builtin_mul_overflow(oh - 1, g.strides[0], &rows_) ||
                        __builtin_mul_overflow(g.kernel[0] - 1, g.dilations[0], &span) ||
                        __builtin_add_overflow(rows_, span + 1, &rows_) ||
                        __builtin_mul_overflow(g.kernel[1] - 1, g.dilations[1], &width_) ||
                        __builtin_add_overflow(ow, width_ / phases_, &width_) ||
                        __builtin_mul_overflow(phases_, rows_, &size) || __builtin_mul_overflow(size, width_, &size) ||
                        __builtin_add_overflow(size, kOverRead, &size);
  // Padding or strides far beyond the image (pads of 2^20, say) would make the plane mostly
  // zeros and larger than memory: such planes run the direct loop instead.
  const int64_t budget = 4 * (g.in_size() + g.out_size()) + 4096;
  if (overflow || size > budget) {
    rows_ = 0;
    size_ = 0;
    return;
  }
  size_ = size;
  for (int64_t ky = 0; ky < g.kernel[0]; ++ky)
    for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
      const int64_t column = kx * g.dilations[1];
      taps_.push_back(((column % phases_) * rows_ + ky * g.dilations[0]) * width_ + column / phases_);
    }
}

template <typename T>
void DepthwisePlan::clear(T* scratch) const {
  if (size_ == 0) return;
  std::fill(scratch, scratch + size_, T(0));
}

// Only the image's runs are written: the rest of the buffer is the padding clear() zeroed.
// Plain loops: rows are tens of elements, where a memcpy call per row costs more than the copy.
template <typename T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void DepthwisePlan::fill(const T* image, T* scratch,
                                                                                      bool avx2) const {
  const int64_t ih = g_.in_spatial[0], iw = g_.in_spatial[1], ph = g_.pads_begin[0], pw = g_.pads_begin[1];
  const int64_t sw = phases_;
  const int64_t y_begin = std::min(rows_, ph), y_end = std::max(y_begin, std::min(rows_, ih + ph));
  for (int64_t p = 0; p < sw; ++p) {
    // Column j of phase p is image column j * sw + shift.
    const int64_t shift = p - pw;
    const int64_t first = std::min(width_, shift >= 0 ? int64_t{0} : (-shift + sw - 1) / sw);
    const int64_t last = std::max(first, iw - 1 - shift < 0 ? int64_t{0} : std::min(width_, (iw - 1 - shift) / sw + 1));
#ifdef QFLOW_DEPTHWISE_AVX2
    if constexpr (std::is_same_v<T, float>) {
      if (sw == 1 && avx2 && last > first) {
        copy_rows_avx2(image + (y_begin - ph) * iw + shift + first, iw, scratch + y_begin * width_ + first, width_,
                       y_end - y_begin, last - first);
        continue;
      }
    }
#endif
    (void)avx2;  // without the AVX2 copy (other architectures)
    for (int64_t y = y_begin; y < y_end; ++y) {
      T* __restrict row = scratch + (p * rows_ + y) * width_;
      const T* __restrict line = image + (y - ph) * iw + shift;
      if (sw == 1)
        for (int64_t j = first; j < last; ++j) row[j] = line[j];
      else
        for (int64_t j = first; j < last; ++j) row[j] = line[j * sw];
    }
  }
}

// Without the padded plane: each tap updates the run of output columns whose input column is
// inside the image, rows outside it skipped; same sums, same order.
template <typename T>
void DepthwisePlan::direct(const T* image, const T* weights, T* out) const {
  const int64_t ih = g_.in_spatial[0], iw = g_.in_spatial[1], oh = g_.out_spatial[0], ow = g_.out_spatial[1];
  const int64_t kh = g_.kernel[0], kw = g_.kernel[1], sh = g_.strides[0], sw = g_.strides[1];
  const int64_t dh = g_.dilations[0], dw = g_.dilations[1], ph = g_.pads_begin[0], pw = g_.pads_begin[1];
  for (int64_t oy = 0; oy < oh; ++oy) {
    T* row = out + oy * ow;
    std::fill(row, row + ow, T(0));
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * sh - ph + ky * dh;
      if (iy < 0 || iy >= ih) continue;
      const T* line = image + iy * iw;
      for (int64_t kx = 0; kx < kw; ++kx) {
        const T w = weights[ky * kw + kx];
        const int64_t offset = kx * dw - pw;  // input column of output column ox: ox * sw + offset
        const int64_t first = offset >= 0 ? 0 : std::min(ow, (-offset + sw - 1) / sw);
        const int64_t last = iw - 1 - offset < 0 ? 0 : std::min(ow, (iw - 1 - offset) / sw + 1);
        for (int64_t ox = first; ox < last; ++ox) row[ox] += w * line[ox * sw + offset];
      }
    }
  }
}

// Row by row, tap by tap over the row: loops the compiler vectorizes for any type.
template <typename T>
void DepthwisePlan::accumulate_portable(const T* scratch, const T* weights, T* out) const {
  const int64_t oh = g_.out_spatial[0], ow = g_.out_spatial[1];
  for (int64_t oy = 0; oy < oh; ++oy) {
    T* __restrict row = out + oy * ow;
    std::fill(row, row + ow, T(0));
    const T* start = scratch + oy * g_.strides[0] * width_;
    for (std::size_t t = 0; t < taps_.size(); ++t) {
      const T w = weights[t];
      const T* __restrict src = start + taps_[t];
      for (int64_t ox = 0; ox < ow; ++ox) row[ox] += w * src[ox];
    }
  }
}

template <typename T>
void DepthwisePlan::run(const T* image, const T* weights, T* out, T* scratch, DepthwiseIsa isa) const {
  if (g_.out_spatial[0] <= 0 || g_.out_spatial[1] <= 0) return;
  if (rows_ == 0) {
    direct(image, weights, out);
    return;
  }
  // The vector loops, for float, only where the CPU has them, whatever the caller asked
  // (the AVX-512 level includes AVX2, whose copy loop the fill takes).
  const bool vectors = std::is_same_v<T, float> && isa != DepthwiseIsa::Portable && depthwise_isa_supported(isa);
  fill(image, scratch, vectors);
#ifdef QFLOW_DEPTHWISE_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (vectors) {
      const auto accumulate = isa == DepthwiseIsa::Avx512 ? accumulate_avx512 : accumulate_avx2;
      accumulate(scratch, weights, taps_, g_.out_spatial[0], g_.out_spatial[1], g_.strides[0] * width_, out);
      return;
    }
  }
#endif
  accumulate_portable(scratch, weights, out);
}

template void DepthwisePlan::clear(float*) const;
template void DepthwisePlan::clear(double*) const;

void DepthwisePlan::plane(const float* image, const float* weights, float* out, float* scratch,
                          DepthwiseIsa isa) const {
  run(image, weights, out, scratch, isa);
}

void DepthwisePlan::plane(const double* image, const double* weights, double* out, double* scratch,
                          DepthwiseIsa isa) const {
  run(image, weights, out, scratch, isa);
}

}  // namespace qflow
