// sgemm: Goto-style blocking. For each block of kSgemmKc steps of depth and kNc columns, B is
// taken packed in 16-column strips (a kc x 16 strip stays in L1 while the tile walks down A),
// A in 6-row strips per kMc rows (the A block stays in L2), and a 6x16 register tile
// accumulates (6x32 over two strips with AVX-512). Operands packed once by the caller skip
// their packing pass. The AVX2 and AVX-512 tiles are compiled through target attributes, so
// the binary still runs (on the portable tile) on CPUs without them.
#include "framework/interpreter/kernels/sgemm.h"

#include <algorithm>
#include <atomic>
#include <new>

#include "qflow/runtime/isa_cap.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "framework/interpreter/kernels/strip_fma.h"
#define QFLOW_SGEMM_AVX2 1
#endif

namespace qflow {

namespace {

constexpr int64_t kMr = kSgemmMr;
constexpr int64_t kNr = kSgemmNr;
constexpr int64_t kKc = kSgemmKc;
constexpr int64_t kMc = 96;    // rows of A per block: 96 x 256 floats (96 KiB) stay in L2
constexpr int64_t kNc = 2048;  // columns of B per block: 256 x 2048 floats (2 MiB) stay in L3
static_assert(kMc % kMr == 0 && kNc % kNr == 0, "blocks hold whole strips");

int64_t round_up(int64_t v, int64_t step) { return (v + step - 1) / step * step; }

// Packs A[mc x kc] (already offset to the block's first element) into strips of kMr rows,
// zero-padded: strip s holds, for each p, the kMr values A[s*kMr + r][p].
void pack_a_block(SgemmOperand a, int64_t mc, int64_t kc, float* out) {
  for (int64_t i0 = 0; i0 < mc; i0 += kMr) {
    const int64_t h = std::min(kMr, mc - i0);
    const float* rows = a.data + i0 * a.row_stride;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = rows + p * a.col_stride;
      int64_t r = 0;
      for (; r < h; ++r) out[r] = src[r * a.row_stride];
      for (; r < kMr; ++r) out[r] = 0.0f;
      out += kMr;
    }
  }
}

// Packs B[kc x nc] (already offset) into strips of kNr columns, zero-padded: strip s holds
// rows 0..kc-1 of columns s*kNr .. s*kNr+15 contiguously.
void pack_b_block(SgemmOperand b, int64_t kc, int64_t nc, float* out) {
  for (int64_t j0 = 0; j0 < nc; j0 += kNr) {
    const int64_t w = std::min(kNr, nc - j0);
    const float* columns = b.data + j0 * b.col_stride;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = columns + p * b.row_stride;
      int64_t j = 0;
      if (b.col_stride == 1) {
        for (; j < w; ++j) out[j] = src[j];
      } else {
        for (; j < w; ++j) out[j] = src[j * b.col_stride];
      }
      for (; j < kNr; ++j) out[j] = 0.0f;
      out += kNr;
    }
  }
}

// c[kMr x kNr] (pitch ldc) = (accumulate ? c : 0) + a_strip * b_strip over kc steps.
using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);

void micro_kernel_portable(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  float acc[kMr][kNr];
  for (int64_t r = 0; r < kMr; ++r)
    for (int64_t q = 0; q < kNr; ++q) acc[r][q] = accumulate ? c[r * ldc + q] : 0.0f;
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t r = 0; r < kMr; ++r)
      for (int64_t q = 0; q < kNr; ++q) acc[r][q] += a[r] * b[q];
    a += kMr;
    b += kNr;
  }
  for (int64_t r = 0; r < kMr; ++r)
    for (int64_t q = 0; q < kNr; ++q) c[r * ldc + q] = acc[r][q];
}

#ifdef QFLOW_SGEMM_AVX2

static_assert(kMr == 6 && kNr == 16, "the AVX2 tile is written out for 6 x 16");

