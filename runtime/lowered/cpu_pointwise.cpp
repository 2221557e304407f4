// The 1x1 float convolution: blocks of outputs x pixels held in vector registers while the
// input channels stream past (cpu_pointwise.h). The vector width follows the instruction-set
// cap; every width computes each output with the same chain of roundings.
#include "lowered/cpu_pointwise.h"

#include "qflow/runtime/isa_cap.h"

namespace qflow::lowered::detail {
namespace {

constexpr int64_t kRows = 6;  // outputs per block: 6 x 2 vectors stay in registers

// Outputs [o, o + kRows) at pixels [i, i + H * L): bias, then + w * x channel by channel. V
// holds L floats; products and sums are separate operations (no contraction, see
// CMakeLists.txt), as in the scalar loop.
template <typename V, int64_t L, int64_t H>
__attribute__((always_inline)) inline void block(const float* w, const float* bias, const float* x, float* y, int64_t o,
                                                 int64_t i, int64_t channels, int64_t pixels) {
  V acc[kRows][H] = {};
  for (int64_t r = 0; r < kRows; ++r) {
    const V b = (bias ? bias[o + r] : 0.0f) - V{};  // a broadcast: b - (+0) is b, -0 included
    for (int64_t h = 0; h < H; ++h) acc[r][h] = b;
  }
  for (int64_t c = 0; c < channels; ++c) {
    V xv[H];
    for (int64_t h = 0; h < H; ++h) __builtin_memcpy(&xv[h], x + c * pixels + i + h * L, sizeof(V));
    for (int64_t r = 0; r < kRows; ++r) {
      const float wv = w[(o + r) * channels + c];
      for (int64_t h = 0; h < H; ++h) acc[r][h] = acc[r][h] + wv * xv[h];
    }
  }
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t h = 0; h < H; ++h) __builtin_memcpy(y + (o + r) * pixels + i + h * L, &acc[r][h], sizeof(V));
}

// Outputs [o0, o1) at pixels [i0, i1), one output row at a time (the compiler vectorizes the
// pixel loop): what the blocks leave over.
__attribute__((always_inline)) inline void rows(const float* w, const float* bias, const float* x, float* y, int64_t o0,
                                                int64_t o1, int64_t i0, int64_t i1, int64_t channels, int64_t pixels) {
  for (int64_t o = o0; o < o1; ++o) {
    float* yo = y + o * pixels;
    const float b = bias ? bias[o] : 0.0f;
    for (int64_t i = i0; i < i1; ++i) yo[i] = b;
    for (int64_t c = 0; c < channels; ++c) {
      const float wv = w[o * channels + c];
      const float* xc = x + c * pixels;
      for (int64_t i = i0; i < i1; ++i) yo[i] = yo[i] + wv * xc[i];
    }
  }
}

// Pixel blocks outside, output blocks inside: a block of input columns is read by every
// output while it is in cache.
template <typename V, int64_t L>
__attribute__((always_inline)) inline void pointwise(const float* w, const float* bias, const float* x, float* y,
                                                     int64_t outputs, int64_t channels, int64_t pixels) {
  const int64_t full_rows = outputs / kRows * kRows;
  int64_t i = 0;
  for (; i + 2 * L <= pixels; i += 2 * L)
    for (int64_t o = 0; o < full_rows; o += kRows) block<V, L, 2>(w, bias, x, y, o, i, channels, pixels);
  for (; i + L <= pixels; i += L)
    for (int64_t o = 0; o < full_rows; o += kRows) block<V, L, 1>(w, bias, x, y, o, i, channels, pixels);
  rows(w, bias, x, y, 0, full_rows, i, pixels, channels, pixels);
  rows(w, bias, x, y, full_rows, outputs, 0, pixels, channels, pixels);
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
