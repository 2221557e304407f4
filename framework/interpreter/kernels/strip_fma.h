// The inner step of the six-row register tiles of sgemm and of the direct conv: accumulators
// <acc>r0 and <acc>r1 (two vectors of row r) += w[r] * (x0, x1), for r = 0 to 5 in order.
// Macros, because the accumulators must stay named registers: GCC keeps an array of vectors,
// or vectors passed by reference, on the stack. Use inside functions compiled for the
// instruction set (target("avx2,fma") or target("avx512f")).
#pragma once

#define QFLOW_STRIP_ROW_AVX2(acc, w, r, x0, x1)           \
  {                                                      \
    const __m256 weight_ = _mm256_broadcast_ss((w) + r); \
    acc##r##0 = _mm256_fmadd_ps(weight_, x0, acc##r##0); \
    acc##r##1 = _mm256_fmadd_ps(weight_, x1, acc##r##1); \
  }

#define QFLOW_STRIP_ROW_AVX512(acc, w, r, x0, x1)        \
  {                                                      \
    const __m512 weight_ = _mm512_set1_ps((w)[r]);       \
    acc##r##0 = _mm512_fmadd_ps(weight_, x0, acc##r##0); \
    acc##r##1 = _mm512_fmadd_ps(weight_, x1, acc##r##1); \
  }

#define QFLOW_STRIP_FMA6_AVX2(acc, w, x0, x1)                                                \
  QFLOW_STRIP_ROW_AVX2(acc, w, 0, x0, x1) QFLOW_STRIP_ROW_AVX2(acc, w, 1, x0, x1)           \
  QFLOW_STRIP_ROW_AVX2(acc, w, 2, x0, x1) QFLOW_STRIP_ROW_AVX2(acc, w, 3, x0, x1)           \
  QFLOW_STRIP_ROW_AVX2(acc, w, 4, x0, x1) QFLOW_STRIP_ROW_AVX2(acc, w, 5, x0, x1)

#define QFLOW_STRIP_FMA6_AVX512(acc, w, x0, x1)                                              \
  QFLOW_STRIP_ROW_AVX512(acc, w, 0, x0, x1) QFLOW_STRIP_ROW_AVX512(acc, w, 1, x0, x1)       \
  QFLOW_STRIP_ROW_AVX512(acc, w, 2, x0, x1) QFLOW_STRIP_ROW_AVX512(acc, w, 3, x0, x1)       \
  QFLOW_STRIP_ROW_AVX512(acc, w, 4, x0, x1) QFLOW_STRIP_ROW_AVX512(acc, w, 5, x0, x1)
