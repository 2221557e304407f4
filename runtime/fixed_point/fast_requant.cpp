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

namespace {

// fx::requantize of one 64-bit sum: the reference's steps on a 128-bit product (|acc| *
// mantissa < 2^94), capped at 2^24 instead of saturated at 2^62 (either way the clamp to
// [lo, hi] gives the same value).
int32_t requantize_wide_one(int64_t a, Multiplier m, int32_t zero_point, int32_t lo, int32_t hi) {
#ifdef __SIZEOF_INT128__
  using U128 = unsigned __int128;
  const int s = 31 + m.shift;  // [0, 93]
  const uint64_t mag = a < 0 ? uint64_t{0} - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  const U128 half = s > 0 ? U128{1} << (s - 1) : 0;
  const U128 p = (U128{mag} * static_cast<uint32_t>(m.mantissa) + half) >> s;
  const uint64_t q = p > kCap ? kCap : static_cast<uint64_t>(p);
  const int64_t v = (a < 0 ? -static_cast<int64_t>(q) : static_cast<int64_t>(q)) + zero_point;
  return static_cast<int32_t>(std::clamp<int64_t>(v, lo, hi));
#else
  return requantize(a, m, zero_point, lo, hi);
#endif
}

#ifdef QFLOW_FAST_X86
// Four sums at a time for |acc| < 2^47 (the reference's bound on 16-bit reductions; a vector
// with a larger lane goes one by one) and s = 31 + shift in [25, 79]. With mag = h * 2^24 + l
// (l < 2^24, h < 2^23), mag * mantissa = A * 2^24 + B for A = h * mantissa < 2^54 and
// B = l * mantissa < 2^55, and since the rounding constant 2^(s-1) is a multiple of 2^24,
// floor((A * 2^24 + B + 2^(s-1)) / 2^s) = (A + (B >> 24) + 2^(s-25)) >> (s - 24): nested
// floor divisions by powers of two, every term below 2^56.
struct Wide4 {
  __m256i mant, round, low24, cap, zp, lo, hi, pick;
  __m128i count;
};

__attribute__((target("avx2"))) inline Wide4 wide4_setup(Multiplier m, int32_t zero_point, int32_t lo, int32_t hi) {
  const int s = 31 + m.shift;
  return Wide4{_mm256_set1_epi64x(static_cast<uint32_t>(m.mantissa)),
               _mm256_set1_epi64x(int64_t{1} << (s - 25)),
               _mm256_set1_epi64x((int64_t{1} << 24) - 1),
               _mm256_set1_epi64x(static_cast<int64_t>(kCap)),
               _mm256_set1_epi64x(zero_point),
               _mm256_set1_epi64x(lo),
               _mm256_set1_epi64x(hi),
               _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0),
               _mm_cvtsi32_si128(s - 24)};
}

// The four requantized sums of `a` (|a| < 2^47), given neg = (a < 0) and mag = |a|.
__attribute__((target("avx2"))) inline __m128i requantize_wide4(const Wide4& c, __m256i neg, __m256i mag) {
  const __m256i big = _mm256_mul_epu32(_mm256_srli_epi64(mag, 24), c.mant);
  const __m256i small = _mm256_mul_epu32(_mm256_and_si256(mag, c.low24), c.mant);
  __m256i q = _mm256_srl_epi64(_mm256_add_epi64(_mm256_add_epi64(big, _mm256_srli_epi64(small, 24)), c.round), c.count);
  q = _mm256_blendv_epi8(q, c.cap, _mm256_cmpgt_epi64(q, c.cap));
  __m256i v = _mm256_add_epi64(_mm256_sub_epi64(_mm256_xor_si256(q, neg), neg), c.zp);
  v = _mm256_blendv_epi8(v, c.lo, _mm256_cmpgt_epi64(c.lo, v));
  v = _mm256_blendv_epi8(v, c.hi, _mm256_cmpgt_epi64(v, c.hi));
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, c.pick));
}

