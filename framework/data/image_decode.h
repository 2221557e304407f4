// Image files (PNG, JPEG) decoded with stb_image into 8-bit interleaved pixels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

// The file extensions taken as images (compared case-insensitively).
bool is_image_file(const std::string& path);

struct ImageInfo {
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;  // as stored: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
};

// Height x width x channels, row-major, channels interleaved; 16-bit images come reduced
// to 8 bits.
struct DecodedImage {
  ImageInfo info;
  std::vector<uint8_t> pixels;
};

// The size without decoding the pixels. Errors name the file and stb_image's reason.
Expected<ImageInfo> probe_image(const std::string& path);
// Decodes the whole image. Safe to call from several threads at once.
Expected<DecodedImage> decode_image(const std::string& path);

}  // namespace qflow
