// The float32 loops of QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear, scalar and
// AVX2 (chosen at run time).
#include "framework/interpreter/kernels/quantize_run.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "framework/interpreter/kernels/quant_util.h"
#include "framework/interpreter/kernel_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QFLOW_QUANTIZE_AVX2 1
#endif

namespace qflow::quant_detail {

namespace {

template <typename T>
[[gnu::always_inline]] inline void dequantize_body(const T* in, float* out, int64_t n, float scale, int32_t zero_point) {
  const float zpf = static_cast<float>(zero_point);
  for (int64_t i = 0; i < n; ++i) out[i] = (static_cast<float>(in[i]) - zpf) * scale;
}

#ifdef QFLOW_QUANTIZE_AVX2
// The vector form of the scalar path, eight values at a time. The scalar path adds the zero
// point in double and clamps to the type's range; here the rounded quotient is clamped to
// [lo - zp, hi - zp] first, so adding the zero point stays within +-2^17 where float32
// arithmetic on integers is exact: same result.
template <typename Q>
struct VectorQuantizer {
  __m256 scale, lo, hi, zero_point;

  __attribute__((target("avx2"))) VectorQuantizer(float s, int32_t zp) {
    const float z = static_cast<float>(zp);
    scale = _mm256_set1_ps(s);
    lo = _mm256_set1_ps(static_cast<float>(std::numeric_limits<Q>::lowest()) - z);
    hi = _mm256_set1_ps(static_cast<float>(std::numeric_limits<Q>::max()) - z);
    zero_point = _mm256_set1_ps(z);
  }

  // saturate(round_half_even(x / scale) + zero point) of in[0..8), NaN as 0, as int32 lanes.
  __attribute__((target("avx2"))) __m256i operator()(const float* in) const {
    __m256 q = _mm256_div_ps(_mm256_loadu_ps(in), scale);
    q = _mm256_andnot_ps(_mm256_cmp_ps(q, q, _CMP_UNORD_Q), q);  // NaN -> 0
    q = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_cvtps_epi32(_mm256_add_ps(_mm256_min_ps(_mm256_max_ps(q, lo), hi), zero_point));
  }
};

template <typename Q>
__attribute__((target("avx2"))) int64_t quantize_avx2(const float* in, Q* out, int64_t n, float scale,
                                                      int32_t zero_point) {
  const VectorQuantizer<Q> quantize(scale, zero_point);
  alignas(32) int32_t lanes[8];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), quantize(in + i));
    for (int k = 0; k < 8; ++k) out[i + k] = static_cast<Q>(lanes[k]);
  }
  return i;
}

// 8-bit outputs, 32 values at a time: the clamped integers fit the narrower types, so the
// saturating packs are exact; the packs interleave 128-bit lanes, which the permute undoes.
template <typename Q>
__attribute__((target("avx2"))) int64_t quantize_8bit_avx2(const float* in, Q* out, int64_t n, float scale,
                                                           int32_t zero_point) {
  const VectorQuantizer<Q> quantize(scale, zero_point);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i ab = _mm256_packs_epi32(quantize(in + i), quantize(in + i + 8));
    const __m256i cd = _mm256_packs_epi32(quantize(in + i + 16), quantize(in + i + 24));
    const __m256i bytes = std::is_signed_v<Q> ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permutevar8x32_epi32(bytes, order));
  }
  return i;
}

// int16 outputs, 16 values at a time, the same way (the pack interleaves 64-bit halves).
__attribute__((target("avx2"))) int64_t quantize_int16_avx2(const float* in, int16_t* out, int64_t n, float scale,
                                                            int32_t zero_point) {
  const VectorQuantizer<int16_t> quantize(scale, zero_point);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i words = _mm256_packs_epi32(quantize(in + i), quantize(in + i + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute4x64_epi64(words, 0xD8));
  }
  return i;
}

template <typename T>
__attribute__((target("avx2"))) void dequantize_avx2(const T* in, float* out, int64_t n, float scale, int32_t zero_point) {
  dequantize_body(in, out, n, scale, zero_point);
}

__attribute__((target("avx2"))) int64_t float_range_avx2(const float* in, int64_t n, float& lo, float& hi) {
  // minps/maxps return their second operand when the first is NaN: NaNs never enter.
  __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    vlo = _mm256_min_ps(v, vlo);
    vhi = _mm256_max_ps(v, vhi);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, vlo);
  _mm256_store_ps(h, vhi);
  for (int k = 0; k < 8; ++k) {
    lo = std::min(lo, l[k]);
    hi = std::max(hi, h[k]);
  }
  return i;
}
#endif

}  // namespace

template <typename Q>
void quantize_float_run(const float* in, Q* out, int64_t n, float scale, int32_t zero_point) {
  int64_t i = 0;
#ifdef QFLOW_QUANTIZE_AVX2
  if (kernel_isa_allows_avx2()) {
    if constexpr (sizeof(Q) == 1) i = quantize_8bit_avx2(in, out, n, scale, zero_point);
    if constexpr (std::is_same_v<Q, int16_t>) i = quantize_int16_avx2(in, out, n, scale, zero_point);
    i += quantize_avx2(in + i, out + i, n - i, scale, zero_point);
  }
#endif
  for (; i < n; ++i) out[i] = saturate_round<Q>(in[i] / scale, zero_point);
}

template <typename T>
void dequantize_run(const T* in, float* out, int64_t n, float scale, int32_t zero_point) {
#ifdef QFLOW_QUANTIZE_AVX2
  if (kernel_isa_allows_avx2()) return dequantize_avx2(in, out, n, scale, zero_point);
#endif
  dequantize_body(in, out, n, scale, zero_point);
}

void float_range_run(const float* in, int64_t n, float& lo, float& hi) {
  int64_t i = 0;
#ifdef QFLOW_QUANTIZE_AVX2
  if (kernel_isa_allows_avx2()) i = float_range_avx2(in, n, lo, hi);
#endif
  for (; i < n; ++i) {
    lo = std::min(lo, in[i]);  // false for NaN: lo stays
    hi = std::max(hi, in[i]);
  }
}

template void quantize_float_run<int8_t>(const float*, int8_t*, int64_t, float, int32_t);
template void quantize_float_run<uint8_t>(const float*, uint8_t*, int64_t, float, int32_t);
template void quantize_float_run<int16_t>(const float*, int16_t*, int64_t, float, int32_t);
template void quantize_float_run<uint16_t>(const float*, uint16_t*, int64_t, float, int32_t);
template void dequantize_run<int8_t>(const int8_t*, float*, int64_t, float, int32_t);
template void dequantize_run<uint8_t>(const uint8_t*, float*, int64_t, float, int32_t);
template void dequantize_run<int16_t>(const int16_t*, float*, int64_t, float, int32_t);
template void dequantize_run<uint16_t>(const uint16_t*, float*, int64_t, float, int32_t);
template void dequantize_run<int32_t>(const int32_t*, float*, int64_t, float, int32_t);

}  // namespace qflow::quant_detail