// Twelve named accumulators, not an array: GCC keeps an array of __m256 on the stack and
// stores it back on every step.
__attribute__((target("avx2,fma"))) void micro_kernel_avx2(int64_t kc, const float* a, const float* b, float* c,
                                                           int64_t ldc, bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if (accumulate) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    QFLOW_STRIP_FMA6_AVX2(c, a, b0, b1)
    a += kMr;
    b += kNr;
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

// Two adjacent B strips at once, c[6 x 32] = (accumulate ? c : 0) + a_strip * [b0 | b1]: one
// 512-bit register per 16 columns, so twelve accumulators again. Each element is the same
// fused multiply-add chain as on the AVX2 tile, so the bits do not depend on which ran.
__attribute__((target("avx512f"))) void pair_kernel_avx512(int64_t kc, const float* a, const float* b0,
                                                            const float* b1, float* c, int64_t ldc, bool accumulate) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if (accumulate) {
    c00 = _mm512_loadu_ps(c), c01 = _mm512_loadu_ps(c + 16);
    c10 = _mm512_loadu_ps(c + ldc), c11 = _mm512_loadu_ps(c + ldc + 16);
    c20 = _mm512_loadu_ps(c + 2 * ldc), c21 = _mm512_loadu_ps(c + 2 * ldc + 16);
    c30 = _mm512_loadu_ps(c + 3 * ldc), c31 = _mm512_loadu_ps(c + 3 * ldc + 16);
    c40 = _mm512_loadu_ps(c + 4 * ldc), c41 = _mm512_loadu_ps(c + 4 * ldc + 16);
    c50 = _mm512_loadu_ps(c + 5 * ldc), c51 = _mm512_loadu_ps(c + 5 * ldc + 16);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 x0 = _mm512_loadu_ps(b0), x1 = _mm512_loadu_ps(b1);
    QFLOW_STRIP_FMA6_AVX512(c, a, x0, x1)
    a += kMr;
    b0 += kNr;
    b1 += kNr;
  }
  _mm512_storeu_ps(c, c00), _mm512_storeu_ps(c + 16, c01);
  _mm512_storeu_ps(c + ldc, c10), _mm512_storeu_ps(c + ldc + 16, c11);
  _mm512_storeu_ps(c + 2 * ldc, c20), _mm512_storeu_ps(c + 2 * ldc + 16, c21);
  _mm512_storeu_ps(c + 3 * ldc, c30), _mm512_storeu_ps(c + 3 * ldc + 16, c31);
  _mm512_storeu_ps(c + 4 * ldc, c40), _mm512_storeu_ps(c + 4 * ldc + 16, c41);
  _mm512_storeu_ps(c + 5 * ldc, c50), _mm512_storeu_ps(c + 5 * ldc + 16, c51);
}

// One B strip, c[6 x 16]: one 512-bit register per row, for the strip left over after the
// pairs and for partial tiles; the same chains as the other FMA tiles.
__attribute__((target("avx512f"))) void micro_kernel_avx512(int64_t kc, const float* a, const float* b, float* c,
                                                             int64_t ldc, bool accumulate) {
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  if (accumulate) {
    c0 = _mm512_loadu_ps(c), c1 = _mm512_loadu_ps(c + ldc), c2 = _mm512_loadu_ps(c + 2 * ldc);
    c3 = _mm512_loadu_ps(c + 3 * ldc), c4 = _mm512_loadu_ps(c + 4 * ldc), c5 = _mm512_loadu_ps(c + 5 * ldc);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 x = _mm512_loadu_ps(b);
    c0 = _mm512_fmadd_ps(_mm512_set1_ps(a[0]), x, c0);
    c1 = _mm512_fmadd_ps(_mm512_set1_ps(a[1]), x, c1);
    c2 = _mm512_fmadd_ps(_mm512_set1_ps(a[2]), x, c2);
    c3 = _mm512_fmadd_ps(_mm512_set1_ps(a[3]), x, c3);
    c4 = _mm512_fmadd_ps(_mm512_set1_ps(a[4]), x, c4);
    c5 = _mm512_fmadd_ps(_mm512_set1_ps(a[5]), x, c5);
    a += kMr;
    b += kNr;
  }
  _mm512_storeu_ps(c, c0), _mm512_storeu_ps(c + ldc, c1), _mm512_storeu_ps(c + 2 * ldc, c2);
  _mm512_storeu_ps(c + 3 * ldc, c3), _mm512_storeu_ps(c + 4 * ldc, c4), _mm512_storeu_ps(c + 5 * ldc, c5);
}

