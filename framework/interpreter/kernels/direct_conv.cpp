// Direct 2-D convolution on the sgemm's instruction sets (see direct_conv.h).
#include "framework/interpreter/kernels/direct_conv.h"

#include <algorithm>

#include "framework/interpreter/kernels/sgemm.h"
#include "framework/interpreter/kernels/strip_fma.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_DIRECT_CONV_X86 1
#endif

namespace qflow {

namespace {

constexpr int64_t kStrip = kDirectConvStrip;

using Tap = DirectConvPlan::Tap;

// The window columns a chunk reads at most: wider windows take the GEMM.
constexpr int64_t kMaxWindowColumns = 16;

// One chunk of an output row: positions `column` .. column + len - 1 of image row `row`
// (the output row times the stride). `origin` is the image at (row, column): tap p reads
// from origin + taps[p].offset. Per window column j, the lanes that read inside the image
// and the chunk (bit t: lane t); `inside` when every lane of every tap does, rows included.
struct Chunk {
  const Tap* taps;
  int64_t k;  // im2col rows
  int64_t height, width;
  int64_t row, column, len;
  const float* origin;
  bool inside;
  uint32_t lanes[kMaxWindowColumns];
};

#ifdef QFLOW_DIRECT_CONV_X86

// Loads of one tap's 32 columns into x0, x1: in place when the chunk reads inside the image
// on every tap, else masked, the padding and the columns past the chunk loading zero (masked
// lanes are never read).
#define QFLOW_DIRECT_LOAD_AVX512(c, p)                                                            \
  __m512 x0 = zero, x1 = zero;                                                                   \
  if (c.inside) {                                                                                 \
    const float* src = c.origin + c.taps[p].offset;                                               \
    x0 = _mm512_loadu_ps(src);                                                                    \
    x1 = _mm512_loadu_ps(src + 16);                                                               \
  } else if (const int64_t y = c.row + c.taps[p].dy; y >= 0 && y < c.height) {                    \
    const float* src = c.origin + c.taps[p].offset;                                               \
    const uint32_t bits = c.lanes[c.taps[p].column];                                              \
    x0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits & 0xffffu), src);                      \
    x1 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits >> 16), src + 16);                     \
  }

__attribute__((target("avx512f"))) inline void store_avx512(const Chunk& c, const __m512 (&acc)[kStrip][2], float* out,
                                                            int64_t ldc, int64_t rows) {
  const uint32_t keep = c.len >= 32 ? ~0u : (1u << c.len) - 1;
  for (int64_t r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(out + r * ldc, static_cast<__mmask16>(keep & 0xffffu), acc[r][0]);
    _mm512_mask_storeu_ps(out + r * ldc + 16, static_cast<__mmask16>(keep >> 16), acc[r][1]);
  }
}

// Six channels x 32 columns; named accumulators as in sgemm's tiles (an array of vectors
// would live on the stack).
__attribute__((target("avx512f"))) void chunk_avx512(const Chunk& c, const float* w, float* out, int64_t ldc,
                                                     int64_t rows) {
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
  __m512 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t p = 0; p < c.k; ++p, w += kStrip) {
    QFLOW_DIRECT_LOAD_AVX512(c, p)
    QFLOW_STRIP_FMA6_AVX512(a, w, x0, x1)
  }
  store_avx512(c, {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}, {a40, a41}, {a50, a51}}, out, ldc, rows);
}

