// The float MatMul of the CPU segments (cpu_matmul.h): blocks of output columns held in double
// vector registers while the rows of B's column block stream past. The vector width follows the
// instruction-set cap; products and sums are separate operations (no contraction, see
// CMakeLists.txt), as in the scalar loop.
#include "lowered/cpu_matmul.h"

#include "qflow/runtime/isa_cap.h"

namespace qflow::lowered::detail {
namespace {

// Columns [j, j + H * L) of one output row: VD holds L doubles, VF the L floats of B they
// come from.
template <typename VD, typename VF, int64_t L, int64_t H>
__attribute__((always_inline)) inline void columns(const float* a, const float* b, float* y, int64_t k, int64_t n,
                                                   int64_t j) {
  VD acc[H] = {};
  for (int64_t p = 0; p < k; ++p) {
    const double av = a[p];
    for (int64_t h = 0; h < H; ++h) {
      VF bf;
      __builtin_memcpy(&bf, b + p * n + j + h * L, sizeof(VF));
      acc[h] = acc[h] + av * __builtin_convertvector(bf, VD);
    }
  }
  for (int64_t h = 0; h < H; ++h) {
    const VF out = __builtin_convertvector(acc[h], VF);
    __builtin_memcpy(y + j + h * L, &out, sizeof(VF));
  }
}

// Column blocks outside, rows inside: a block of B's columns (k x 4L floats) is read by every
// row while it is in cache, instead of all of B streaming from memory once per row.
template <typename VD, typename VF, int64_t L>
__attribute__((always_inline)) inline void matmul(const float* a, const float* b, float* y, int64_t m, int64_t k,
                                                  int64_t n) {
  int64_t j = 0;
  for (; j + 4 * L <= n; j += 4 * L)
    for (int64_t i = 0; i < m; ++i) columns<VD, VF, L, 4>(a + i * k, b, y + i * n, k, n, j);
  for (; j + L <= n; j += L)
    for (int64_t i = 0; i < m; ++i) columns<VD, VF, L, 1>(a + i * k, b, y + i * n, k, n, j);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t t = j; t < n; ++t) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) sum = sum + static_cast<double>(a[i * k + p]) * static_cast<double>(b[p * n + t]);
      y[i * n + t] = static_cast<float>(sum);
    }
}

typedef double D2 __attribute__((vector_size(16)));
typedef float F2 __attribute__((vector_size(8)));
typedef double D4 __attribute__((vector_size(32)));
typedef float F4 __attribute__((vector_size(16)));
typedef double D8 __attribute__((vector_size(64)));
typedef float F8 __attribute__((vector_size(32)));

void matmul_portable(const float* a, const float* b, float* y, int64_t m, int64_t k, int64_t n) {
  matmul<D2, F2, 2>(a, b, y, m, k, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void matmul_avx2(const float* a, const float* b, float* y, int64_t m, int64_t k,
                                                 int64_t n) {
  matmul<D4, F4, 4>(a, b, y, m, k, n);
}

__attribute__((target("avx512f"))) void matmul_avx512(const float* a, const float* b, float* y, int64_t m, int64_t k,
                                                      int64_t n) {
  matmul<D8, F8, 8>(a, b, y, m, k, n);
}
#endif

}  // namespace

void matmul_rows(const float* a, const float* b, float* y, int64_t m, int64_t k, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx512 && isa::allows(isa::Level::avx512)) return matmul_avx512(a, b, y, m, k, n);
  if (avx2 && isa::allows(isa::Level::avx2)) return matmul_avx2(a, b, y, m, k, n);
#endif
  matmul_portable(a, b, y, m, k, n);
}

}  // namespace qflow::lowered::detail
