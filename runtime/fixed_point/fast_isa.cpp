// Run-time choice of the fast kernels' instruction set (docs/fixed-point.md, "Fast kernels").
#include <algorithm>
#include <cstdint>

#include "fixed_point/fast_kernels.h"
#include "qflow/runtime/isa_cap.h"

namespace qflow::fx::fast {

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Portable: return true;
#if defined(__x86_64__) && defined(__GNUC__)
    case Isa::Avx2: return __builtin_cpu_supports("avx2");
#if defined(__clang__) && __clang_major__ < 16
    // clang before 16 has no "avxvnni" feature name (the fuzz build uses Debian's clang 14):
    // the AVX2 kernels run instead.
    case Isa::AvxVnni: return false;
#else
    case Isa::AvxVnni: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
#endif
    case Isa::Avx512Vnni:  // the byte conversions of the quad conv2d use AVX-512 BW as well
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
#else
    default: return false;
#endif
  }
  return false;
}

bool vbmi_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vbmi");
  return supported;
#else
  return false;
#endif
}

bool isa_allowed(Isa isa) {
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2: return isa::allows(isa::Level::avx2);
    case Isa::AvxVnni: return isa::allows(isa::Level::avxvnni);
    case Isa::Avx512Vnni: return isa::allows(isa::Level::avx512);
  }
  return false;
}

Isa best_isa() {
  for (const Isa isa : {Isa::Avx512Vnni, Isa::AvxVnni, Isa::Avx2})
    if (isa_allowed(isa) && isa_supported(isa)) return isa;
  return Isa::Portable;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Portable: return "portable";
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512Vnni: return "avx512vnni";
  }
  return "?";
}

bool supports(QType activation, QType weight) { return !is_16bit(activation) && weight == QType::Int8; }

bool supports_conv2d(QType activation, int32_t zero_point, QType weight, int64_t reduction, int64_t max_abs_bias) {
  if (weight != QType::Int8) return false;
  if (!is_16bit(activation)) return true;
  const Range r = range_of(activation);
  if (int64_t{r.min} - zero_point < INT16_MIN || int64_t{r.max} - zero_point > INT16_MAX) return false;
  return reduction <= max_reduction(activation, zero_point, weight, max_abs_bias, INT32_MAX);
}

int64_t chunk_reduction(QType activation, int32_t zero_point, QType weight, int32_t weight_zero_point) {
  const Range r = range_of(activation);
  if (int64_t{r.min} - zero_point < INT16_MIN || int64_t{r.max} - zero_point > INT16_MAX) return 0;
  const Range w = range_of(weight);
  const int64_t part = is_16bit(weight) ? (weight_zero_point == 0 ? 128 : 0)
                                        : std::max(int64_t{weight_zero_point} - w.min, int64_t{w.max} - weight_zero_point);
  if (part == 0) return 0;
  const int64_t x = std::max(int64_t{zero_point} - r.min, int64_t{r.max} - zero_point);
  return INT32_MAX / (x * part);
}

bool supports_matmul(QType a, int32_t a_zero_point, QType b, int32_t b_zero_point) {
  return supports(a, b) || chunk_reduction(a, a_zero_point, b, b_zero_point) >= 2 * kDepthStep;
}

}  // namespace qflow::fx::fast
