// Lookup tables on the fast kernels: the reference's lut_lookup is an out-of-line call per
// element that re-derives the type range; here the range is checked once per tensor (a
// vectorized min / max pass) and the lookup is inlined. Exact as fx::apply_lut: the same table
// index, and for 16-bit tables the same interpolation in 64 bits (|(e1 - e0) * frac| < 2^41, far
// below rounding_shift's saturation), rounded half away from zero by segment_bits as it does.
#include <algorithm>

#include "runtime/fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::fx::fast {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// y[i] = e[x[i] - base], 8 lookups per vpgatherdd (indices checked in range by the caller).
__attribute__((target("avx2"))) void lookup_avx2(const int32_t* e, int32_t base, const int32_t* x, size_t n, int32_t* y) {
  const __m256i b = _mm256_set1_epi32(base);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i idx = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_i32gather_epi32(e, idx, 4));
  }
  for (; i < n; ++i) y[i] = e[x[i] - base];
}
#endif

}  // namespace

Status apply_lut(const Lut& lut, Isa isa, std::span<const int32_t> x, std::span<int32_t> y, bool inputs_in_range) {
  const Range r = range_of(lut.input.type);
  const int bits = lut.segment_bits;
  const size_t expected = bits == 0 ? static_cast<size_t>(r.max - r.min + 1) : (size_t{1} << (16 - bits)) + 1;
  // Anything the reference refuses goes to the reference, for its message.
  if (x.size() != y.size() || lut.entries.size() != expected || (bits != 0 && bits != 7 && bits != 8) ||
      (!inputs_in_range && !check_range(x, lut.input.type, "").ok()))
    return fx::apply_lut(lut, x, y);
  const int32_t* e = lut.entries.data();
  const int32_t base = r.min;
  const size_t n = x.size();
  if (bits == 0) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa != Isa::Portable) {
      lookup_avx2(e, base, x.data(), n, y.data());
      return Status{};
    }
#else
    (void)isa;
#endif
    for (size_t i = 0; i < n; ++i) y[i] = e[x[i] - base];
    return Status{};
  }
  const int32_t mask = (1 << bits) - 1;
  const int64_t half = int64_t{1} << (bits - 1);
  for (size_t i = 0; i < n; ++i) {
    const int32_t u = x[i] - base, seg = u >> bits, frac = u & mask;
    const int64_t e0 = e[seg], d = (e[seg + 1] - e0) * frac;
    const int64_t q = ((d < 0 ? -d : d) + half) >> bits;
    y[i] = static_cast<int32_t>(e0 + (d < 0 ? -q : q));
  }
  return Status{};
}

}  // namespace qflow::fx::fast
