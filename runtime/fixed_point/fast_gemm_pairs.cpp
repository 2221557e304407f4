// The pixel-major block product of the fast conv2d: weights are broadcast, pixels run along the
// vector lanes, so the accumulators come out as rows of output pixels (no horizontal sums) and the
// input tile is built by contiguous row copies instead of per-pixel gathers. Each int32 lane
// holds a pair of int16 (two consecutive reduction indices), multiplied by pmaddwd / vpdpwssd.
#include "fixed_point/fast_dpwssd.h"
#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FAST_X86 1
#endif

namespace qflow::fx::fast {
namespace {

void pairs_portable(const int16_t* w, int64_t rows, const int16_t* x, int64_t cols, int64_t pairs, const int32_t* init,
                    int32_t* out, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const int16_t* wr = w + (r / kRowBlock) * pairs * 2 * kRowBlock + (r % kRowBlock) * 2;
    int32_t* o = out + r * ld;
    for (int64_t c = 0; c < cols; ++c) o[c] = init[r];
    for (int64_t k = 0; k < pairs; ++k) {
      const int32_t w0 = wr[k * 2 * kRowBlock], w1 = wr[k * 2 * kRowBlock + 1];
      const int16_t* xk = x + k * cols * 2;
      for (int64_t c = 0; c < cols; ++c) o[c] += w0 * xk[2 * c] + w1 * xk[2 * c + 1];
    }
  }
}

#ifdef QFLOW_FAST_X86
// 4 weight rows x 16 pixels per block: 8 accumulators, one weight pair broadcast per row.
#define QFLOW_PAIRS_BODY(DOT)                                                                          \
  for (int64_t r = 0; r < rows; r += 4) {                                                              \
    const int32_t* wb = reinterpret_cast<const int32_t*>(w + r * pairs * 2);                           \
    for (int64_t c = 0; c < cols; c += 16) {                                                           \
      __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,     \
              a30 = a00, a31 = a00;                                                                    \
      const int16_t* xc = x + c * 2;                                                                   \
      for (int64_t k = 0; k < pairs; ++k) {                                                            \
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc + k * cols * 2));    \
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc + k * cols * 2 + 16)); \
        __m256i u = _mm256_set1_epi32(wb[k * 4]);                                                      \
        a00 = DOT(a00, u, v0);                                                                         \
        a01 = DOT(a01, u, v1);                                                                         \
        u = _mm256_set1_epi32(wb[k * 4 + 1]);                                                          \
        a10 = DOT(a10, u, v0);                                                                         \
        a11 = DOT(a11, u, v1);                                                                         \
        u = _mm256_set1_epi32(wb[k * 4 + 2]);                                                          \
        a20 = DOT(a20, u, v0);                                                                         \
        a21 = DOT(a21, u, v1);                                                                         \
        u = _mm256_set1_epi32(wb[k * 4 + 3]);                                                          \
        a30 = DOT(a30, u, v0);                                                                         \
        a31 = DOT(a31, u, v1);                                                                         \
      }                                                                                                \
      __m256i b = _mm256_set1_epi32(init[r]);                                                          \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ld + c), _mm256_add_epi32(a00, b));     \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ld + c + 8), _mm256_add_epi32(a01, b)); \
      b = _mm256_set1_epi32(init[r + 1]);                                                              \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + 1) * ld + c), _mm256_add_epi32(a10, b)); \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + 1) * ld + c + 8), _mm256_add_epi32(a11, b)); \
      b = _mm256_set1_epi32(init[r + 2]);                                                              \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + 2) * ld + c), _mm256_add_epi32(a20, b)); \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + 2) * ld + c + 8), _mm256_add_epi32(a21, b)); \
      b = _mm256_set1_epi32(init[r + 3]);                                                              \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + 3) * ld + c), _mm256_add_epi32(a30, b)); \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + 3) * ld + c + 8), _mm256_add_epi32(a31, b)); \
    }                                                                                                  \
  }

#define QFLOW_PAIR_AVX2(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#define QFLOW_PAIR_AVXVNNI(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#define QFLOW_PAIR_AVX512VNNI(acc, a, b) _mm256_dpwssd_epi32(acc, a, b)

__attribute__((target("avx2"))) void pairs_avx2(const int16_t* w, int64_t rows, const int16_t* x, int64_t cols,
                                                int64_t pairs, const int32_t* init, int32_t* out, int64_t ld) {
  QFLOW_PAIRS_BODY(QFLOW_PAIR_AVX2)
}

__attribute__((target("avx2,avxvnni"))) void pairs_avxvnni(const int16_t* w, int64_t rows, const int16_t* x,
                                                           int64_t cols, int64_t pairs, const int32_t* init,
                                                           int32_t* out, int64_t ld) {
  QFLOW_PAIRS_BODY(QFLOW_PAIR_AVXVNNI)
}

