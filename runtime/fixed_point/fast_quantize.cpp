// Float -> integer quantize on the fast kernels: fx::quantize per element is an out-of-line call
// that re-derives the type range and rounds through libm; here the same double expression,
// nearbyint(x / scale) + zero_point then saturation, runs inline in one loop (vectorizable with
// AVX2's vroundpd). IEEE division and round-to-nearest-even are exact operations, so every
// instruction set gives fx::quantize's result.
//
// With AVX-512 the division (the divider took most of a PP-OCR cls input's 19 us) becomes a
// multiply by 1 / scale where that gives the same integer. t = x * fl(1 / scale) is within
// |t| * 2^-51 of the quotient D = fl(x / scale), so nearbyint(t) == nearbyint(D) unless a
// half-integer lies between them; the lanes where t is within |t| * 2^-48 of a half-integer
// (ties and near-ties, and every lane with |t| >= 2^48, where that margin passes 1) are divided
// after all.
#include <cmath>

#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::fx::fast {
namespace {

[[gnu::always_inline]] inline void quantize_loop(const float* x, int64_t n, double scale, double zero_point, double lo,
                                                 double hi, int32_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = std::nearbyint(static_cast<double>(x[i]) / scale) + zero_point;
    // As fx::quantize: below (or NaN-free -inf) to the minimum, from the maximum up to the maximum.
    const double c = !(v > lo) ? lo : (v >= hi ? hi : v);
    y[i] = static_cast<int32_t>(c);
  }
}

void quantize_portable(const float* x, int64_t n, double scale, double zero_point, double lo, double hi, int32_t* y) {
  quantize_loop(x, n, scale, zero_point, lo, hi, y);
}

// The reference's dequantize, inline so the loop vectorizes: scale * (x - zero_point) in
// double, rounded once to float.
[[gnu::always_inline]] inline void dequantize_loop(const int32_t* x, int64_t n, double scale, double zero_point,
                                                   float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(scale * (static_cast<double>(x[i]) - zero_point));
}

void dequantize_portable(const int32_t* x, int64_t n, double scale, double zero_point, float* y) {
  dequantize_loop(x, n, scale, zero_point, y);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) void dequantize_avx512(const int32_t* x, int64_t n, double scale,
                                                          double zero_point, float* y) {
  dequantize_loop(x, n, scale, zero_point, y);
}

__attribute__((target("avx2"))) void dequantize_avx2(const int32_t* x, int64_t n, double scale, double zero_point,
                                                     float* y) {
  dequantize_loop(x, n, scale, zero_point, y);
}

__attribute__((target("avx2"))) void quantize_avx2(const float* x, int64_t n, double scale, double zero_point,
                                                   double lo, double hi, int32_t* y) {
  quantize_loop(x, n, scale, zero_point, lo, hi, y);
}

// As quantize_loop, 8 lanes at a time; also finds the first NaN (returns its index, or -1).
__attribute__((target("avx512f,avx512vl"))) int64_t quantize_avx512(const float* x, int64_t n, double scale,
                                                                     double zero_point, double lo, double hi,
                                                                     int32_t* y) {
  const __m512d vscale = _mm512_set1_pd(scale), inverse = _mm512_set1_pd(1.0 / scale);
  const __m512d zp = _mm512_set1_pd(zero_point), vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
  const __m512d half = _mm512_set1_pd(0.5), margin = _mm512_set1_pd(0x1p-48);
  constexpr int kRound = _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC;  // as nearbyint
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 lanes = n - i >= 8 ? __mmask8(0xFF) : static_cast<__mmask8>((1u << (n - i)) - 1);
    const __m256 v = _mm256_maskz_loadu_ps(lanes, x + i);
    if (const __mmask8 nan = _mm256_mask_cmp_ps_mask(lanes, v, v, _CMP_UNORD_Q))
      return i + __builtin_ctz(nan);
    // Zero-masked forms: GCC 12 warns that the plain ones read an undefined register.
    constexpr __mmask8 all = 0xFF;
    const __m512d d = _mm512_maskz_cvtps_pd(all, v);
    const __m512d t = _mm512_mul_pd(d, inverse);
    __m512d r = _mm512_maskz_roundscale_pd(all, t, kRound);
    const __m512d from_half = _mm512_abs_pd(_mm512_sub_pd(_mm512_abs_pd(_mm512_sub_pd(t, r)), half));
    const __mmask8 near = _mm512_cmp_pd_mask(from_half, _mm512_mul_pd(_mm512_abs_pd(t), margin), _CMP_LE_OQ);
    if (near) r = _mm512_mask_roundscale_pd(r, near, _mm512_div_pd(d, vscale), kRound);
    // max / min give lo below (and for -inf) and hi from hi up, as the loop; no NaN reaches here.
    const __m512d c = _mm512_maskz_min_pd(all, _mm512_maskz_max_pd(all, _mm512_add_pd(r, zp), vlo), vhi);
    _mm256_mask_storeu_epi32(y + i, lanes, _mm512_maskz_cvttpd_epi32(all, c));
  }
  return -1;
}
#endif

}  // namespace

int64_t quantize(const QParams& q, Isa isa, std::span<const float> x, std::span<int32_t> y) {
  const Range r = range_of(q.type);
#if defined(__x86_64__) && defined(__GNUC__)
  // 1 / scale finite and normal: t = x * (1 / scale) keeps the relative error bound above.
  if (isa == Isa::Avx512Vnni && x.size() <= y.size() && std::isnormal(1.0 / q.scale))
    return quantize_avx512(x.data(), static_cast<int64_t>(x.size()), q.scale, q.zero_point, r.min, r.max, y.data());
#endif
  for (size_t i = 0; i < x.size(); ++i)
    if (std::isnan(x[i])) return static_cast<int64_t>(i);
  const auto n = static_cast<int64_t>(std::min(x.size(), y.size()));
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa != Isa::Portable) {
    quantize_avx2(x.data(), n, q.scale, q.zero_point, r.min, r.max, y.data());
    return -1;
  }
#else
  (void)isa;
#endif
  quantize_portable(x.data(), n, q.scale, q.zero_point, r.min, r.max, y.data());
  return -1;
}

void dequantize(const QParams& q, Isa isa, std::span<const int32_t> x, std::span<float> y) {
  const auto n = static_cast<int64_t>(std::min(x.size(), y.size()));
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == Isa::Avx512Vnni) return dequantize_avx512(x.data(), n, q.scale, q.zero_point, y.data());
  if (isa != Isa::Portable) return dequantize_avx2(x.data(), n, q.scale, q.zero_point, y.data());
#else
  (void)isa;
#endif
  dequantize_portable(x.data(), n, q.scale, q.zero_point, y.data());
}

}  // namespace qflow::fx::fast
