// The float 1x1 convolution of the CPU segments (stride 1, no padding, one group) as a
// register-blocked product, the shape of the convolutions the precision search leaves in float.
// Each output is bias (or 0), then + w * x for input channel 0, 1, ... in turn, a product
// rounded before its addition: the order and roundings of op_conv's loop, so every vector
// width gives its bits.
#pragma once

#include <cstdint>

namespace qflow::lowered::detail {

// y[o * pixels + i] = bias[o] + sum over c of w[o * channels + c] * x[c * pixels + i], for
// o < outputs, i < pixels; bias may be null (0).
void pointwise_conv(const float* w, const float* bias, const float* x, float* y, int64_t outputs, int64_t channels,
                    int64_t pixels);

}  // namespace qflow::lowered::detail