__attribute__((target("avx2"))) inline void store4(__m128i out, int32_t* y, int64_t stride) {
  if (stride == 1) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), out);
    return;
  }
  alignas(16) int32_t lanes[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), out);
  for (int j = 0; j < 4; ++j) y[j * stride] = lanes[j];
}

__attribute__((target("avx2"))) void requantize_wide_avx2(const int64_t* acc, int64_t n, Multiplier m,
                                                          int32_t zero_point, int32_t lo, int32_t hi, int32_t* y,
                                                          int64_t stride) {
  const Wide4 c = wide4_setup(m, zero_point, lo, hi);
  const __m256i limit = _mm256_set1_epi64x((int64_t{1} << 47) - 1), zero = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    const __m256i neg = _mm256_cmpgt_epi64(zero, a);
    const __m256i mag = _mm256_sub_epi64(_mm256_xor_si256(a, neg), neg);
    // (INT64_MIN keeps its sign: mag < 0 goes one by one as well.)
    const __m256i wide = _mm256_or_si256(_mm256_cmpgt_epi64(mag, limit), _mm256_cmpgt_epi64(zero, mag));
    if (!_mm256_testz_si256(wide, wide)) {
      for (int64_t j = i; j < i + 4; ++j) y[j * stride] = requantize_wide_one(acc[j], m, zero_point, lo, hi);
      continue;
    }
    store4(requantize_wide4(c, neg, mag), y + i * stride, stride);
  }
  for (; i < n; ++i) y[i * stride] = requantize_wide_one(acc[i], m, zero_point, lo, hi);
}

// requantize_halves_row's sums formed in registers, four at a time (|bias| < 2^31: every sum is
// below 2^40, inside the wide steps' 2^47).
__attribute__((target("avx2"))) void requantize_halves_avx2(const int32_t* high, const int32_t* low, int64_t bias,
                                                            int64_t n, Multiplier m, int32_t zero_point, int32_t lo,
                                                            int32_t hi, int32_t* y, int64_t stride) {
  const Wide4 c = wide4_setup(m, zero_point, lo, hi);
  const __m256i b = _mm256_set1_epi64x(bias), zero = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256i h = _mm256_cvtepi32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(high + i)));
    const __m256i l = _mm256_cvtepi32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(low + i)));
    const __m256i a = _mm256_add_epi64(_mm256_add_epi64(_mm256_slli_epi64(h, 8), l), b);
    const __m256i neg = _mm256_cmpgt_epi64(zero, a);
    store4(requantize_wide4(c, neg, _mm256_sub_epi64(_mm256_xor_si256(a, neg), neg)), y + i * stride, stride);
  }
  for (; i < n; ++i) y[i * stride] = requantize_wide_one(bias + int64_t{high[i]} * 256 + low[i], m, zero_point, lo, hi);
}

// The same steps on eight sums at a time with AVX-512 (masks instead of blends). Zero-masked
// forms throughout: GCC 12 warns that the plain ones read an undefined register.
struct Wide8 {
  __m512i mant, round, low24, cap, zp, lo, hi, limit;
  __m128i count;
};

__attribute__((target("avx512f"))) inline Wide8 wide8_setup(Multiplier m, int32_t zero_point, int32_t lo, int32_t hi) {
  const int s = 31 + m.shift;
  return Wide8{_mm512_set1_epi64(static_cast<uint32_t>(m.mantissa)),
               _mm512_set1_epi64(int64_t{1} << (s - 25)),
               _mm512_set1_epi64((int64_t{1} << 24) - 1),
               _mm512_set1_epi64(static_cast<int64_t>(kCap)),
               _mm512_set1_epi64(zero_point),
               _mm512_set1_epi64(lo),
               _mm512_set1_epi64(hi),
               _mm512_set1_epi64((int64_t{1} << 47) - 1),
               _mm_cvtsi32_si128(s - 24)};
}

