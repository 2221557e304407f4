// Image decoding through stb_image, compiled here with static linkage so that its symbols
// stay private to libqflow_core; files are read with the bounded reader first.
#include "framework/data/image_decode.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>

#include "framework/core/file_io.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wuseless-cast"
#pragma GCC diagnostic ignored "-Wold-style-cast"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace qflow {

namespace {

// Encoded images larger than this are refused before decoding.
constexpr int64_t kMaxImageFileBytes = int64_t{1} << 30;
// stb_image refuses larger images itself; checking first gives a message naming the size.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

std::string reason() {
  const char* text = stbi_failure_reason();
  return text ? text : "unknown reason";
}

Expected<std::string> read_image_file(const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path, kMaxImageFileBytes));
  if (bytes.size() > static_cast<std::size_t>(INT_MAX))
    return invalid_input(path + ": " + std::to_string(bytes.size()) + " bytes is too large an image file");
  return bytes;
}

Status check_size(const std::string& path, const ImageInfo& info) {
  if (info.width <= 0 || info.height <= 0 || info.width > kMaxPixels / info.height)
    return invalid_input(path + ": image size " + std::to_string(info.width) + "x" + std::to_string(info.height) +
                         " is outside 1.." + std::to_string(kMaxPixels) + " pixels");
  return Status::ok();
}

}  // namespace

bool is_image_file(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

Expected<ImageInfo> probe_image(const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_image_file(path));
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), static_cast<int>(bytes.size()), &width,
                             &height, &channels))
    return invalid_input(path + ": cannot decode the image (" + reason() + ")");
  ImageInfo info{width, height, channels};
  QFLOW_RETURN_IF_ERROR(check_size(path, info));
  return info;
}

Expected<DecodedImage> decode_image(const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_image_file(path));
  int width = 0, height = 0, channels = 0;
  // The failure reason is thread-local in stb_image 2.26 and later, so concurrent decodes
  // report their own errors.
  stbi_uc* pixels = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                          static_cast<int>(bytes.size()), &width, &height, &channels, 0);
  if (!pixels) return invalid_input(path + ": cannot decode the image (" + reason() + ")");
  DecodedImage image;
  image.info = {width, height, channels};
  Status size = check_size(path, image.info);
  if (size.is_ok()) {
    const std::size_t n = static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * static_cast<std::size_t>(channels);
    image.pixels.assign(pixels, pixels + n);
  }
  stbi_image_free(pixels);
  if (!size.is_ok()) return size;
  return image;
}

}  // namespace qflow
