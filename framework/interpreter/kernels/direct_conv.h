// Direct 2-D convolution for convs with few output channels, where writing the im2col
// columns costs as much as the GEMM that reads them (each column value feeds only M
// multiply-adds): PP-OCRv4 det's 96 -> 24 channel 3x3 convs at 160x160 spent half their
// time in im2col. The kernel reads the image rows in place, six output channels by 16 (AVX2)
// or twelve by 32 (AVX-512) positions in registers, and computes each output as the fused
// multiply-add chain sgemm computes over the im2col rows in their order (channel, kernel
// row, kernel column), padding taps included as zeros: the bytes of the GEMM path.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/interpreter/kernels/conv_geometry.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Convs with at most this many output channels take the direct path; above it the GEMM,
// which reuses each column value for many channels, pays for its im2col.
inline constexpr int64_t kDirectConvMaxChannels = 48;
// Output channels held in registers at once, as sgemm's tile rows.
inline constexpr int64_t kDirectConvStrip = 6;

// A float32 weight [M, C, kh, kw] (one group) in strips of six output channels: strip s
// holds, for each im2col row p, the weights of channels 6s .. 6s + 5 (zeros past M).
class DirectConvWeights {
 public:
  // Null when the direct path cannot run this weight: not float32 or rank 4, a group > 1,
  // more than kDirectConvMaxChannels output channels, a 1x1 window or one more than 16
  // columns wide.
  static std::unique_ptr<DirectConvWeights> make(const Tensor& weight, int64_t group);
  int64_t channels() const { return m_; }
  int64_t rows() const { return k_; }
  const float* strip(int64_t s) const { return strips_.data() + s * k_ * kDirectConvStrip; }

 private:
  int64_t m_ = 0, k_ = 0;
  std::vector<float> strips_;
};

// The direct kernel on one conv geometry: its taps, made once per run, then any tiles of
// output positions. Only for geometries direct_conv_fits takes.
class DirectConvPlan {
 public:
  // One im2col row p = (c, i, j): where its values start in the image, relative to the output
  // position's row and column, and which of the kw columns of the window it reads.
  struct Tap {
    int64_t offset;  // c * H * W + dy * W + dx
    int64_t dy;      // i * dilation_h - pad_top
    int64_t column;  // j; dx = j * dilation_w - pad_left
  };
  DirectConvPlan(const DirectConvWeights& weights, const ConvGeometry& g);
  // Output positions [col_begin, col_begin + count) of all channels: out [M x count] (row
  // pitch ldc) from `image` ([C, H, W]), as conv_gemm_tile computes them.
  void tile(const float* image, int64_t col_begin, int64_t count, float* out, int64_t ldc) const;

 private:
  const DirectConvWeights& weights_;
  std::vector<Tap> taps_;
  std::vector<int64_t> column_dx_;  // dx of each window column j
  int64_t height_, width_, out_width_, stride_h_;
  int64_t min_dy_ = 0, max_dy_ = 0;  // the taps' row offsets: a chunk row r reads rows r + min_dy_ .. r + max_dy_
};

// Whether the direct kernel computes this geometry: 2-D, not pointwise (sgemm reads a 1x1
// conv's image in place already), one group, unit stride along the width (its positions are
// contiguous runs of a row), a window at most 16 columns wide, and an AVX2 or AVX-512 sgemm
// tile in use (the portable one rounds products separately). Other strides, dilations and
// pads are fine.
bool direct_conv_fits(const ConvGeometry& g);

}  // namespace qflow
