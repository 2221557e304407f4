// Direct 2-D depthwise convolution (one input channel per group), plane by plane: each plane
// is copied into a zero-padded buffer split by column phase (x mod stride), so every kernel
// tap reads a contiguous run of it, and outputs accumulate in registers.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/interpreter/kernels/conv_geometry.h"

namespace qflow {

enum class DepthwiseIsa { Portable, Avx2, Avx512 };

bool depthwise_isa_supported(DepthwiseIsa isa);
// The widest of Avx512, Avx2 the CPU has and the cap (QFLOW_ISA) admits.
DepthwiseIsa depthwise_best_isa();

// What a 2-D geometry's planes share: the padded buffer's layout and the tap offsets in it,
// computed once per Conv call rather than per plane.
class DepthwisePlan {
 public:
  explicit DepthwisePlan(const ConvGeometry& g);

  // Elements of the scratch buffer a plane needs: at most a few times the input and output
  // planes. 0 when the padded plane would be larger than that (pads or strides far beyond
  // the image); plane() then runs a direct loop with the same sums.
  int64_t scratch_size() const { return size_; }

  // Zeroes `scratch`; plane() then writes only the image part of it, so the padding stays
  // zero for every plane of this plan run on the same buffer.
  template <typename T>
  void clear(T* scratch) const;

  // out[oy][ox] = sum over (ky, kx), in that order, of w[ky][kx] * x[oy*sh - ph + ky*dh][ox*sw - pw + kx*dw],
  // taps outside the image reading zero; each product is rounded, then added (no fused
  // multiply-add), so every instruction set gives the same bits. `scratch` was clear()ed by
  // this plan. Avx2 applies to float only; double always runs the portable loop.
  void plane(const float* image, const float* weights, float* out, float* scratch, DepthwiseIsa isa) const;
  void plane(const double* image, const double* weights, double* out, double* scratch, DepthwiseIsa isa) const;

 private:
  template <typename T>
  void fill(const T* image, T* scratch, bool avx2) const;
  template <typename T>
  void direct(const T* image, const T* weights, T* out) const;
  template <typename T>
  void accumulate_portable(const T* scratch, const T* weights, T* out) const;
  template <typename T>
  void run(const T* image, const T* weights, T* out, T* scratch, DepthwiseIsa isa) const;

  ConvGeometry g_;
  int64_t phases_ = 1;  // column stride sw: phase p holds padded columns p, p + sw, ...
  int64_t rows_ = 0;    // padded rows the outputs read; 0: the direct loop
  int64_t width_ = 0;   // columns of one phase row
  int64_t size_ = 0;
  std::vector<int64_t> taps_;  // offset of tap (ky, kx) for output (0, 0), in (ky, kx) order
};

}  // namespace qflow
