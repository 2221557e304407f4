// The int16 x int16 -> int32 block product of the fast kernels: a portable version and x86-64
// versions (AVX2 pmaddwd, AVX-VNNI and AVX-512 VNNI vpdpwssd) chosen at run time.
#include <cstring>

#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FAST_X86 1
#endif

namespace qflow::fx::fast {
namespace {

void gemm_portable(const int16_t* w, int64_t rows, const int16_t* x, int64_t cols, int64_t depth, const int32_t* init,
                   int32_t* out, int64_t ld) {
  for (int64_t r = 0; r < rows; r += kRowBlock)
    for (int64_t c = 0; c < cols; c += kColBlock) {
      int32_t acc[kRowBlock][kColBlock] = {};
      for (int64_t i = 0; i < kRowBlock; ++i) {
        const int16_t* wr = w + (r + i) * depth;
        for (int64_t j = 0; j < kColBlock; ++j) {
          const int16_t* xc = x + (c + j) * depth;
          int32_t s = 0;
          for (int64_t k = 0; k < depth; ++k) s += int32_t{wr[k]} * int32_t{xc[k]};
          acc[i][j] = s;
        }
      }
      for (int64_t i = 0; i < kRowBlock; ++i)
        for (int64_t j = 0; j < kColBlock; ++j) out[(r + i) * ld + c + j] = init[r + i] + acc[i][j];
    }
}

#ifdef QFLOW_FAST_X86
// One kernel body for the three x86 variants; DOT(acc, a, b) adds the pairwise products of
// a and b to acc. 4 x 2 accumulators, reduced across lanes once per block.
#define QFLOW_GEMM_BODY(DOT)                                                                        \
  for (int64_t r = 0; r < rows; r += 4) {                                                           \
    const int16_t* w0 = w + r * depth;                                                              \
    const int16_t* w1 = w0 + depth;                                                                 \
    const int16_t* w2 = w1 + depth;                                                                 \
    const int16_t* w3 = w2 + depth;                                                                 \
    for (int64_t c = 0; c < cols; c += 2) {                                                         \
      const int16_t* x0 = x + c * depth;                                                            \
      const int16_t* x1 = x0 + depth;                                                               \
      __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,  \
              a30 = a00, a31 = a00;                                                                 \
      for (int64_t k = 0; k < depth; k += 16) {                                                     \
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + k));            \
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1 + k));            \
        __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + k));                   \
        a00 = DOT(a00, u, v0);                                                                      \
        a01 = DOT(a01, u, v1);                                                                      \
        u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1 + k));                           \
        a10 = DOT(a10, u, v0);                                                                      \
        a11 = DOT(a11, u, v1);                                                                      \
        u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w2 + k));                           \
        a20 = DOT(a20, u, v0);                                                                      \
        a21 = DOT(a21, u, v1);                                                                      \
        u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w3 + k));                           \
        a30 = DOT(a30, u, v0);                                                                      \
        a31 = DOT(a31, u, v1);                                                                      \
      }                                                                                             \
      const __m128i i4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(init + r));               \
      const __m256i s0 = _mm256_hadd_epi32(_mm256_hadd_epi32(a00, a10), _mm256_hadd_epi32(a20, a30)); \
      const __m256i s1 = _mm256_hadd_epi32(_mm256_hadd_epi32(a01, a11), _mm256_hadd_epi32(a21, a31)); \
      const __m128i c0 = _mm_add_epi32(i4, _mm_add_epi32(_mm256_castsi256_si128(s0),                \
                                                         _mm256_extracti128_si256(s0, 1)));         \
      const __m128i c1 = _mm_add_epi32(i4, _mm_add_epi32(_mm256_castsi256_si128(s1),                \
                                                         _mm256_extracti128_si256(s1, 1)));         \
      alignas(16) int32_t t0[4], t1[4];                                                             \
      _mm_store_si128(reinterpret_cast<__m128i*>(t0), c0);                                          \
      _mm_store_si128(reinterpret_cast<__m128i*>(t1), c1);                                          \
      for (int64_t i = 0; i < 4; ++i) {                                                             \
        out[(r + i) * ld + c] = t0[i];                                                              \
        out[(r + i) * ld + c + 1] = t1[i];                                                          \
      }                                                                                             \
    }                                                                                               \
  }

#define QFLOW_DOT_AVX2(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#define QFLOW_DOT_AVXVNNI(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#define QFLOW_DOT_AVX512VNNI(acc, a, b) _mm256_dpwssd_epi32(acc, a, b)

__attribute__((target("avx2"))) void gemm_avx2(const int16_t* w, int64_t rows, const int16_t* x, int64_t cols,
                                               int64_t depth, const int32_t* init, int32_t* out, int64_t ld) {
  QFLOW_GEMM_BODY(QFLOW_DOT_AVX2)
}

__attribute__((target("avx2,avxvnni"))) void gemm_avxvnni(const int16_t* w, int64_t rows, const int16_t* x,
                                                          int64_t cols, int64_t depth, const int32_t* init,
                                                          int32_t* out, int64_t ld) {
  QFLOW_GEMM_BODY(QFLOW_DOT_AVXVNNI)
}

__attribute__((target("avx2,avx512vl,avx512vnni"))) void gemm_avx512vnni(const int16_t* w, int64_t rows,
                                                                         const int16_t* x, int64_t cols,
                                                                         int64_t depth, const int32_t* init,
                                                                         int32_t* out, int64_t ld) {
  QFLOW_GEMM_BODY(QFLOW_DOT_AVX512VNNI)
}
#endif

}  // namespace

void gemm_s16(Isa isa, const int16_t* w, int64_t rows, const int16_t* x, int64_t cols, int64_t depth,
              const int32_t* init, int32_t* out, int64_t ld) {
#ifdef QFLOW_FAST_X86
  switch (isa) {
    case Isa::Avx512Vnni: return gemm_avx512vnni(w, rows, x, cols, depth, init, out, ld);
    case Isa::AvxVnni: return gemm_avxvnni(w, rows, x, cols, depth, init, out, ld);
    case Isa::Avx2: return gemm_avx2(w, rows, x, cols, depth, init, out, ld);
    case Isa::Portable: break;
  }
#else
  (void)isa;
#endif
  gemm_portable(w, rows, x, cols, depth, init, out, ld);
}

}  // namespace qflow::fx::fast