// The first 8 columns of one B strip, c[6 x 8]: for a last strip of at most 8 columns, which
// the 16-wide tiles would mostly compute on padding. Same chains as the other FMA tiles.
__attribute__((target("avx2,fma"))) void narrow_kernel_avx2(int64_t kc, const float* a, const float* b, float* c,
                                                            int64_t ldc, bool accumulate) {
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  if (accumulate) {
    c0 = _mm256_loadu_ps(c), c1 = _mm256_loadu_ps(c + ldc), c2 = _mm256_loadu_ps(c + 2 * ldc);
    c3 = _mm256_loadu_ps(c + 3 * ldc), c4 = _mm256_loadu_ps(c + 4 * ldc), c5 = _mm256_loadu_ps(c + 5 * ldc);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 x = _mm256_loadu_ps(b);
    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a), x, c0);
    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), x, c1);
    c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), x, c2);
    c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), x, c3);
    c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), x, c4);
    c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), x, c5);
    a += kMr;
    b += kNr;
  }
  _mm256_storeu_ps(c, c0), _mm256_storeu_ps(c + ldc, c1), _mm256_storeu_ps(c + 2 * ldc, c2);
  _mm256_storeu_ps(c + 3 * ldc, c3), _mm256_storeu_ps(c + 4 * ldc, c4), _mm256_storeu_ps(c + 5 * ldc, c5);
}

bool cpu_supports(SgemmIsa isa) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == SgemmIsa::Avx2) return avx2;
  return avx2 && __builtin_cpu_supports("avx512f");
}

#endif

// The best supported ISA until sgemm_set_isa picks another.
std::atomic<SgemmIsa>& active_isa() {
  static std::atomic<SgemmIsa> isa{sgemm_isa_supported(SgemmIsa::Avx512) ? SgemmIsa::Avx512
                                   : sgemm_isa_supported(SgemmIsa::Avx2) ? SgemmIsa::Avx2
                                                                         : SgemmIsa::Portable};
  return isa;
}

// A 6 x 32 tile over two adjacent B strips (null: none).
using PairKernel = void (*)(int64_t kc, const float* a, const float* b0, const float* b1, float* c, int64_t ldc,
                            bool accumulate);

struct MicroKernels {
  MicroKernel single = micro_kernel_portable;
  PairKernel pair = nullptr;
  MicroKernel narrow = nullptr;  // 6 x 8 for a last strip of at most 8 columns (null: single)
};

MicroKernels micro_kernels() {
  MicroKernels kernels;
#ifdef QFLOW_SGEMM_AVX2
  const SgemmIsa isa = sgemm_isa();
  if (isa == SgemmIsa::Avx2) kernels.single = micro_kernel_avx2;
  if (isa == SgemmIsa::Avx512) kernels.single = micro_kernel_avx512, kernels.pair = pair_kernel_avx512;
  if (isa != SgemmIsa::Portable) kernels.narrow = narrow_kernel_avx2;
#endif
  return kernels;
}

// A kMr x Width tile of C at ct, of which h rows and w columns lie inside C, computed by
// run(c, ldc, accumulate). Partial tiles go through a full-size buffer, so a kernel never
// touches memory past C.
template <int64_t Width, typename Run>
void edge_safe(int64_t h, int64_t w, float* ct, int64_t ldc, bool accumulate, Run&& run) {
  if (h == kMr && w == Width) {
    run(ct, ldc, accumulate);
    return;
  }
  alignas(64) float edge[kMr * Width];
  for (int64_t r = 0; r < h; ++r)
    for (int64_t q = 0; q < w; ++q) edge[r * Width + q] = accumulate ? ct[r * ldc + q] : 0.0f;
  run(edge, Width, true);
  for (int64_t r = 0; r < h; ++r)
    for (int64_t q = 0; q < w; ++q) ct[r * ldc + q] = edge[r * Width + q];
}

