// The requantize epilogue of the fast kernels for int32 accumulators: exact, as
// fx::requantize (docs/fixed-point.md, "Fast kernels"); why the steps are exact is in
// fast_requant.h.
#include <algorithm>

#include "fixed_point/fast_kernels.h"
#include "fixed_point/fast_requant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_FAST_X86 1
#endif

namespace qflow::fx::fast {
namespace {

using detail::Rounding;
constexpr uint64_t kCap = detail::kRequantizeCap;

int32_t requantize_one(int32_t acc, const Rounding& r, int32_t zero_point, int32_t lo, int32_t hi) {
  const uint64_t mag = acc < 0 ? uint64_t{0} - static_cast<uint64_t>(int64_t{acc}) : static_cast<uint64_t>(acc);
  const uint64_t q = std::min((mag * r.mantissa + r.half) >> r.shift, kCap);
  const int64_t v = (acc < 0 ? -static_cast<int64_t>(q) : static_cast<int64_t>(q)) + zero_point;
  return static_cast<int32_t>(std::clamp<int64_t>(v, lo, hi));
}

void requantize_portable(const int32_t* acc, int64_t n, const Rounding& r, int32_t zero_point, int32_t lo, int32_t hi,
                         int32_t* y, int64_t stride) {
  for (int64_t i = 0; i < n; ++i) y[i * stride] = requantize_one(acc[i], r, zero_point, lo, hi);
}

#ifdef QFLOW_FAST_X86
__attribute__((target("avx2"))) void requantize_avx2(const int32_t* acc, int64_t n, const Rounding& r,
                                                     int32_t zero_point, int32_t lo, int32_t hi, int32_t* y) {
  const __m256i mant = _mm256_set1_epi64x(static_cast<int64_t>(r.mantissa));
  const __m256i half = _mm256_set1_epi64x(static_cast<int64_t>(r.half));
  const __m256i count = _mm256_set1_epi64x(r.shift);
  const __m256i cap = _mm256_set1_epi64x(static_cast<int64_t>(kCap));
  const __m256i zp = _mm256_set1_epi32(zero_point), vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    const __m256i mag = _mm256_abs_epi32(a);
    // Even lanes in the low halves of the 64-bit products, odd lanes shifted down first.
    __m256i even = _mm256_srlv_epi64(_mm256_add_epi64(_mm256_mul_epu32(mag, mant), half), count);
    __m256i odd = _mm256_srlv_epi64(_mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(mag, 32), mant), half), count);
    even = _mm256_blendv_epi8(even, cap, _mm256_cmpgt_epi64(even, cap));
    odd = _mm256_blendv_epi8(odd, cap, _mm256_cmpgt_epi64(odd, cap));
    const __m256i q = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    __m256i v = _mm256_add_epi32(_mm256_sign_epi32(q, a), zp);
    v = _mm256_min_epi32(_mm256_max_epi32(v, vlo), vhi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), v);
  }
  requantize_portable(acc + i, n - i, r, zero_point, lo, hi, y + i, 1);
}

// The same steps on 16 lanes (detail::requantize16), the tail under a mask (no scalar remainder).
__attribute__((target("avx512f"))) void requantize_avx512(const int32_t* acc, int64_t n, const Rounding& r,
                                                         int32_t zero_point, int32_t lo, int32_t hi, int32_t* y) {
  const detail::Requantize16 c = detail::requantize16_setup(r, zero_point, lo, hi);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_epi32(y + i, lanes, detail::requantize16(c, _mm512_maskz_loadu_epi32(lanes, acc + i)));
  }
}
#endif

}  // namespace

void requantize_row(Isa isa, const int32_t* acc, int64_t n, Multiplier m, int32_t zero_point, int32_t lo, int32_t hi,
                    int32_t* y, int64_t stride) {
  const Rounding r = detail::rounding_of(m);
#ifdef QFLOW_FAST_X86
  if (isa == Isa::Avx512Vnni && stride == 1) return requantize_avx512(acc, n, r, zero_point, lo, hi, y);
  if (isa != Isa::Portable && stride == 1) return requantize_avx2(acc, n, r, zero_point, lo, hi, y);
  if (isa != Isa::Portable) {
    // Strided outputs (matmul's columns): vector requantize into a buffer, then scattered.
    constexpr int64_t kChunk = 256;
    int32_t row[kChunk];
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t count = std::min(kChunk, n - i0);
      requantize_row(isa, acc + i0, count, m, zero_point, lo, hi, row, 1);
      for (int64_t i = 0; i < count; ++i) y[(i0 + i) * stride] = row[i];
    }
    return;
  }
#else
  (void)isa;
#endif
  requantize_portable(acc, n, r, zero_point, lo, hi, y, stride);
}

}  // namespace qflow::fx::fast
