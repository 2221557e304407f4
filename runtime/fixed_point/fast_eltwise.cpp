// Add / Sub and Mul for the fast kernels. Mul: the product of the centered operands fits int32
// unless both are 16-bit, and goes through the exact int32 requantize epilogue.
// Add / Sub, exact as fx::add (docs/fixed-point.md, "Fast kernels"), whenever every shifted
// operand |(q - z) << shift| is below 2^31 and the two rescaled operands (input multipliers
// below 1) sum below 2^31 in magnitude: 8-bit inputs (shift 20: below 2^28) and the 16-bit
// ones make_add_params gives (shift 15, at most 2^16 - 1 from the zero point). Every product
// with a mantissa then stays below 2^62, so 64-bit arithmetic without the reference's 128-bit
// product and 2^62 saturation gives the same results, and the sum fits the int32 epilogue.
#include <algorithm>

#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::fx::fast {
namespace {

// The largest |q - z| of q's type.
int64_t max_offset(const QParams& q) {
  const Range r = range_of(q.type);
  return std::max<int64_t>(int64_t{q.zero_point} - r.min, int64_t{r.max} - q.zero_point);
}

// round_half_away(v * m) for |v| * mantissa < 2^63.
int64_t scale(int64_t v, Multiplier m) {
  const int s = 31 + m.shift;
  if (s >= 64) return 0;
  const uint64_t mag = static_cast<uint64_t>(v < 0 ? -v : v) * static_cast<uint64_t>(m.mantissa);
  const auto r = static_cast<int64_t>((mag + (s > 0 ? uint64_t{1} << (s - 1) : 0)) >> s);
  return v < 0 ? -r : r;
}

bool input_multiplier(Multiplier m) { return m.mantissa >= 0 && m.shift >= 0 && m.shift <= kMaxShift; }

// acc[i] = scale((a[i] - za) << shift, ma) +- scale((b[i] - zb) << shift, mb) for i < n.
void add_portable(const AddParams& p, const int32_t* a, const int32_t* b, int64_t n, int32_t* acc) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t xa = int64_t{a[i] - p.a.zero_point} * (int64_t{1} << p.left_shift);
    const int64_t xb = int64_t{b[i] - p.b.zero_point} * (int64_t{1} << p.left_shift);
    const int64_t ra = scale(xa, p.a_multiplier), rb = scale(xb, p.b_multiplier);
    acc[i] = static_cast<int32_t>(p.subtract ? ra - rb : ra + rb);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// scale() on 8 lanes: |v| < 2^31 fits the 32-bit operand of vpmuludq, the product and the rounded
// result (< 2^29) are formed in 64-bit lanes, a shift count of 64 or more gives 0 as scale() does.
__attribute__((target("avx2"))) __m256i scale8(__m256i v, Multiplier m) {
  const int s = 31 + m.shift;
  const __m256i mant = _mm256_set1_epi64x(m.mantissa);
  const __m256i half = _mm256_set1_epi64x(s <= 64 ? static_cast<int64_t>(uint64_t{1} << (s - 1)) : 0);
  const __m256i count = _mm256_set1_epi64x(s);
  const __m256i mag = _mm256_abs_epi32(v);
  const __m256i even = _mm256_srlv_epi64(_mm256_add_epi64(_mm256_mul_epu32(mag, mant), half), count);
  const __m256i odd =
      _mm256_srlv_epi64(_mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(mag, 32), mant), half), count);
  return _mm256_sign_epi32(_mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA), v);
}

__attribute__((target("avx2"))) void add_avx2(const AddParams& p, const int32_t* a, const int32_t* b, int64_t n,
                                              int32_t* acc) {
  const __m256i za = _mm256_set1_epi32(p.a.zero_point), zb = _mm256_set1_epi32(p.b.zero_point);
  const __m128i ls = _mm_cvtsi32_si128(p.left_shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i xa = _mm256_sll_epi32(_mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)), za), ls);
    const __m256i xb = _mm256_sll_epi32(_mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)), zb), ls);
    const __m256i ra = scale8(xa, p.a_multiplier), rb = scale8(xb, p.b_multiplier);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i), p.subtract ? _mm256_sub_epi32(ra, rb) : _mm256_add_epi32(ra, rb));
  }
  add_portable(p, a + i, b + i, n - i, acc + i);
}