// C[mc x nc] (+)= a packed A block times a packed B block of depth kc, two full B strips at a
// time where the pair kernel exists.
void macro_kernel(const MicroKernels& kernels, int64_t mc, int64_t nc, int64_t kc, const float* a, const float* b,
                  float* c, int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < nc;) {
    const float* bs = b + (j / kNr) * kc * kNr;
    const bool pair = kernels.pair && j + 2 * kNr <= nc;
    const int64_t w = std::min(kNr, nc - j);
    for (int64_t i = 0; i < mc; i += kMr) {
      const float* as = a + (i / kMr) * kc * kMr;
      const int64_t h = std::min(kMr, mc - i);
      float* ct = c + i * ldc + j;
      if (pair) {
        edge_safe<2 * kNr>(h, 2 * kNr, ct, ldc, accumulate, [&](float* to, int64_t pitch, bool add) {
          kernels.pair(kc, as, bs, bs + kc * kNr, to, pitch, add);
        });
      } else {
        const MicroKernel kernel = w <= kNr / 2 && kernels.narrow ? kernels.narrow : kernels.single;
        edge_safe<kNr>(h, w, ct, ldc, accumulate, [&](float* to, int64_t pitch, bool add) {
          kernel(kc, as, bs, to, pitch, add);
        });
      }
    }
    j += pair ? 2 * kNr : kNr;
  }
}

// The calling thread's packing buffer for one operand side, kept between calls.
float* scratch(int side, int64_t n) {
  thread_local SgemmBuffer buffers[2];
  buffers[side].reserve(n);
  return buffers[side].data.get();
}

// Where the driver gets packed blocks: from a buffer packed once (`packed`, with the padded
// size of the other dimension) or by packing `operand` into the thread's scratch.
struct Source {
  const float* packed = nullptr;
  int64_t padded = 0;
  SgemmOperand operand;
  int64_t first_strip = 0;  // packed B: the strip column 0 of the product is in
};

// A[ic .. ic+mc) x [pc .. pc+kc) as packed strips.
const float* a_block(const Source& a, int64_t ic, int64_t mc, int64_t pc, int64_t kc) {
  if (a.packed) return a.packed + pc * a.padded + (ic / kMr) * kc * kMr;
  float* out = scratch(0, kMc * kKc);
  pack_a_block({a.operand.data + ic * a.operand.row_stride + pc * a.operand.col_stride, a.operand.row_stride,
                a.operand.col_stride},
               mc, kc, out);
  return out;
}

// B[pc .. pc+kc) x [jc .. jc+nc) as packed strips.
const float* b_block(const Source& b, int64_t pc, int64_t kc, int64_t jc, int64_t nc) {
  if (b.packed) return b.packed + pc * b.padded + (b.first_strip + jc / kNr) * kc * kNr;
  float* out = scratch(1, kKc * kNc);
  pack_b_block({b.operand.data + pc * b.operand.row_stride + jc * b.operand.col_stride, b.operand.row_stride,
                b.operand.col_stride},
               kc, nc, out);
  return out;
}

void drive(int64_t m, int64_t n, int64_t k, const Source& a, const Source& b, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  const MicroKernels kernels = micro_kernels();
  for (int64_t jc = 0; jc < n; jc += kNc) {
    const int64_t nc = std::min(kNc, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKc) {
      const int64_t kc = std::min(kKc, k - pc);
      const float* bp = b_block(b, pc, kc, jc, nc);
      for (int64_t ic = 0; ic < m; ic += kMc) {
        const int64_t mc = std::min(kMc, m - ic);
        macro_kernel(kernels, mc, nc, kc, a_block(a, ic, mc, pc, kc), bp, c + ic * ldc + jc, ldc, pc > 0);
      }
    }
  }
}

}  // namespace

void SgemmBuffer::reserve(int64_t n) {
  if (n <= size) return;
  const std::size_t bytes = static_cast<std::size_t>(round_up(n * static_cast<int64_t>(sizeof(float)), 64));
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  data.reset(p);
  size = n;
}

SgemmPackedA sgemm_pack_a(int64_t m, int64_t k, SgemmOperand a) {
  SgemmPackedA packed;
  packed.m = m;
  packed.k = k;
  const int64_t padded = round_up(m, kMr);
  packed.buffer.reserve(padded * k);
  for (int64_t pc = 0; pc < k; pc += kKc)
    pack_a_block({a.data + pc * a.col_stride, a.row_stride, a.col_stride}, m, std::min(kKc, k - pc),
                 packed.buffer.data.get() + pc * padded);
  return packed;
}

