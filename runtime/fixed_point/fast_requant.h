// The exact requantize step of the fast kernels (fast_requant.cpp), shared with kernels that
// requantize their accumulators in registers; internal to the fast kernels.
//
// |acc| < 2^31 and mantissa < 2^31, so |acc| * mantissa < 2^62 is exact in 64 bits. The
// reference shifts right by s = 31 + shift with round half away from zero; for s >= 63 the
// rounded result is 0, which a shift by 63 also gives (p + 2^62 < 2^63). Results stay below
// 2^62, where the reference's saturation never acts; before narrowing to 32 bits they are capped
// at 2^24, beyond every zero point and clamp bound of a 16-bit type, so the final clamp is unchanged.
#pragma once

#include <algorithm>
#include <cstdint>

#include "qflow/runtime/fixed_point.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::fx::fast::detail {

inline constexpr uint64_t kRequantizeCap = uint64_t{1} << 24;

struct Rounding {
  uint64_t mantissa = 0;
  int shift = 0;       // s, at most 63
  uint64_t half = 0;   // 2^(s-1), or 0 for s = 0
};

inline Rounding rounding_of(Multiplier m) {
  Rounding r;
  r.mantissa = static_cast<uint64_t>(static_cast<uint32_t>(m.mantissa));
  r.shift = std::min(31 + m.shift, 63);
  r.half = r.shift > 0 ? uint64_t{1} << (r.shift - 1) : 0;
  return r;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The constants of one requantize on 16 int32 lanes.
struct Requantize16 {
  __m512i mant, half, count, cap, zp, lo, hi;
};

__attribute__((target("avx512f"))) inline Requantize16 requantize16_setup(const Rounding& r, int32_t zero_point,
                                                                         int32_t lo, int32_t hi) {
  return Requantize16{_mm512_set1_epi64(static_cast<int64_t>(r.mantissa)),
                      _mm512_set1_epi64(static_cast<int64_t>(r.half)),
                      _mm512_set1_epi64(r.shift),
                      _mm512_set1_epi64(static_cast<int64_t>(kRequantizeCap)),
                      _mm512_set1_epi32(zero_point),
                      _mm512_set1_epi32(lo),
                      _mm512_set1_epi32(hi)};
}

// requantize(a[i]) for 16 lanes: even lanes in the low halves of the 64-bit products, odd lanes
// shifted down first, the sign restored at the end. A zero accumulator gives q = 0: its rounded
// product is 0. Zero-masked forms throughout: GCC 12 warns that the plain ones read an undefined
// register (-Wmaybe-uninitialized inside avx512fintrin.h).
__attribute__((target("avx512f"))) inline __m512i requantize16(const Requantize16& c, __m512i a) {
  constexpr __mmask8 k8 = 0xFF;
  constexpr __mmask16 k16 = 0xFFFF;
  const __m512i mag = _mm512_maskz_abs_epi32(k16, a);
  const __m512i even = _mm512_maskz_min_epi64(
      k8, _mm512_maskz_srlv_epi64(k8, _mm512_add_epi64(_mm512_maskz_mul_epu32(k8, mag, c.mant), c.half), c.count), c.cap);
  const __m512i high = _mm512_maskz_srli_epi64(k8, mag, 32);
  const __m512i odd = _mm512_maskz_min_epi64(
      k8, _mm512_maskz_srlv_epi64(k8, _mm512_add_epi64(_mm512_maskz_mul_epu32(k8, high, c.mant), c.half), c.count), c.cap);
  __m512i q = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_maskz_slli_epi64(k8, odd, 32));
  const __m512i zero = _mm512_setzero_si512();
  q = _mm512_mask_sub_epi32(q, _mm512_cmplt_epi32_mask(a, zero), zero, q);
  return _mm512_maskz_min_epi32(k16, _mm512_maskz_max_epi32(k16, _mm512_add_epi32(q, c.zp), c.lo), c.hi);
}
#endif

}  // namespace qflow::fx::fast::detail
