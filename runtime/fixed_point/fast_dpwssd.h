// vpdpwssd on AVX-512 accumulators, for the inner loops of the fast kernels; internal to them.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace qflow::fx::fast::detail {

// acc += the pairwise int16 products of a and b (per int32 lane two products, wrapping). In
// assembly: GCC 12 keeps the intrinsic's accumulators in rotating registers, with a copy per
// product that halves the rate of a block of them.
__attribute__((target("avx512f,avx512vnni"))) inline void dpwssd_avx512(__m512i& acc, __m512i a, __m512i b) {
  __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

}  // namespace qflow::fx::fast::detail
#endif
