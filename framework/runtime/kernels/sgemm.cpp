// sgemm: B packed into 16-column strips and A into 6-row strips per cache block, a 6x16
// register tile accumulated with FMA; compiled for AVX2 through target attributes so the
// binary still runs (on the Eigen path) on CPUs without it.
#include "framework/runtime/kernels/sgemm.h"

#include <algorithm>
#include <vector>

#include "framework/runtime/kernels/eigen_maps.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_SGEMM_AVX2 1
#endif

namespace qflow {

namespace {

void sgemm_eigen(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc) {
  matrix_view(c, m, n, ldc).noalias() = matrix_view(a, m, k, lda) * matrix_view(b, k, n, ldb);
}

#ifdef QFLOW_SGEMM_AVX2

constexpr int64_t kMr = 6;     // rows of the register tile
constexpr int64_t kNr = 16;    // columns of the register tile (two 8-float vectors)
constexpr int64_t kKc = 256;   // depth of a packed block: a 6x256 A strip and 256x16 B strip stay in L1
constexpr int64_t kMc = 96;    // rows of A packed per block (fits L2 with the B panel)

// Packs B[kc x nc] into strips of kNr columns, zero-padded: strip s holds rows 0..kc-1 of
// columns s*kNr .. s*kNr+15 contiguously.
void pack_b(const float* b, int64_t ldb, int64_t kc, int64_t nc, float* out) {
  for (int64_t j0 = 0; j0 < nc; j0 += kNr) {
    const int64_t w = std::min(kNr, nc - j0);
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b + p * ldb + j0;
      int64_t j = 0;
      for (; j < w; ++j) out[j] = src[j];
      for (; j < kNr; ++j) out[j] = 0.0f;
      out += kNr;
    }
  }
}

// Packs A[mc x kc] into strips of kMr rows, zero-padded: strip s holds, for each p, the kMr
// values A[s*kMr + r][p].
void pack_a(const float* a, int64_t lda, int64_t mc, int64_t kc, float* out) {
  for (int64_t i0 = 0; i0 < mc; i0 += kMr) {
    const int64_t h = std::min(kMr, mc - i0);
    for (int64_t p = 0; p < kc; ++p) {
      int64_t r = 0;
      for (; r < h; ++r) out[r] = a[(i0 + r) * lda + p];
      for (; r < kMr; ++r) out[r] = 0.0f;
      out += kMr;
    }
  }
}

// c[kMr x kNr] (pitch ldc) = (accumulate ? c : 0) + a_strip * b_strip over kc.
__attribute__((target("avx2,fma"))) void micro_kernel(int64_t kc, const float* a, const float* b, float* c,
                                                      int64_t ldc, bool accumulate) {
  __m256 acc[kMr][2];
  for (int64_t r = 0; r < kMr; ++r) {
    if (accumulate) {
      acc[r][0] = _mm256_loadu_ps(c + r * ldc);
      acc[r][1] = _mm256_loadu_ps(c + r * ldc + 8);
    } else {
      acc[r][0] = _mm256_setzero_ps();
      acc[r][1] = _mm256_setzero_ps();
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    for (int64_t r = 0; r < kMr; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
    a += kMr;
    b += kNr;
  }
  for (int64_t r = 0; r < kMr; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
  }
}

void sgemm_avx2(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                int64_t ldc) {
  thread_local std::vector<float> a_pack, b_pack;
  const int64_t n_padded = (n + kNr - 1) / kNr * kNr;
  b_pack.resize(static_cast<std::size_t>(std::min(k, kKc) * n_padded));
  a_pack.resize(static_cast<std::size_t>(kMc * std::min(k, kKc)));
  float edge[kMr * kNr];
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    const bool accumulate = p0 > 0;
    pack_b(b + p0 * ldb, ldb, kc, n, b_pack.data());
    for (int64_t i0 = 0; i0 < m; i0 += kMc) {
      const int64_t mc = std::min(kMc, m - i0);
      pack_a(a + i0 * lda + p0, lda, mc, kc, a_pack.data());
      for (int64_t j = 0; j < n; j += kNr) {
        const float* bs = b_pack.data() + (j / kNr) * kc * kNr;
        const int64_t w = std::min(kNr, n - j);
        for (int64_t i = 0; i < mc; i += kMr) {
          const float* as = a_pack.data() + (i / kMr) * kc * kMr;
          const int64_t h = std::min(kMr, mc - i);
          float* ct = c + (i0 + i) * ldc + j;
          if (h == kMr && w == kNr) {
            micro_kernel(kc, as, bs, ct, ldc, accumulate);
            continue;
          }
          // Edge tile: through a full-size buffer, so the kernel never touches memory past C.
          for (int64_t r = 0; r < h; ++r)
            for (int64_t q = 0; q < w; ++q) edge[r * kNr + q] = accumulate ? ct[r * ldc + q] : 0.0f;
          micro_kernel(kc, as, bs, edge, kNr, true);
          for (int64_t r = 0; r < h; ++r)
            for (int64_t q = 0; q < w; ++q) ct[r * ldc + q] = edge[r * kNr + q];
        }
      }
    }
  }
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#endif

}  // namespace

bool sgemm_uses_avx2() {
#ifdef QFLOW_SGEMM_AVX2
  static const bool has = cpu_has_avx2();
  return has;
#else
  return false;
#endif
}

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc) {
  if (m <= 0 || n <= 0) return;
#ifdef QFLOW_SGEMM_AVX2
  if (sgemm_uses_avx2()) return sgemm_avx2(m, n, k, a, lda, b, ldb, c, ldc);
#endif
  sgemm_eigen(m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace qflow
