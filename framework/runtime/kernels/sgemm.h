// Single-precision GEMM for the float kernels: an AVX2/FMA packed kernel picked at run time
// when the CPU has it, Eigen's product otherwise.
#pragma once

#include <cstdint>

namespace qflow {

// C[m x n] = A[m x k] * B[k x n], all row-major with the given row pitches. Every element
// of C is summed over k in increasing order by one call, whatever the caller's threading:
// results depend on the shapes only.
void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc);

// True when sgemm uses the AVX2/FMA kernel on this CPU.
bool sgemm_uses_avx2();

}  // namespace qflow