// Two strips (twelve channels) x 32 columns: each loaded image vector feeds twelve
// multiply-adds instead of six (a 96 -> 24 channel 3x3 conv at 160x160, 1 thread: 12.2 -> 9.0 ms
// on a Xeon with avx2 avx512f avx_vnni avx512_vnni).
// `rows`: the second strip's channels (1 to 6).
__attribute__((target("avx512f"))) void chunk_pair_avx512(const Chunk& c, const float* w, const float* v, float* out,
                                                          int64_t ldc, int64_t rows) {
  __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
  __m512 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  __m512 b00 = a00, b01 = a00, b10 = a00, b11 = a00, b20 = a00, b21 = a00;
  __m512 b30 = a00, b31 = a00, b40 = a00, b41 = a00, b50 = a00, b51 = a00;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t p = 0; p < c.k; ++p, w += kStrip, v += kStrip) {
    QFLOW_DIRECT_LOAD_AVX512(c, p)
    QFLOW_STRIP_FMA6_AVX512(a, w, x0, x1)
    QFLOW_STRIP_FMA6_AVX512(b, v, x0, x1)
  }
  store_avx512(c, {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}, {a40, a41}, {a50, a51}}, out, ldc, kStrip);
  store_avx512(c, {{b00, b01}, {b10, b11}, {b20, b21}, {b30, b31}, {b40, b41}, {b50, b51}}, out + kStrip * ldc, ldc,
               rows);
}

#undef QFLOW_DIRECT_LOAD_AVX512

// Lanes of 8 set where bit t of `bits` (from `first`) is.
__attribute__((target("avx2"))) inline __m256i lane_mask(uint32_t bits, int first) {
  const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i selected = _mm256_and_si256(_mm256_set1_epi32(static_cast<int>((bits >> first) & 0xffu)), lanes);
  return _mm256_cmpeq_epi32(selected, lanes);
}

// Six channels x 16 columns.
__attribute__((target("avx2,fma"))) void chunk_avx2(const Chunk& c, const float* w, float* out, int64_t ldc,
                                                    int64_t rows) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t p = 0; p < c.k; ++p, w += kStrip) {
    const Tap& t = c.taps[p];
    __m256 x0 = zero, x1 = zero;
    if (c.inside) {
      x0 = _mm256_loadu_ps(c.origin + t.offset);
      x1 = _mm256_loadu_ps(c.origin + t.offset + 8);
    } else if (const int64_t y = c.row + t.dy; y >= 0 && y < c.height) {
      const uint32_t bits = c.lanes[t.column];
      x0 = _mm256_maskload_ps(c.origin + t.offset, lane_mask(bits, 0));
      x1 = _mm256_maskload_ps(c.origin + t.offset + 8, lane_mask(bits, 8));
    }
    QFLOW_STRIP_FMA6_AVX2(c, w, x0, x1)
  }
  const __m256 acc[kStrip][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  const uint32_t keep = c.len >= 16 ? 0xffffu : (1u << c.len) - 1;
  const __m256i keep0 = lane_mask(keep, 0), keep1 = lane_mask(keep, 8);
  for (int64_t r = 0; r < rows; ++r) {
    _mm256_maskstore_ps(out + r * ldc, keep0, acc[r][0]);
    _mm256_maskstore_ps(out + r * ldc + 8, keep1, acc[r][1]);
  }
}

#endif

}  // namespace

std::unique_ptr<DirectConvWeights> DirectConvWeights::make(const Tensor& weight, int64_t group) {
  if (weight.dtype() != DType::Float32 || weight.rank() != 4 || group != 1) return nullptr;
  const int64_t m = weight.dim(0);
  if (m <= 0 || m > kDirectConvMaxChannels) return nullptr;
  // A 1x1 window is a pointwise conv (sgemm reads its image in place) and a window wider than
  // kMaxWindowColumns takes the GEMM: no strips for those.
  if ((weight.dim(2) == 1 && weight.dim(3) == 1) || weight.dim(3) > kMaxWindowColumns) return nullptr;
  std::unique_ptr<DirectConvWeights> made(new DirectConvWeights());
  made->m_ = m;
  made->k_ = weight.numel() / m;
  const int64_t strips = (m + kStrip - 1) / kStrip;
  made->strips_.assign(static_cast<std::size_t>(strips * made->k_ * kStrip), 0.0f);
  const float* w = weight.data<float>();
  for (int64_t o = 0; o < m; ++o)
    for (int64_t p = 0; p < made->k_; ++p)
      made->strips_[static_cast<std::size_t>(((o / kStrip) * made->k_ + p) * kStrip + o % kStrip)] = w[o * made->k_ + p];
  return made;
}

