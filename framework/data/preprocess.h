// Image preprocessing: color order, bilinear resize (optionally keeping the aspect ratio and
// padding), scale, per-channel mean/std, and the sample layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/data/image_decode.h"
#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// 3 for rgb and bgr, 1 for gray.
int64_t color_channels(ColorOrder color);

// Bilinear resize of a height x width x channels image (channels interleaved) on half-pixel
// centers, as ONNX Resize with mode=linear and coordinate_transformation_mode=half_pixel
// (no antialiasing): output pixel x samples the input at (x + 0.5) * in / out - 0.5, clamped
// to [0, in - 1]. Arithmetic is double with a fixed order, so the result is deterministic.
std::vector<float> resize_bilinear(const std::vector<float>& image, int64_t height, int64_t width, int64_t channels,
                                   int64_t out_height, int64_t out_width);

// Where a keep-ratio resize puts the image inside the target: the resized size and the
// top/left offsets (the padding is split evenly, the odd pixel going to the bottom/right).
struct Letterbox {
  int64_t height = 0;
  int64_t width = 0;
  int64_t top = 0;
  int64_t left = 0;
};
Letterbox letterbox(int64_t height, int64_t width, int64_t target_height, int64_t target_width);

// The sample shape images of this decoded size get under `spec`.
Shape image_sample_shape(int64_t height, int64_t width, const DataSpec& spec);

// The float32 sample for one decoded image.
Expected<Tensor> preprocess_image(const DecodedImage& image, const DataSpec& spec);

}  // namespace qflow
