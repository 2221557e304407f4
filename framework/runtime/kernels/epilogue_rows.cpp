// The Conv/Gemm epilogue on rows of float32 outputs, compiled twice (AVX2 and the baseline,
// picked at load time): the same per-element operations at twice the vector width. Neither
// clone enables FMA, so nothing is contracted and both give the bits of the separate nodes.
#include "framework/runtime/kernels/activation.h"

namespace qflow::activation {

__attribute__((target_clones("avx2", "default"))) void finish_rows(const Epilogue* epilogue, float* data, int64_t n,
                                                                  int64_t channel, const float* bias) {
  if (bias) {
    const float b = *bias;
    for (int64_t i = 0; i < n; ++i) data[i] += b;
  }
  if (epilogue) apply(*epilogue, data, n, channel);
}

}  // namespace qflow::activation
