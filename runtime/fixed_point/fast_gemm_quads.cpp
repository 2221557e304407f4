// The 8-bit block product of the fast conv2d on CPUs with VNNI: vpdpbusd multiplies four
// unsigned activation bytes by four signed weight bytes and adds the four products to an int32
// lane, four times the work per instruction of the int16 pairs (fast_gemm_pairs.cpp).
//
// Layout as for the pairs: pixels run along the lanes, weights are broadcast. Each int32 lane
// holds a quad (four consecutive reduction indices of one pixel); x is [quads][cols][4] uint8,
// w per block of kQuadRowBlock rows [quads][kQuadRowBlock][4] int8. The lanes add with
// wraparound: the packing folds the activation offset into `init` modulo 2^32, and the exact
// sum fits int32, so the wrapped lanes end on it (docs/fixed-point.md, "Fast kernels").
#include <array>

#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FAST_X86 1
#endif

namespace qflow::fx::fast {
namespace {

#ifdef QFLOW_FAST_X86
// 8 weight rows x 32 pixels: 16 zmm accumulators, one weight quad broadcast per row.
__attribute__((target("avx512f,avx512vnni"))) void quads_avx512vnni(const int8_t* w, int64_t rows, const uint8_t* x,
                                                                     int64_t cols, int64_t quads, const int32_t* init,
                                                                     int32_t* out, int64_t ld) {
  for (int64_t r = 0; r < rows; r += kQuadRowBlock) {
    const int32_t* wb = reinterpret_cast<const int32_t*>(w + r * quads * 4);
    for (int64_t c = 0; c < cols; c += 32) {
      __m512i acc[kQuadRowBlock][2];
#pragma GCC unroll 8
      for (int i = 0; i < kQuadRowBlock; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
      const uint8_t* xc = x + c * 4;
      for (int64_t q = 0; q < quads; ++q) {
        const __m512i v0 = _mm512_loadu_si512(xc + q * cols * 4);
        const __m512i v1 = _mm512_loadu_si512(xc + q * cols * 4 + 64);
        const int32_t* wq = wb + q * kQuadRowBlock;
#pragma GCC unroll 8
        for (int i = 0; i < kQuadRowBlock; ++i) {
          const __m512i u = _mm512_set1_epi32(wq[i]);
          acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], v0, u);
          acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], v1, u);
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < kQuadRowBlock; ++i) {
        const __m512i b = _mm512_set1_epi32(init[r + i]);
        _mm512_storeu_si512(out + (r + i) * ld + c, _mm512_add_epi32(acc[i][0], b));
        _mm512_storeu_si512(out + (r + i) * ld + c + 16, _mm512_add_epi32(acc[i][1], b));
      }
    }
  }
}

#if !defined(__clang__) || __clang_major__ >= 16
// 8 weight rows x 16 pixels: 16 ymm accumulators (AVX-VNNI has no 512-bit form).
__attribute__((target("avx2,avxvnni"))) void quads_avxvnni(const int8_t* w, int64_t rows, const uint8_t* x,
                                                           int64_t cols, int64_t quads, const int32_t* init,
                                                           int32_t* out, int64_t ld) {
  for (int64_t r = 0; r < rows; r += kQuadRowBlock) {
    const int32_t* wb = reinterpret_cast<const int32_t*>(w + r * quads * 4);
    for (int64_t c = 0; c < cols; c += 16) {
      __m256i acc[kQuadRowBlock][2];
#pragma GCC unroll 8
      for (int i = 0; i < kQuadRowBlock; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
      const uint8_t* xc = x + c * 4;
      for (int64_t q = 0; q < quads; ++q) {
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc + q * cols * 4));
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc + q * cols * 4 + 32));
        const int32_t* wq = wb + q * kQuadRowBlock;
#pragma GCC unroll 8
        for (int i = 0; i < kQuadRowBlock; ++i) {
          const __m256i u = _mm256_set1_epi32(wq[i]);
          acc[i][0] = _mm256_dpbusd_avx_epi32(acc[i][0], v0, u);
          acc[i][1] = _mm256_dpbusd_avx_epi32(acc[i][1], v1, u);
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < kQuadRowBlock; ++i) {
        const __m256i b = _mm256_set1_epi32(init[r + i]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + i) * ld + c), _mm256_add_epi32(acc[i][0], b));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (r + i) * ld + c + 8), _mm256_add_epi32(acc[i][1], b));
      }
    }
  }
}
#endif

