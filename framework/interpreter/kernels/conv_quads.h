// The exact int32 sums of a 2-D convolution of 8-bit operands (ConvInteger, QLinearConv) on
// CPUs with VNNI: byte quads through fx::fast::gemm_quads_u8s8, four products per lane and
// instruction, twice the work per instruction of the int16 pairs the other CPUs take.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/interpreter/kernel.h"
#include "framework/interpreter/kernels/conv_geometry.h"

namespace qflow {

// Whether conv2d_quads_s32 computes this convolution: 8-bit x and w of a 2-D convolution on
// a VNNI CPU, with a padded input plane of reasonable size. The caller has checked that a sum
// of kernel-window products cannot leave int32.
bool conv_quads_apply(const ConvGeometry& g, DType x, DType w);

// y (shaped g.column_shape()) = sum over each window of (x - x_zero_point) * (w - w_zero_point[m]),
// w_zero_point per tensor (one value) or per output channel.
void conv2d_quads_s32(const KernelContext& context, const ConvGeometry& g, const Tensor& x, int32_t x_zero_point,
                      const Tensor& w, const std::vector<int32_t>& w_zero_point, int32_t* y);

}  // namespace qflow