// The eight requantized sums of `a`, or false when a lane is past 2^47 (those go one by one).
__attribute__((target("avx512f"))) inline bool requantize_wide8(const Wide8& c, __m512i a, __m256i& out) {
  constexpr __mmask8 all = 0xFF;
  const __m512i mag = _mm512_maskz_abs_epi64(all, a);  // INT64_MIN stays negative: not below the limit
  if (_mm512_cmpgt_epu64_mask(mag, c.limit) != 0) return false;
  const __m512i big = _mm512_maskz_mul_epu32(all, _mm512_maskz_srli_epi64(all, mag, 24), c.mant);
  const __m512i small = _mm512_maskz_mul_epu32(all, _mm512_maskz_and_epi64(all, mag, c.low24), c.mant);
  __m512i q = _mm512_maskz_srl_epi64(
      all, _mm512_maskz_add_epi64(all, _mm512_maskz_add_epi64(all, big, _mm512_maskz_srli_epi64(all, small, 24)), c.round),
      c.count);
  q = _mm512_maskz_min_epu64(all, q, c.cap);
  const __mmask8 negative = _mm512_cmplt_epi64_mask(a, _mm512_setzero_si512());
  q = _mm512_mask_sub_epi64(q, negative, _mm512_setzero_si512(), q);
  const __m512i v = _mm512_maskz_min_epi64(all, _mm512_maskz_max_epi64(all, _mm512_maskz_add_epi64(all, q, c.zp), c.lo), c.hi);
  out = _mm512_maskz_cvtepi64_epi32(all, v);
  return true;
}

__attribute__((target("avx512f"))) void requantize_wide_avx512(const int64_t* acc, int64_t n, Multiplier m,
                                                              int32_t zero_point, int32_t lo, int32_t hi, int32_t* y,
                                                              int64_t stride) {
  const Wide8 c = wide8_setup(m, zero_point, lo, hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i out;
    if (!requantize_wide8(c, _mm512_maskz_loadu_epi64(0xFF, acc + i), out)) {
      for (int64_t j = i; j < i + 8; ++j) y[j * stride] = requantize_wide_one(acc[j], m, zero_point, lo, hi);
      continue;
    }
    if (stride == 1) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), out);
    } else {
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), out);
      for (int j = 0; j < 8; ++j) y[(i + j) * stride] = lanes[j];
    }
  }
  for (; i < n; ++i) y[i * stride] = requantize_wide_one(acc[i], m, zero_point, lo, hi);
}

// The rounded magnitudes of eight sums bias + 256 * high + low, capped at 2^24 (the wide steps;
// the sums are below 2^40), and which of the sums are negative.
__attribute__((target("avx512f"))) inline __m512i halves_magnitude8(const Wide8& c, __m512i bias, __m256i high,
                                                                   __m256i low, __mmask8& negative) {
  constexpr __mmask8 all = 0xFF;
  const __m512i h = _mm512_maskz_cvtepi32_epi64(all, high), l = _mm512_maskz_cvtepi32_epi64(all, low);
  const __m512i a = _mm512_maskz_add_epi64(all, _mm512_maskz_add_epi64(all, _mm512_maskz_slli_epi64(all, h, 8), l), bias);
  negative = _mm512_cmplt_epi64_mask(a, _mm512_setzero_si512());
  const __m512i mag = _mm512_maskz_abs_epi64(all, a);
  const __m512i big = _mm512_maskz_mul_epu32(all, _mm512_maskz_srli_epi64(all, mag, 24), c.mant);
  const __m512i small = _mm512_maskz_mul_epu32(all, _mm512_maskz_and_epi64(all, mag, c.low24), c.mant);
  const __m512i q = _mm512_maskz_srl_epi64(
      all, _mm512_maskz_add_epi64(all, _mm512_maskz_add_epi64(all, big, _mm512_maskz_srli_epi64(all, small, 24)), c.round),
      c.count);
  return _mm512_maskz_min_epu64(all, q, c.cap);
}

