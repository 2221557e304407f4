// Direct 2-D depthwise convolution of one plane (one input channel per group): the plane is
// copied once into a zero-padded buffer split by column phase (x mod stride), so every kernel
// tap reads a contiguous run of it, and outputs accumulate in registers.
#pragma once

#include <cstdint>

#include "framework/runtime/kernels/conv_geometry.h"

namespace qflow {

enum class DepthwiseIsa { Portable, Avx2 };

bool depthwise_isa_supported(DepthwiseIsa isa);
// Avx2 where the CPU has it.
DepthwiseIsa depthwise_best_isa();

// Elements of the scratch buffer depthwise_plane needs for a 2-D geometry g; INT64_MAX when
// the count overflows.
int64_t depthwise_scratch_size(const ConvGeometry& g);

// out[oy][ox] = sum over (ky, kx), in that order, of w[ky][kx] * x[oy*sh - ph + ky*dh][ox*sw - pw + kx*dw],
// taps outside the image reading zero; each product is rounded, then added (no fused
// multiply-add), so every instruction set gives the same bits. `scratch` holds
// depthwise_scratch_size(g) elements. Avx2 applies to float only; double always runs the
// portable loop.
void depthwise_plane(const float* image, const float* weights, float* out, const ConvGeometry& g, float* scratch,
                     DepthwiseIsa isa);
void depthwise_plane(const double* image, const double* weights, double* out, const ConvGeometry& g, double* scratch,
                     DepthwiseIsa isa);

}  // namespace qflow
