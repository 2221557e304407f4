// The lane sums written once with GCC vector types and compiled three times; the file is
// compiled with -ffp-contract=off (AVX-512F implies FMA), so every copy rounds each product.
#include "framework/quant/lane_sums.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "framework/interpreter/kernel_isa.h"

namespace qflow {

namespace {

constexpr int64_t kLanes = LaneSums::kLanes;

// SSE2 pairs in the baseline copy, whole registers in the others: the eight lanes are
// kLanes / W vectors of W doubles.
typedef double Doubles4 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));
typedef double Doubles8 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline void add_one(double a, double b, int64_t l, bool with_error, LaneSums& s) {
  s.dot[l] += a * b;
  s.float_sq[l] += a * a;
  s.quant_sq[l] += b * b;
  if (with_error) {
    const double e = a - b;
    s.error_sq[l] += e * e;
    s.max_abs[l] = std::max(s.max_abs[l], std::fabs(e));
  }
}

// Lanes hW .. hW + W - 1 in vector h, loaded from and stored back to `s`.
template <typename Doubles, typename Floats, bool kError>
[[gnu::always_inline]] inline void body(const float* x, const float* q, int64_t n, int64_t first, LaneSums& s) {
  constexpr int64_t W = sizeof(Doubles) / sizeof(double), H = kLanes / W;
  int64_t i = 0;
  for (; i < n && (first + i) % kLanes != 0; ++i) add_one(x[i], q[i], (first + i) % kLanes, kError, s);
  Doubles dot[H], fsq[H], qsq[H], esq[H], mx[H];
  for (int64_t h = 0; h < H; ++h) {
    std::memcpy(&dot[h], s.dot + h * W, sizeof(Doubles));
    std::memcpy(&fsq[h], s.float_sq + h * W, sizeof(Doubles));
    std::memcpy(&qsq[h], s.quant_sq + h * W, sizeof(Doubles));
    std::memcpy(&esq[h], s.error_sq + h * W, sizeof(Doubles));
    std::memcpy(&mx[h], s.max_abs + h * W, sizeof(Doubles));
  }
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t h = 0; h < H; ++h) {
      Floats fa, fb;  // loaded in place: a function returning a vector changes the ABI
      std::memcpy(&fa, x + i + W * h, sizeof fa);
      std::memcpy(&fb, q + i + W * h, sizeof fb);
      const Doubles a = __builtin_convertvector(fa, Doubles), b = __builtin_convertvector(fb, Doubles);
      dot[h] += a * b;
      fsq[h] += a * a;
      qsq[h] += b * b;
      if constexpr (kError) {
        const Doubles e = a - b;
        esq[h] += e * e;
        const Doubles abs_e = e < 0.0 ? -e : e;
        mx[h] = mx[h] < abs_e ? abs_e : mx[h];  // as std::max: a NaN error leaves the maximum
      }
    }
  for (int64_t h = 0; h < H; ++h) {
    std::memcpy(s.dot + h * W, &dot[h], sizeof(Doubles));
    std::memcpy(s.float_sq + h * W, &fsq[h], sizeof(Doubles));
    std::memcpy(s.quant_sq + h * W, &qsq[h], sizeof(Doubles));
    std::memcpy(s.error_sq + h * W, &esq[h], sizeof(Doubles));
    std::memcpy(s.max_abs + h * W, &mx[h], sizeof(Doubles));
  }
  for (; i < n; ++i) add_one(x[i], q[i], (first + i) % kLanes, kError, s);
}

template <typename Doubles, typename Floats>
[[gnu::always_inline]] inline void dispatch(const float* x, const float* q, int64_t n, int64_t first, bool with_error,
                                            LaneSums& s) {
  if (with_error) body<Doubles, Floats, true>(x, q, n, first, s);
  else body<Doubles, Floats, false>(x, q, n, first, s);
}

void sums_baseline(const float* x, const float* q, int64_t n, int64_t first, bool with_error, LaneSums& s) {
  dispatch<Doubles4, Floats4>(x, q, n, first, with_error, s);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define QFLOW_LANE_SUMS_X86 1
__attribute__((target("avx2"))) void sums_avx2(const float* x, const float* q, int64_t n, int64_t first,
                                               bool with_error, LaneSums& s) {
  dispatch<Doubles4, Floats4>(x, q, n, first, with_error, s);
}
__attribute__((target("avx512f"))) void sums_avx512(const float* x, const float* q, int64_t n, int64_t first,
                                                    bool with_error, LaneSums& s) {
  dispatch<Doubles8, Floats8>(x, q, n, first, with_error, s);
}
#endif

}  // namespace

void add_lane_sums(const float* x, const float* q, int64_t n, int64_t first, bool with_error, LaneSums& sums) {
#ifdef QFLOW_LANE_SUMS_X86
  if (kernel_isa_allows_avx512()) return sums_avx512(x, q, n, first, with_error, sums);
  if (kernel_isa_allows_avx2()) return sums_avx2(x, q, n, first, with_error, sums);
#endif
  sums_baseline(x, q, n, first, with_error, sums);
}

double lane_tree(const double* v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }

}  // namespace qflow