// (a - za) * (b - zb) in int32 (mul_supported bounds it), compiled for AVX2.
__attribute__((target("avx2"))) void mul_avx2(const int32_t* a, const int32_t* b, int32_t za, int32_t zb, int64_t n,
                                              int32_t* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] = (a[i] - za) * (b[i] - zb);
}
#endif

}  // namespace

bool add_supported(const AddParams& p) {
  if (p.left_shift < 0 || p.left_shift > 30 || !input_multiplier(p.a_multiplier) || !input_multiplier(p.b_multiplier) ||
      p.output_multiplier.mantissa < 0 || p.output_multiplier.shift < kMinShift || p.output_multiplier.shift > kMaxShift)
    return false;
  constexpr int64_t kLimit = int64_t{1} << 31;
  const int64_t xa = max_offset(p.a) << p.left_shift, xb = max_offset(p.b) << p.left_shift;
  // scale() grows with |v|, so the extreme operands bound every rescaled value.
  return xa < kLimit && xb < kLimit && scale(xa, p.a_multiplier) + scale(xb, p.b_multiplier) < kLimit;
}

Status add(const AddParams& p, Isa isa, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y,
           bool inputs_in_range) {
  const Range r = range_of(p.output.type);
  const int32_t lo = std::max(r.min, p.clamp.min), hi = std::min(r.max, p.clamp.max);
  // Anything the reference refuses goes to the reference, for its message.
  if (!add_supported(p) || a.size() != b.size() || a.size() != y.size() || lo > hi ||
      (!inputs_in_range && (!check_range(a, p.a.type, "").is_ok() || !check_range(b, p.b.type, "").is_ok())))
    return fx::add(p, a, b, y);
  constexpr int64_t kChunk = 256;
  int32_t acc[kChunk];
  for (size_t i0 = 0; i0 < a.size(); i0 += kChunk) {
    const auto n = static_cast<int64_t>(std::min<size_t>(kChunk, a.size() - i0));
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa != Isa::Portable) add_avx2(p, a.data() + i0, b.data() + i0, n, acc);
    else
#endif
      add_portable(p, a.data() + i0, b.data() + i0, n, acc);
    requantize_row(isa, acc, n, p.output_multiplier, p.output.zero_point, lo, hi, y.data() + i0, 1);
  }
  return Status{};
}

bool mul_supported(const MulParams& p) {
  // |(a - z_a) * (b - z_b)| < 2^31: an int32 accumulator for the exact requantize epilogue.
  return max_offset(p.a) * max_offset(p.b) < (int64_t{1} << 31) && p.multiplier.mantissa >= 0 &&
         p.multiplier.shift >= kMinShift && p.multiplier.shift <= kMaxShift;
}

Status mul(const MulParams& p, Isa isa, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y,
           bool inputs_in_range) {
  const Range r = range_of(p.output.type);
  const int32_t lo = std::max(r.min, p.clamp.min), hi = std::min(r.max, p.clamp.max);
  if (!mul_supported(p) || a.size() != b.size() || a.size() != y.size() || lo > hi ||
      (!inputs_in_range && (!check_range(a, p.a.type, "").is_ok() || !check_range(b, p.b.type, "").is_ok())))
    return fx::mul(p, a, b, y);
  constexpr int64_t kChunk = 256;
  int32_t acc[kChunk];
  for (size_t i0 = 0; i0 < a.size(); i0 += kChunk) {
    const auto n = static_cast<int64_t>(std::min<size_t>(kChunk, a.size() - i0));
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa != Isa::Portable) mul_avx2(a.data() + i0, b.data() + i0, p.a.zero_point, p.b.zero_point, n, acc);
    else
#endif
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = i0 + static_cast<size_t>(i);
        acc[i] = (a[k] - p.a.zero_point) * (b[k] - p.b.zero_point);
      }
    requantize_row(isa, acc, n, p.multiplier, p.output.zero_point, lo, hi, y.data() + i0, 1);
  }
  return Status{};
}

}  // namespace qflow::fx::fast