SgemmPackedB sgemm_pack_b(int64_t k, int64_t n, SgemmOperand b) {
  SgemmPackedB packed;
  packed.k = k;
  packed.n = n;
  const int64_t padded = round_up(n, kNr);
  packed.buffer.reserve(padded * k);
  for (int64_t pc = 0; pc < k; pc += kKc)
    pack_b_block({b.data + pc * b.row_stride, b.row_stride, b.col_stride}, std::min(kKc, k - pc), n,
                 packed.buffer.data.get() + pc * padded);
  return packed;
}

int64_t sgemm_packed_b_size(int64_t k, int64_t n) { return k * round_up(n, kNr); }

SgemmPackedBRow sgemm_packed_b_row(float* packed, int64_t k, int64_t n, int64_t p) {
  const int64_t pc = p / kKc * kKc, kc = std::min(kKc, k - pc);
  return {packed + pc * round_up(n, kNr) + (p - pc) * kNr, kc * kNr};
}

void sgemm_clear_packed_b_padding(float* packed, int64_t k, int64_t n) {
  const int64_t used = n % kNr;
  if (used == 0) return;
  for (int64_t p = 0; p < k; ++p) {
    float* last = sgemm_packed_b_row(packed, k, n, p).at(n - used);
    std::fill(last + used, last + kNr, 0.0f);
  }
}

void sgemm(int64_t m, int64_t n, int64_t k, SgemmOperand a, SgemmOperand b, float* c, int64_t ldc) {
  drive(m, n, k, Source{nullptr, 0, a}, Source{nullptr, 0, b}, c, ldc);
}

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc) {
  sgemm(m, n, k, SgemmOperand{a, lda, 1}, SgemmOperand{b, ldb, 1}, c, ldc);
}

void sgemm(const SgemmPackedA& a, int64_t n, SgemmOperand b, float* c, int64_t ldc) {
  drive(a.m, n, a.k, Source{a.data(), round_up(a.m, kMr), {}}, Source{nullptr, 0, b}, c, ldc);
}

void sgemm_prepacked_b(const SgemmPackedA& a, int64_t n, const float* packed_b, float* c, int64_t ldc) {
  drive(a.m, n, a.k, Source{a.data(), round_up(a.m, kMr), {}}, Source{packed_b, round_up(n, kNr), {}}, c, ldc);
}

void sgemm(int64_t m, SgemmOperand a, const SgemmPackedB& b, float* c, int64_t ldc) {
  drive(m, b.n, b.k, Source{nullptr, 0, a}, Source{b.data(), round_up(b.n, kNr), {}}, c, ldc);
}

void sgemm_columns(int64_t m, SgemmOperand a, const SgemmPackedB& b, int64_t first, int64_t count, float* c,
                   int64_t ldc) {
  drive(m, count, b.k, Source{nullptr, 0, a}, Source{b.data(), round_up(b.n, kNr), {}, first / kNr}, c, ldc);
}

bool sgemm_isa_supported(SgemmIsa isa) {
  if (isa == SgemmIsa::Portable) return true;
#ifdef QFLOW_SGEMM_AVX2
  static const bool avx2 = cpu_supports(SgemmIsa::Avx2), avx512 = cpu_supports(SgemmIsa::Avx512);
  return isa == SgemmIsa::Avx2 ? avx2 : avx512;
#else
  return false;
#endif
}

SgemmIsa sgemm_isa() {
  // The instruction-set cap (QFLOW_ISA, --isa) bounds whatever tile is active.
  const SgemmIsa active = active_isa().load(std::memory_order_relaxed);
  const SgemmIsa ceiling = isa::allows(isa::Level::avx512) ? SgemmIsa::Avx512
                           : isa::allows(isa::Level::avx2) ? SgemmIsa::Avx2
                                                           : SgemmIsa::Portable;
  return std::min(active, ceiling);
}

bool sgemm_set_isa(SgemmIsa isa) {
  if (!sgemm_isa_supported(isa)) return false;
  active_isa().store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace qflow
