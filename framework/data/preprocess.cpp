// Image preprocessing in the documented order: color, resize (and pad), scale/mean/std, layout.
#include "framework/data/preprocess.h"

#include <algorithm>
#include <cmath>

namespace qflow {

namespace {

// The decoded pixels as floats (0..255) in the requested color order, alpha dropped.
std::vector<float> convert_color(const DecodedImage& image, ColorOrder color) {
  const int64_t pixels = image.info.width * image.info.height;
  const int64_t in_channels = image.info.channels;
  const int64_t out_channels = color_channels(color);
  const bool in_gray = in_channels < 3;
  std::vector<float> out(static_cast<std::size_t>(pixels * out_channels));
  for (int64_t p = 0; p < pixels; ++p) {
    const uint8_t* px = image.pixels.data() + p * in_channels;
    float* dst = out.data() + p * out_channels;
    if (in_gray) {
      for (int64_t c = 0; c < out_channels; ++c) dst[c] = static_cast<float>(px[0]);
    } else if (color == ColorOrder::Gray) {
      // ITU-R BT.601 luma, the weights PIL's convert("L") and OpenCV use.
      dst[0] = static_cast<float>(0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2]);
    } else if (color == ColorOrder::Rgb) {
      for (int c = 0; c < 3; ++c) dst[c] = static_cast<float>(px[c]);
    } else {
      for (int c = 0; c < 3; ++c) dst[c] = static_cast<float>(px[2 - c]);
    }
  }
  return out;
}

struct Tap {
  int64_t lo = 0;
  int64_t hi = 0;
  double frac = 0.0;  // weight of `hi`
};

std::vector<Tap> taps(int64_t in, int64_t out) {
  std::vector<Tap> result(static_cast<std::size_t>(out));
  const double ratio = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t x = 0; x < out; ++x) {
    double at = (static_cast<double>(x) + 0.5) * ratio - 0.5;
    at = std::clamp(at, 0.0, static_cast<double>(in - 1));
    Tap& tap = result[static_cast<std::size_t>(x)];
    tap.lo = std::min(static_cast<int64_t>(std::floor(at)), in - 1);
    tap.hi = std::min(tap.lo + 1, in - 1);
    tap.frac = at - static_cast<double>(tap.lo);
  }
  return result;
}

}  // namespace

int64_t color_channels(ColorOrder color) { return color == ColorOrder::Gray ? 1 : 3; }

std::vector<float> resize_bilinear(const std::vector<float>& image, int64_t height, int64_t width, int64_t channels,
                                   int64_t out_height, int64_t out_width) {
  std::vector<float> out(static_cast<std::size_t>(out_height * out_width * channels));
  const std::vector<Tap> rows = taps(height, out_height);
  const std::vector<Tap> cols = taps(width, out_width);
  auto at = [&](int64_t y, int64_t x, int64_t c) {
    return static_cast<double>(image[static_cast<std::size_t>((y * width + x) * channels + c)]);
  };
  for (int64_t y = 0; y < out_height; ++y) {
    const Tap& r = rows[static_cast<std::size_t>(y)];
    for (int64_t x = 0; x < out_width; ++x) {
      const Tap& col = cols[static_cast<std::size_t>(x)];
      for (int64_t c = 0; c < channels; ++c) {
        const double top = at(r.lo, col.lo, c) * (1.0 - col.frac) + at(r.lo, col.hi, c) * col.frac;
        const double bottom = at(r.hi, col.lo, c) * (1.0 - col.frac) + at(r.hi, col.hi, c) * col.frac;
        out[static_cast<std::size_t>((y * out_width + x) * channels + c)] =
            static_cast<float>(top * (1.0 - r.frac) + bottom * r.frac);
      }
    }
  }
  return out;
}

Letterbox letterbox(int64_t height, int64_t width, int64_t target_height, int64_t target_width) {
  const double s = std::min(static_cast<double>(target_height) / static_cast<double>(height),
                            static_cast<double>(target_width) / static_cast<double>(width));
  Letterbox box;
  box.height = std::clamp<int64_t>(std::llround(static_cast<double>(height) * s), 1, target_height);
  box.width = std::clamp<int64_t>(std::llround(static_cast<double>(width) * s), 1, target_width);
  box.top = (target_height - box.height) / 2;
  box.left = (target_width - box.width) / 2;
  return box;
}

Shape image_sample_shape(int64_t height, int64_t width, const DataSpec& spec) {
  if (spec.resize_height > 0) {
    height = spec.resize_height;
    width = spec.resize_width;
  }
  const int64_t channels = color_channels(spec.color);
  if (spec.layout == SampleLayout::Nchw) return {channels, height, width};
  return {height, width, channels};
}

Expected<Tensor> preprocess_image(const DecodedImage& image, const DataSpec& spec) {
  const int64_t channels = color_channels(spec.color);
  int64_t height = image.info.height;
  int64_t width = image.info.width;
  std::vector<float> pixels = convert_color(image, spec.color);

  if (spec.resize_height > 0) {
    const int64_t th = spec.resize_height, tw = spec.resize_width;
    if (!spec.keep_ratio) {
      if (th != height || tw != width) pixels = resize_bilinear(pixels, height, width, channels, th, tw);
    } else {
      const Letterbox box = letterbox(height, width, th, tw);
      std::vector<float> inner = box.height == height && box.width == width
                                     ? std::move(pixels)
                                     : resize_bilinear(pixels, height, width, channels, box.height, box.width);
      pixels.assign(static_cast<std::size_t>(th * tw * channels), static_cast<float>(spec.pad_value));
      for (int64_t y = 0; y < box.height; ++y)
        std::copy_n(inner.begin() + (y * box.width * channels), box.width * channels,
                    pixels.begin() + (((y + box.top) * tw + box.left) * channels));
    }
    height = th;
    width = tw;
  }

  QFLOW_ASSIGN_OR_RETURN(Tensor sample, Tensor::make(DType::Float32, image_sample_shape(height, width, spec)));
  float* out = sample.data<float>();
  const bool nchw = spec.layout == SampleLayout::Nchw;
  const int64_t plane = height * width;
  for (int64_t c = 0; c < channels; ++c) {
    const double mean = spec.mean.size() == 1 ? spec.mean[0] : spec.mean[static_cast<std::size_t>(c)];
    const double stdev = spec.std.size() == 1 ? spec.std[0] : spec.std[static_cast<std::size_t>(c)];
    for (int64_t p = 0; p < plane; ++p) {
      const double x = pixels[static_cast<std::size_t>(p * channels + c)];
      out[nchw ? c * plane + p : p * channels + c] = static_cast<float>((x * spec.scale - mean) / stdev);
    }
  }
  return sample;
}

}  // namespace qflow
