// Lookup tables on the fast kernels: the reference's lut_lookup is an out-of-line call per
// element that re-derives the type range; here the range is checked once per tensor (a
// vectorized min / max pass) and the lookup is inlined. Exact as fx::apply_lut: the same table
// index, and for 16-bit tables the same interpolation in 64 bits (|(e1 - e0) * frac| < 2^41, far
// below rounding_shift's saturation), rounded half away from zero by segment_bits as it does.
#include <algorithm>

#include "fixed_point/fast_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace qflow::fx::fast {
namespace {

// y[i] = e[x[i] - base], four loads before their four stores: one at a time, every table load
// waited for the store before it (the compiler cannot tell y from e). On AMD Zen this beats
// vpgatherdd, whose eight loads issue slower than eight plain ones: 0.23 against 0.43 ns a
// value on indices of a 16-bit activation's spread (standard deviation 1/12 of the range),
// 0.35 against 0.43 on uniform ones (a 65536-entry table, 2-core AMD EPYC, avx2 avx512f
// avx_vnni avx512_vnni).
void lookup_scalar(const int32_t* e, int32_t base, const int32_t* x, size_t n, int32_t* y) {
  const int32_t* t = e - base;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const int32_t a = t[x[i]], b = t[x[i + 1]], c = t[x[i + 2]], d = t[x[i + 3]];
    y[i] = a, y[i + 1] = b, y[i + 2] = c, y[i + 3] = d;
  }
  for (; i < n; ++i) y[i] = t[x[i]];
}

// Whether the CPU's gathers lose to plain loads (AMD's do; Intel's issue 8 loads in fewer
// cycles than 8 plain ones take).
bool gathers_slow() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool slow = __builtin_cpu_is("amd");
  return slow;
#else
  return true;
#endif
}

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

// 8-bit tables (256 entries) whose entries are bytes, on AVX-512 VBMI: 64 lookups per pair of
// vpermi2b (two 128-byte halves of the table, picked by the index's top bit) instead of 8
// per gather. The indices x - base are narrowed to bytes and the results widened back.
//
// Zero-masked forms throughout: GCC 12 warns that the plain ones read an undefined register.
// 16 indices x - base as bytes.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m128i narrow_indices(const int32_t* x, __m512i base) {
  return _mm512_maskz_cvtepi32_epi8(0xFFFF, _mm512_sub_epi32(_mm512_loadu_si512(x), base));
}

// 16 table bytes back to int32.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i widen_bytes(__m128i v, bool is_signed) {
  return is_signed ? _mm512_maskz_cvtepi8_epi32(0xFFFF, v) : _mm512_maskz_cvtepu8_epi32(0xFFFF, v);
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void lookup_bytes_vbmi(const int32_t* e, bool is_signed,
                                                                              int32_t base, const int32_t* x, size_t n,
                                                                              int32_t* y) {
  alignas(64) uint8_t bytes[256];
  for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(e[i]);
  const __m512i t0 = _mm512_load_si512(bytes), t1 = _mm512_load_si512(bytes + 64);
  const __m512i t2 = _mm512_load_si512(bytes + 128), t3 = _mm512_load_si512(bytes + 192);
  const __m512i b = _mm512_set1_epi32(base);
  constexpr __mmask16 all = 0xFFFF;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i idx = _mm512_zextsi128_si512(narrow_indices(x + i, b));
    idx = _mm512_maskz_inserti32x4(all, idx, narrow_indices(x + i + 16, b), 1);
    idx = _mm512_maskz_inserti32x4(all, idx, narrow_indices(x + i + 32, b), 2);
    idx = _mm512_maskz_inserti32x4(all, idx, narrow_indices(x + i + 48, b), 3);
    const __m512i low = _mm512_permutex2var_epi8(t0, idx, t1), high = _mm512_permutex2var_epi8(t2, idx, t3);
    const __m512i v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high);
    _mm512_storeu_si512(y + i, widen_bytes(_mm512_maskz_extracti32x4_epi32(0xF, v, 0), is_signed));
    _mm512_storeu_si512(y + i + 16, widen_bytes(_mm512_maskz_extracti32x4_epi32(0xF, v, 1), is_signed));
    _mm512_storeu_si512(y + i + 32, widen_bytes(_mm512_maskz_extracti32x4_epi32(0xF, v, 2), is_signed));
    _mm512_storeu_si512(y + i + 48, widen_bytes(_mm512_maskz_extracti32x4_epi32(0xF, v, 3), is_signed));
  }
  for (; i < n; ++i) y[i] = e[x[i] - base];
}

// Whether all 256 entries are signed (or else unsigned) bytes; false when neither.
bool byte_entries(const int32_t* e, bool& is_signed) {
  const auto [lo, hi] = std::minmax_element(e, e + 256);
  if (*lo >= -128 && *hi <= 127) is_signed = true;
  else if (*lo >= 0 && *hi <= 255) is_signed = false;
  else return false;
  return true;
}
#endif

}  // namespace

bool lookup_gathered(const int32_t* e, int32_t base, std::span<const int32_t> x, std::span<int32_t> y) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!isa_supported(Isa::Avx2) || x.size() != y.size()) return false;
  lookup_avx2(e, base, x.data(), x.size(), y.data());
  return true;
#else
  (void)e, (void)base, (void)x, (void)y;
  return false;
#endif
}

Status apply_lut(const Lut& lut, Isa isa, std::span<const int32_t> x, std::span<int32_t> y, bool inputs_in_range) {
  const Range r = range_of(lut.input.type);
  const int bits = lut.segment_bits;
  const size_t expected = bits == 0 ? static_cast<size_t>(r.max - r.min + 1) : (size_t{1} << (16 - bits)) + 1;
  // Anything the reference refuses goes to the reference, for its message.
  if (x.size() != y.size() || lut.entries.size() != expected || (bits != 0 && bits != 7 && bits != 8) ||
      (!inputs_in_range && !check_range(x, lut.input.type, "").is_ok()))
    return fx::apply_lut(lut, x, y);
  const int32_t* e = lut.entries.data();
  const int32_t base = r.min;
  const size_t n = x.size();
  if (bits == 0) {
#if defined(__x86_64__) && defined(__GNUC__)
    bool is_signed = false;
    if (isa == Isa::Avx512Vnni && n >= 256 && expected == 256 && vbmi_supported() && byte_entries(e, is_signed)) {
      lookup_bytes_vbmi(e, is_signed, base, x.data(), n, y.data());
      return Status{};
    }
    if (isa != Isa::Portable && !gathers_slow()) {
      lookup_avx2(e, base, x.data(), n, y.data());
      return Status{};
    }
#else
    (void)isa;
#endif
    lookup_scalar(e, base, x.data(), n, y.data());
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