// out[4i + j] = row j [i] for j < 4, i < n (n a multiple of 16): bytes to pixel quads.
__attribute__((target("avx2"))) void interleave4_avx2(const uint8_t* const rows[4], int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[0] + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[1] + i));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[2] + i));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[3] + i));
    const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
    const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
    uint8_t* o = out + 4 * i;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_unpacklo_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16), _mm_unpackhi_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 32), _mm_unpacklo_epi16(ab_hi, cd_hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 48), _mm_unpackhi_epi16(ab_hi, cd_hi));
  }
}

// The even bytes of 4 rows, 16 of each at a time, with AVX-512 VBMI: the 31 bytes each row
// spans go in pairs of rows into two registers, and one vpermt2b picks the 64 quad bytes.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void interleave4_even_vbmi(const uint8_t* const rows[4],
                                                                                 int64_t n, uint8_t* out) {
  // Byte 4i + j of the output: row j's byte 2i, rows 0 and 1 in `ab`, 2 and 3 in `cd` (index + 64).
  alignas(64) static constexpr auto order = [] {
    std::array<uint8_t, 64> o{};
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 4; ++j) o[static_cast<size_t>(4 * i + j)] = static_cast<uint8_t>((j / 2) * 64 + (j % 2) * 32 + 2 * i);
    return o;
  }();
  const __m512i index = _mm512_load_si512(order.data());
  constexpr __mmask64 span = (__mmask64{1} << 31) - 1;  // bytes 0..30: the last even one is 30
  for (int64_t i = 0; i < n; i += 16) {
    __m512i r[4];
    for (int j = 0; j < 4; ++j) r[j] = _mm512_maskz_loadu_epi8(span, rows[j] + 2 * i);
    // The low 32 bytes of two rows side by side (128-bit lanes 0, 1 of each). Zero-masked:
    // GCC 12 warns that the plain form reads an undefined register.
    const __m512i ab = _mm512_maskz_shuffle_i64x2(0xFF, r[0], r[1], 0x44);
    const __m512i cd = _mm512_maskz_shuffle_i64x2(0xFF, r[2], r[3], 0x44);
    _mm512_storeu_si512(out + 4 * i, _mm512_permutex2var_epi8(ab, index, cd));
  }
}
#endif

}  // namespace

bool quads_supported(Isa isa) {
#ifdef QFLOW_FAST_X86
#if !defined(__clang__) || __clang_major__ >= 16
  if (isa == Isa::AvxVnni) return true;
#endif
  return isa == Isa::Avx512Vnni;
#else
  (void)isa;
  return false;
#endif
}

void gemm_quads_u8s8(Isa isa, const int8_t* w, int64_t rows, const uint8_t* x, int64_t cols, int64_t quads,
                     const int32_t* init, int32_t* out, int64_t ld) {
#ifdef QFLOW_FAST_X86
  if (isa == Isa::Avx512Vnni) return quads_avx512vnni(w, rows, x, cols, quads, init, out, ld);
#if !defined(__clang__) || __clang_major__ >= 16
  if (isa == Isa::AvxVnni) return quads_avxvnni(w, rows, x, cols, quads, init, out, ld);
#endif
#endif
  // The same wrapped sums, one product at a time (conv2d takes this path only where
  // quads_supported; the pairs are faster without VNNI).
  (void)isa;
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* wr = w + (r / kQuadRowBlock) * quads * 4 * kQuadRowBlock + (r % kQuadRowBlock) * 4;
    for (int64_t c = 0; c < cols; ++c) {
      uint32_t sum = static_cast<uint32_t>(init[r]);
      for (int64_t q = 0; q < quads; ++q)
        for (int j = 0; j < 4; ++j)
          sum += static_cast<uint32_t>(int32_t{wr[q * 4 * kQuadRowBlock + j]} * int32_t{x[(q * cols + c) * 4 + j]});
      out[r * ld + c] = static_cast<int32_t>(sum);
    }
  }
}

void interleave4_u8(Isa isa, const uint8_t* const rows[4], int64_t n, uint8_t* out) {
#ifdef QFLOW_FAST_X86
  if (isa != Isa::Portable) return interleave4_avx2(rows, n, out);
#else
  (void)isa;
#endif
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = rows[j][i];
}

void interleave4_even_u8(Isa isa, const uint8_t* const rows[4], int64_t n, uint8_t* out) {
#ifdef QFLOW_FAST_X86
  if (isa == Isa::Avx512Vnni && vbmi_supported()) return interleave4_even_vbmi(rows, n, out);
#else
  (void)isa;
#endif
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = rows[j][2 * i];
}

}  // namespace qflow::fx::fast
