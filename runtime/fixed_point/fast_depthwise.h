// The direct depthwise paths of the fast conv2d (fast_depthwise.cpp, fast_depthwise_windows.cpp);
// internal to the fast kernels.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fixed_point/fast_kernels.h"

namespace qflow::fx::fast::detail {

// y = conv2d(x) for a packed conv with one input channel per group (k.taps filled); `plane`,
// `acc` and `sums` (chunked: the int64 sums) are scratch buffers, grown as needed.
void depthwise_conv2d(const PackedConv2D& k, Isa isa, const int32_t* x, int32_t* y, std::vector<int32_t>& plane,
                      std::vector<int32_t>& acc, std::vector<int64_t>& sums);

// dst[i] = uint8(src[i] + add) for i < n, the sums in [0, 255]: the byte planes of the quad
// conv2d and of the depthwise windows (fast_linear.cpp).
void convert_to_bytes(Isa isa, const int32_t* src, int64_t n, int32_t add, uint8_t* dst);

// Fills `out` for a checked depthwise conv with 8-bit activations whose windows fit 64 bytes;
// leaves it empty otherwise.
void pack_depthwise_windows(const Conv2DParams& p, std::span<const int32_t> w, std::span<const int32_t> bias,
                            DepthwiseWindows& out);
// True where depthwise_windows_conv2d runs: Avx512Vnni on a CPU with VBMI.
bool depthwise_windows_supported(Isa isa);
#if defined(__x86_64__) && defined(__GNUC__)
// y = conv2d(x) on k.windows; x holds values of the input type. `plane` is scratch.
void depthwise_windows_conv2d(const PackedConv2D& k, const int32_t* x, int32_t* y, std::vector<uint8_t>& plane);
#endif

}  // namespace qflow::fx::fast::detail