bool direct_conv_fits(const ConvGeometry& g) {
#ifdef QFLOW_DIRECT_CONV_X86
  return g.rank() == 2 && g.group == 1 && !g.is_pointwise() && g.strides[1] == 1 &&
         g.kernel[1] <= kMaxWindowColumns && sgemm_isa() != SgemmIsa::Portable;
#else
  (void)g;
  return false;
#endif
}

DirectConvPlan::DirectConvPlan(const DirectConvWeights& weights, const ConvGeometry& g)
    : weights_(weights),
      height_(g.in_spatial[0]),
      width_(g.in_spatial[1]),
      out_width_(g.out_spatial[1]),
      stride_h_(g.strides[0]) {
  const int64_t kh = g.kernel[0], kw = g.kernel[1];
  for (int64_t j = 0; j < kw; ++j) column_dx_.push_back(j * g.dilations[1] - g.pads_begin[1]);
  taps_.resize(static_cast<std::size_t>(weights.rows()));
  for (int64_t p = 0; p < weights.rows(); ++p) {
    const int64_t c = p / (kh * kw), i = (p / kw) % kh, j = p % kw;
    const int64_t dy = i * g.dilations[0] - g.pads_begin[0], dx = column_dx_[static_cast<std::size_t>(j)];
    taps_[static_cast<std::size_t>(p)] = {c * height_ * width_ + dy * width_ + dx, dy, j};
    min_dy_ = std::min(min_dy_, dy);
    max_dy_ = std::max(max_dy_, dy);
  }
}

void DirectConvPlan::tile(const float* image, int64_t col_begin, int64_t count, float* out, int64_t ldc) const {
#ifdef QFLOW_DIRECT_CONV_X86
  const bool wide = sgemm_isa() == SgemmIsa::Avx512;
  const int64_t lanes = wide ? 32 : 16;
  const int64_t strips = (weights_.channels() + kStrip - 1) / kStrip;
  Chunk chunk{taps_.data(), weights_.rows(), height_, width_, 0, 0, 0, image, true, {}};
  for (int64_t col = col_begin, end = col_begin + count; col < end;) {
    const int64_t oh = col / out_width_, ow = col % out_width_;
    const int64_t len = std::min(out_width_ - ow, end - col);
    chunk.row = oh * stride_h_;
    const bool rows_inside = chunk.row + min_dy_ >= 0 && chunk.row + max_dy_ < height_;
    for (int64_t x = 0; x < len; x += lanes) {
      chunk.column = ow + x;
      chunk.len = std::min(lanes, len - x);
      chunk.origin = image + chunk.row * width_ + chunk.column;
      chunk.inside = rows_inside && chunk.len == lanes;
      for (std::size_t j = 0; j < column_dx_.size(); ++j) {
        // Lanes [lo, hi) read image columns inside the row.
        const int64_t start = chunk.column + column_dx_[j];
        const int64_t lo = std::max<int64_t>(0, -start), hi = std::min(chunk.len, width_ - start);
        chunk.lanes[j] = lo < hi ? static_cast<uint32_t>(((uint64_t{1} << hi) - 1) & ~((uint64_t{1} << lo) - 1)) : 0;
        chunk.inside = chunk.inside && lo == 0 && hi == lanes;
      }
      float* dst = out + (col - col_begin) + x;
      int64_t s = 0;
      // AVX-512 has the registers for two strips at once (24 accumulators).
      for (; wide && s + 1 < strips; s += 2)
        chunk_pair_avx512(chunk, weights_.strip(s), weights_.strip(s + 1), dst + s * kStrip * ldc, ldc,
                          std::min(kStrip, weights_.channels() - (s + 1) * kStrip));
      for (; s < strips; ++s) {
        const int64_t rows = std::min(kStrip, weights_.channels() - s * kStrip);
        if (wide) chunk_avx512(chunk, weights_.strip(s), dst + s * kStrip * ldc, ldc, rows);
        else chunk_avx2(chunk, weights_.strip(s), dst + s * kStrip * ldc, ldc, rows);
      }
    }
    col += len;
  }
#else
  (void)image, (void)col_begin, (void)count, (void)out, (void)ldc;
#endif
}

}  // namespace qflow
