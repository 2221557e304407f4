// The direct depthwise path of the fast conv2d (fast_depthwise.cpp); internal to the fast kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/fixed_point/fast_kernels.h"

namespace qflow::fx::fast::detail {

// y = conv2d(x) for a packed conv with one input channel per group (k.taps filled); `plane`
// and `acc` are scratch buffers, grown as needed.
void depthwise_conv2d(const PackedConv2D& k, Isa isa, const int32_t* x, int32_t* y, std::vector<int32_t>& plane,
                      std::vector<int32_t>& acc);

}  // namespace qflow::fx::fast::detail