// requantize_halves_row's sums formed in registers, 16 at a time (|bias| < 2^31, so every sum
// is below 2^40, inside the wide steps' 2^47): the capped magnitudes of two groups of eight go
// into one vector of int32, where the sign, zero point and clamp finish on 16 lanes.
__attribute__((target("avx512f,avx512vl"))) void requantize_halves_avx512(const int32_t* high, const int32_t* low,
                                                                          int64_t bias, int64_t n, Multiplier m,
                                                                          int32_t zero_point, int32_t lo, int32_t hi,
                                                                          int32_t* y, int64_t stride) {
  const Wide8 c = wide8_setup(m, zero_point, lo, hi);
  const __m512i b = _mm512_set1_epi64(bias);
  const __m512i low_dwords = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i zp = _mm512_set1_epi32(zero_point), vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  for (int64_t i = 0; i < n; i += 16) {
    const auto lanes = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    const auto first = static_cast<__mmask8>(lanes), second = static_cast<__mmask8>(lanes >> 8);
    __mmask8 negative0, negative1;
    const __m512i q0 = halves_magnitude8(c, b, _mm256_maskz_loadu_epi32(first, high + i),
                                         _mm256_maskz_loadu_epi32(first, low + i), negative0);
    const __m512i q1 = halves_magnitude8(c, b, _mm256_maskz_loadu_epi32(second, high + i + 8),
                                         _mm256_maskz_loadu_epi32(second, low + i + 8), negative1);
    __m512i q = _mm512_permutex2var_epi32(q0, low_dwords, q1);
    q = _mm512_mask_sub_epi32(q, _mm512_kunpackb(negative1, negative0), _mm512_setzero_si512(), q);
    const __m512i v = _mm512_maskz_min_epi32(0xFFFF, _mm512_maskz_max_epi32(0xFFFF, _mm512_add_epi32(q, zp), vlo), vhi);
    if (stride == 1) {
      _mm512_mask_storeu_epi32(y + i, lanes, v);
    } else {
      alignas(64) int32_t out[16];
      _mm512_store_si512(out, v);
      for (int64_t j = 0; j < std::min<int64_t>(16, n - i); ++j) y[(i + j) * stride] = out[j];
    }
  }
}
#endif

}  // namespace

void requantize_wide_row(Isa isa, const int64_t* acc, int64_t n, Multiplier m, int32_t zero_point, int32_t lo,
                         int32_t hi, int32_t* y, int64_t stride) {
  const int s = 31 + m.shift;
#ifdef QFLOW_FAST_X86
  if (isa == Isa::Avx512Vnni && m.mantissa != 0 && s >= 25 && s <= 79)
    return requantize_wide_avx512(acc, n, m, zero_point, lo, hi, y, stride);
  if (isa != Isa::Portable && m.mantissa != 0 && s >= 25 && s <= 79)
    return requantize_wide_avx2(acc, n, m, zero_point, lo, hi, y, stride);
#else
  (void)isa;
#endif
  for (int64_t i = 0; i < n; ++i) y[i * stride] = requantize_wide_one(acc[i], m, zero_point, lo, hi);
}

void requantize_halves_row(Isa isa, const int32_t* high, const int32_t* low, int64_t bias, int64_t n, Multiplier m,
                           int32_t zero_point, int32_t lo, int32_t hi, int32_t* y, int64_t stride) {
#ifdef QFLOW_FAST_X86
  const int s = 31 + m.shift;
  const bool vectors = m.mantissa != 0 && s >= 25 && s <= 79 && bias >= INT32_MIN && bias <= INT32_MAX;
  if (isa == Isa::Avx512Vnni && vectors)
    return requantize_halves_avx512(high, low, bias, n, m, zero_point, lo, hi, y, stride);
  if (isa != Isa::Portable && vectors) return requantize_halves_avx2(high, low, bias, n, m, zero_point, lo, hi, y, stride);
#endif
  // Elsewhere in pieces that stay in L1, through the 64-bit epilogue.
  constexpr int64_t kPiece = 256;
  int64_t sums[kPiece];
  for (int64_t i0 = 0; i0 < n; i0 += kPiece) {
    const int64_t count = std::min(kPiece, n - i0);
    for (int64_t i = 0; i < count; ++i) sums[i] = bias + int64_t{high[i0 + i]} * 256 + low[i0 + i];
    requantize_wide_row(isa, sums, count, m, zero_point, lo, hi, y + i0 * stride, stride);
  }
}

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
