// Input conversion: a uint8 frame (gray, rgb, bgr, yuv444, nv12) to the quantized NCHW tensor
// of the first layer, with BT.601 full-range colour conversion in Q16 integers and one
// 256-entry table per output channel for the normalization and quantization.
#include <string>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx {

namespace {

int32_t clamp_u8(int32_t v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

// Arithmetic right shift of a signed value is a floor in C++20; adding half first rounds
// half up.
int32_t q16_round(int32_t v) { return (v + (int32_t{1} << (kColorFracBits - 1))) >> kColorFracBits; }

}  // namespace

void yuv_to_rgb(int32_t y, int32_t u, int32_t v, int32_t rgb[3]) {
  const int32_t du = u - 128, dv = v - 128;
  rgb[0] = clamp_u8(y + q16_round(kYuvRv * dv));
  rgb[1] = clamp_u8(y + q16_round(-kYuvGu * du - kYuvGv * dv));
  rgb[2] = clamp_u8(y + q16_round(kYuvBu * du));
}

int64_t frame_channels(PixelFormat format) { return format == PixelFormat::Gray ? 1 : 3; }

int64_t frame_elements(const InputConvertParams& p) {
  if (p.format == PixelFormat::Nv12) return p.batch * p.height * 3 / 2 * p.width;
  return p.batch * frame_channels(p.format) * p.height * p.width;
}

Status input_convert(const InputConvertParams& p, std::span<const int32_t> x, std::span<const int32_t> table,
                     std::span<int32_t> y) {
  const int64_t fc = frame_channels(p.format);
  const auto channels = static_cast<int64_t>(p.channels.size());
  if (p.batch < 0 || p.height < 1 || p.width < 1 || channels < 1)
    return invalid_input("input_convert: empty frame or no output channels");
  if (p.format == PixelFormat::Nv12 && (p.height % 2 != 0 || p.width % 2 != 0))
    return invalid_input("input_convert: nv12 needs an even height and width, got " + std::to_string(p.height) + "x" +
                         std::to_string(p.width));
  if (static_cast<int64_t>(x.size()) != frame_elements(p))
    return invalid_input("input_convert: the frame has " + std::to_string(x.size()) + " values, expected " +
                         std::to_string(frame_elements(p)));
  if (static_cast<int64_t>(table.size()) != channels * 256)
    return invalid_input("input_convert: the table has " + std::to_string(table.size()) + " entries, expected " +
                         std::to_string(channels * 256));
  const int64_t plane = p.height * p.width;
  if (static_cast<int64_t>(y.size()) != p.batch * channels * plane)
    return invalid_input("input_convert: the output has " + std::to_string(y.size()) + " values, expected " +
                         std::to_string(p.batch * channels * plane));
  if (p.yuv_to_rgb && fc != 3) return invalid_input("input_convert: yuv_to_rgb needs a three-channel frame");
  for (const int32_t c : p.channels)
    if (c < 0 || c >= fc) return invalid_input("input_convert: channel " + std::to_string(c) + " is out of range");
  const Range r = range_of(p.output.type);
  for (const int32_t t : table)
    if (t < r.min || t > r.max) return invalid_input("input_convert: table entry " + std::to_string(t) + " is outside the output type");
  for (const int32_t v : x)
    if (v < 0 || v > 255) return invalid_input("input_convert: frame value " + std::to_string(v) + " is outside [0, 255]");

  int32_t pixel[3] = {0, 0, 0};
  for (int64_t n = 0; n < p.batch; ++n) {
    const int32_t* frame = x.data() + n * (frame_elements(p) / (p.batch > 0 ? p.batch : 1));
    int32_t* out = y.data() + n * channels * plane;
    for (int64_t h = 0; h < p.height; ++h)
      for (int64_t w = 0; w < p.width; ++w) {
        if (p.format == PixelFormat::Nv12) {
          const int32_t* uv = frame + plane + (h / 2) * p.width + (w / 2) * 2;
          pixel[0] = frame[h * p.width + w];
          pixel[1] = uv[0];
          pixel[2] = uv[1];
        } else {
          for (int64_t c = 0; c < fc; ++c)
            pixel[c] = p.nhwc ? frame[(h * p.width + w) * fc + c] : frame[c * plane + h * p.width + w];
        }
        if (p.yuv_to_rgb) {
          int32_t rgb[3];
          yuv_to_rgb(pixel[0], pixel[1], pixel[2], rgb);
          pixel[0] = rgb[0];
          pixel[1] = rgb[1];
          pixel[2] = rgb[2];
        }
        for (int64_t c = 0; c < channels; ++c)
          out[c * plane + h * p.width + w] = table[static_cast<size_t>(c * 256 + pixel[p.channels[static_cast<size_t>(c)]])];
      }
  }
  return Status::ok();
}

}  // namespace qflow::fx
