// The 1x1 float convolution: blocks of outputs x pixels held in vector registers while the
// input channels stream past (cpu_pointwise.h). The vector width follows the instruction-set
// cap; every width computes each output with the same chain of roundings.
#include "lowered/cpu_pointwise.h"

#include "qflow/runtime/isa_cap.h"

namespace qflow::lowered::detail {
namespace {

constexpr int64_t kRows = 6;  // outputs per block: 6 x 2 vectors stay in registers

// V holds L floats. Products and sums are separate operations (no contraction under
// -std=c++20), as in the scalar loop.
template <typename V, int64_t L>
__attribute__((always_inline)) inline void pointwise(const float* w, const float* bias, const float* x, float* y,
                                                     int64_t outputs, int64_t channels, int64_t pixels) {
  constexpr int64_t kCols = 2 * L;
  int64_t o = 0;
  for (; o + kRows <= outputs; o += kRows) {
    int64_t i = 0;
    for (; i + kCols <= pixels; i += kCols) {
      V acc[kRows][2];
      for (int64_t r = 0; r < kRows; ++r) {
        const V b = (bias ? bias[o + r] : 0.0f) - V{};  // a broadcast: b - (+0) is b, -0 included
        acc[r][0] = b;
        acc[r][1] = b;
      }
      for (int64_t c = 0; c < channels; ++c) {
        V x0, x1;
        __builtin_memcpy(&x0, x + c * pixels + i, sizeof(V));
        __builtin_memcpy(&x1, x + c * pixels + i + L, sizeof(V));
        for (int64_t r = 0; r < kRows; ++r) {
          const float wv = w[(o + r) * channels + c];
          acc[r][0] = acc[r][0] + wv * x0;
          acc[r][1] = acc[r][1] + wv * x1;
        }
      }
      for (int64_t r = 0; r < kRows; ++r) {
        __builtin_memcpy(y + (o + r) * pixels + i, &acc[r][0], sizeof(V));
        __builtin_memcpy(y + (o + r) * pixels + i + L, &acc[r][1], sizeof(V));
      }
    }
    for (; i < pixels; ++i)
      for (int64_t r = 0; r < kRows; ++r) {
        float acc = bias ? bias[o + r] : 0.0f;
        for (int64_t c = 0; c < channels; ++c) acc = acc + w[(o + r) * channels + c] * x[c * pixels + i];
        y[(o + r) * pixels + i] = acc;
      }
  }
  for (; o < outputs; ++o) {
    const float b = bias ? bias[o] : 0.0f;
    for (int64_t i = 0; i < pixels; ++i) y[o * pixels + i] = b;
    for (int64_t c = 0; c < channels; ++c) {
      const float wv = w[o * channels + c];
      for (int64_t i = 0; i < pixels; ++i) y[o * pixels + i] = y[o * pixels + i] + wv * x[c * pixels + i];
    }
  }
}

typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));

void pointwise_portable(const float* w, const float* bias, const float* x, float* y, int64_t outputs,
                        int64_t channels, int64_t pixels) {
  pointwise<V4, 4>(w, bias, x, y, outputs, channels, pixels);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void pointwise_avx2(const float* w, const float* bias, const float* x, float* y,
                                                    int64_t outputs, int64_t channels, int64_t pixels) {
  pointwise<V8, 8>(w, bias, x, y, outputs, channels, pixels);
}

__attribute__((target("avx512f"))) void pointwise_avx512(const float* w, const float* bias, const float* x, float* y,
                                                         int64_t outputs, int64_t channels, int64_t pixels) {
  pointwise<V16, 16>(w, bias, x, y, outputs, channels, pixels);
}
#endif

}  // namespace

void pointwise_conv(const float* w, const float* bias, const float* x, float* y, int64_t outputs, int64_t channels,
                    int64_t pixels) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx512 && isa::allows(isa::Level::avx512)) return pointwise_avx512(w, bias, x, y, outputs, channels, pixels);
  if (avx2 && isa::allows(isa::Level::avx2)) return pointwise_avx2(w, bias, x, y, outputs, channels, pixels);
#endif
  pointwise_portable(w, bias, x, y, outputs, channels, pixels);
}

}  // namespace qflow::lowered::detail