// 8 weight rows x 32 pixels of AVX-512 at columns [c, c + 32), rows r..r+7: two blocks of
// kRowBlock rows, [pairs][4][2] each.
#define QFLOW_ROW_AVX512(j, weight)              \
  {                                              \
    const __m512i u = _mm512_set1_epi32(weight); \
    detail::dpwssd_avx512(a##j##0, u, v0);       \
    detail::dpwssd_avx512(a##j##1, u, v1);       \
  }
#define QFLOW_STORE_AVX512(j)                                                              \
  {                                                                                        \
    const __m512i b = _mm512_set1_epi32(init[r + j]);                                      \
    _mm512_storeu_si512(out + (r + j) * ld + c, _mm512_add_epi32(a##j##0, b));             \
    if (kWide) _mm512_storeu_si512(out + (r + j) * ld + c + 16, _mm512_add_epi32(a##j##1, b)); \
  }

// kWide: 32 pixels (two zmm per row); else 16, the second accumulators unused.
template <bool kWide>
__attribute__((target("avx512f,avx512vnni"))) inline void pairs_block_avx512(const int16_t* w, const int16_t* x,
                                                                              int64_t cols, int64_t pairs,
                                                                              const int32_t* init, int32_t* out,
                                                                              int64_t ld, int64_t r, int64_t c) {
  const int32_t* wa = reinterpret_cast<const int32_t*>(w + r * pairs * 2);
  const int32_t* wb = reinterpret_cast<const int32_t*>(w + (r + 4) * pairs * 2);
  const int16_t* xc = x + c * 2;
  __m512i a00 = _mm512_setzero_si512(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00,
          a40 = a00, a41 = a00, a50 = a00, a51 = a00, a60 = a00, a61 = a00, a70 = a00, a71 = a00;
  for (int64_t k = 0; k < pairs; ++k) {
    const __m512i v0 = _mm512_loadu_si512(xc + k * cols * 2);
    const __m512i v1 = kWide ? _mm512_loadu_si512(xc + k * cols * 2 + 32) : v0;
    QFLOW_ROW_AVX512(0, wa[k * 4])
    QFLOW_ROW_AVX512(1, wa[k * 4 + 1])
    QFLOW_ROW_AVX512(2, wa[k * 4 + 2])
    QFLOW_ROW_AVX512(3, wa[k * 4 + 3])
    QFLOW_ROW_AVX512(4, wb[k * 4])
    QFLOW_ROW_AVX512(5, wb[k * 4 + 1])
    QFLOW_ROW_AVX512(6, wb[k * 4 + 2])
    QFLOW_ROW_AVX512(7, wb[k * 4 + 3])
  }
  QFLOW_STORE_AVX512(0)
  QFLOW_STORE_AVX512(1)
  QFLOW_STORE_AVX512(2)
  QFLOW_STORE_AVX512(3)
  QFLOW_STORE_AVX512(4)
  QFLOW_STORE_AVX512(5)
  QFLOW_STORE_AVX512(6)
  QFLOW_STORE_AVX512(7)
}
#undef QFLOW_ROW_AVX512
#undef QFLOW_STORE_AVX512

// AVX-512 VNNI: vpdpwssd on zmm issues at nearly the rate of the ymm form, so twice the products
// per cycle. 8 weight rows x 32 pixels, 16 accumulators (enough independent sums to hide the
// latency), with the column blocks outside so that a block of x (pairs x 32 pixels) stays in
// L1 while the weight rows stream past; a last block of 16 pixels takes one zmm per row, the
// last 4 rows of a row count that is not a multiple of 8 the 4-row ymm body.
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) void pairs_avx512vnni(const int16_t* w, int64_t rows,
                                                                                  const int16_t* x, int64_t cols,
                                                                                  int64_t pairs, const int32_t* init,
                                                                                  int32_t* out, int64_t ld) {
  const int64_t eight = rows / 8 * 8, wide = cols / 32 * 32;
  for (int64_t c = 0; c < wide; c += 32)
    for (int64_t r = 0; r < eight; r += 8) pairs_block_avx512<true>(w, x, cols, pairs, init, out, ld, r, c);
  if (wide < cols)
    for (int64_t r = 0; r < eight; r += 8) pairs_block_avx512<false>(w, x, cols, pairs, init, out, ld, r, wide);
  if (eight == rows) return;
  w += eight * pairs * 2;
  init += eight;
  out += eight * ld;
  rows -= eight;
  QFLOW_PAIRS_BODY(QFLOW_PAIR_AVX512VNNI)
}

// Interleaves two int16 rows: out[2i] = a[i], out[2i + 1] = b[i] (n a multiple of 16).
__attribute__((target("avx2"))) void interleave_avx2(const int16_t* a, const int16_t* b, int64_t n, int16_t* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i lo = _mm256_unpacklo_epi16(va, vb), hi = _mm256_unpackhi_epi16(va, vb);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}
#endif

}  // namespace

void gemm_pairs_s16(Isa isa, const int16_t* w, int64_t rows, const int16_t* x, int64_t cols, int64_t pairs,
                    const int32_t* init, int32_t* out, int64_t ld) {
#ifdef QFLOW_FAST_X86
  switch (isa) {
    case Isa::Avx512Vnni: return pairs_avx512vnni(w, rows, x, cols, pairs, init, out, ld);
    case Isa::AvxVnni: return pairs_avxvnni(w, rows, x, cols, pairs, init, out, ld);
    case Isa::Avx2: return pairs_avx2(w, rows, x, cols, pairs, init, out, ld);
    case Isa::Portable: break;
  }
#else
  (void)isa;
#endif
  pairs_portable(w, rows, x, cols, pairs, init, out, ld);
}

void interleave_s16(Isa isa, const int16_t* a, const int16_t* b, int64_t n, int16_t* out) {
#ifdef QFLOW_FAST_X86
  if (isa != Isa::Portable) return interleave_avx2(a, b, n, out);
#else
  (void)isa;
#endif
  for (int64_t i = 0; i < n; ++i) {
    out[2 * i] = a[i];
    out[2 * i + 1] = b[i];
  }
}

}  // namespace qflow::fx::fast
