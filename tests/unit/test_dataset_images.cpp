// Calibration data from image folders: decoding, color order, bilinear resize, keep-ratio
// padding, scale/mean/std, layouts, and the error messages. Images are written by the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include "framework/data/image_decode.h"
#include "framework/data/preprocess.h"
#include "framework/data/progress_bar.h"
#include "test_dataset_util.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace qflow {

using test::all_samples;
using test::TempDir;

namespace {

// A 1x2 RGB image: left pixel (0, 100, 50), right pixel (200, 100, 50).
void write_pair_png(const std::string& path) {
  const unsigned char pixels[] = {0, 100, 50, 200, 100, 50};
  REQUIRE(stbi_write_png(path.c_str(), 2, 1, 3, pixels, 2 * 3) != 0);
}

void write_uniform_png(const std::string& path, int width, int height, unsigned char value) {
  std::vector<unsigned char> pixels(static_cast<std::size_t>(width * height * 3), value);
  REQUIRE(stbi_write_png(path.c_str(), width, height, 3, pixels.data(), width * 3) != 0);
}

DataSpec image_spec(const std::string& folder) {
  DataSpec spec;
  spec.path = folder;
  spec.scale = 1.0;  // raw 0..255 values make the expected numbers easy to read
  return spec;
}

// The single sample of a one-image dataset.
std::vector<float> only_sample(const DataSpec& spec, Shape expected_shape) {
  Expected<Dataset> dataset = open_dataset(spec);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  CHECK(dataset->first().kind == DataSource::ImageFolder);
  CHECK(dataset->first().dtype == DType::Float32);
  CHECK(dataset->first().sample_shape == expected_shape);
  const auto samples = all_samples(*dataset);
  REQUIRE(samples.size() == 1);
  return samples[0];
}

std::string open_error(const DataSpec& spec) {
  Expected<Dataset> dataset = open_dataset(spec);
  return dataset ? std::string("(opened)") : dataset.status().message();
}

}  // namespace

TEST_CASE("dataset images: exact bilinear resize with half-pixel centers, rgb/bgr/gray, nchw/nhwc") {
  TempDir dir("dataset_images_resize");
  write_pair_png(dir.file("pair.png"));
  DataSpec spec = image_spec(dir.path());
  spec.resize_height = 1;
  spec.resize_width = 4;
  // Output x samples input (x + 0.5) * 2/4 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1).
  const std::vector<float> rgb = only_sample(spec, {3, 1, 4});
  CHECK(rgb == std::vector<float>{0, 50, 150, 200, 100, 100, 100, 100, 50, 50, 50, 50});

  spec.color = ColorOrder::Bgr;
  const std::vector<float> bgr = only_sample(spec, {3, 1, 4});
  CHECK(bgr == std::vector<float>{50, 50, 50, 50, 100, 100, 100, 100, 0, 50, 150, 200});

  spec.color = ColorOrder::Gray;
  const std::vector<float> gray = only_sample(spec, {1, 1, 4});
  const double left = 0.299 * 0 + 0.587 * 100 + 0.114 * 50;
  const double right = 0.299 * 200 + 0.587 * 100 + 0.114 * 50;
  REQUIRE(gray.size() == 4);
  CHECK(gray[0] == static_cast<float>(left));
  CHECK(gray[1] == doctest::Approx(0.75 * left + 0.25 * right).epsilon(1e-6));
  CHECK(gray[3] == static_cast<float>(right));

  spec.color = ColorOrder::Rgb;
  spec.layout = SampleLayout::Nhwc;
  const std::vector<float> nhwc = only_sample(spec, {1, 4, 3});
  CHECK(nhwc == std::vector<float>{0, 100, 50, 50, 100, 50, 150, 100, 50, 200, 100, 50});

  // Same size: no resampling at all.
  spec.layout = SampleLayout::Nchw;
  spec.resize_height = 0;
  spec.resize_width = 0;
  CHECK(only_sample(spec, {3, 1, 2}) == std::vector<float>{0, 200, 100, 100, 50, 50});
}

TEST_CASE("dataset images: scale, then per-channel mean and std") {
  TempDir dir("dataset_images_norm");
  write_pair_png(dir.file("pair.png"));
  DataSpec spec = image_spec(dir.path());
  spec.scale = 1.0 / 255.0;
  spec.mean = {0.485, 0.456, 0.406};
  spec.std = {0.229, 0.224, 0.225};
  const std::vector<float> values = only_sample(spec, {3, 1, 2});
  const double pixels[3][2] = {{0, 200}, {100, 100}, {50, 50}};
  REQUIRE(values.size() == 6);
  for (int c = 0; c < 3; ++c)
    for (int x = 0; x < 2; ++x)
      CHECK(values[static_cast<std::size_t>(c * 2 + x)] ==
            static_cast<float>((pixels[c][x] * (1.0 / 255.0) - spec.mean[static_cast<std::size_t>(c)]) /
                               spec.std[static_cast<std::size_t>(c)]));

  Expected<Dataset> dataset = open_dataset(spec);
  REQUIRE(dataset.has_value());
  Expected<std::string> json = dataset_json(*dataset);
  REQUIRE(json.has_value());
  CHECK(json->find("\"source\": \"image-folder\"") != std::string::npos);
  CHECK(json->find("\"preprocess\": {\n    \"color\": \"rgb\",\n    \"keep_ratio\": false,\n    \"layout\": \"nchw\",\n"
                   "    \"mean\": [0.485, 0.456, 0.406],") != std::string::npos);
}

TEST_CASE("dataset images: keep-ratio resizes inside the target and pads evenly around it") {
  TempDir dir("dataset_images_keep_ratio");
  write_pair_png(dir.file("pair.png"));
  DataSpec spec = image_spec(dir.path());
  spec.resize_height = 4;
  spec.resize_width = 4;
  spec.keep_ratio = true;
  spec.pad_value = 7.0;
  // 1x2 scaled by min(4/1, 4/2) = 2 -> 2x4, placed at top (4 - 2) / 2 = 1, left 0.
  const Letterbox box = letterbox(1, 2, 4, 4);
  CHECK(box.height == 2);
  CHECK(box.width == 4);
  CHECK(box.top == 1);
  CHECK(box.left == 0);
  const std::vector<float> values = only_sample(spec, {3, 4, 4});
  const std::vector<float> red = {7, 7, 7, 7, 0, 50, 150, 200, 0, 50, 150, 200, 7, 7, 7, 7};
  CHECK(std::vector<float>(values.begin(), values.begin() + 16) == red);
  const std::vector<float> green = {7, 7, 7, 7, 100, 100, 100, 100, 100, 100, 100, 100, 7, 7, 7, 7};
  CHECK(std::vector<float>(values.begin() + 16, values.begin() + 32) == green);

  // The odd pixel of padding goes to the bottom/right.
  const Letterbox odd = letterbox(2, 2, 5, 4);
  CHECK(odd.height == 4);
  CHECK(odd.top == 0);
  const Letterbox wide = letterbox(1, 4, 4, 4);
  CHECK(wide.height == 1);
  CHECK(wide.top == 1);  // rows 0, 2 and 3 are padding: 1 above, 2 below
}

TEST_CASE("dataset images: bilinear downsampling matches hand-computed values") {
  // 4 -> 2: outputs sample at 0.5 and 2.5, the mean of each pixel pair.
  const std::vector<float> row = {0, 10, 20, 40};
  CHECK(resize_bilinear(row, 1, 4, 1, 1, 2) == std::vector<float>{5, 30});
  // 2x2 -> 3x3 (ratio 2/3): positions -1/6 (clamped 0), 0.5, 7/6 (clamped 1).
  const std::vector<float> square = {0, 30, 60, 90};
  const std::vector<float> up = resize_bilinear(square, 2, 2, 1, 3, 3);
  REQUIRE(up.size() == 9);
  CHECK(up[0] == 0.0f);
  CHECK(up[1] == 15.0f);
  CHECK(up[4] == 45.0f);
  CHECK(up[8] == 90.0f);
  // Deterministic: the same call gives the same bits.
  CHECK(resize_bilinear(square, 2, 2, 1, 7, 5) == resize_bilinear(square, 2, 2, 1, 7, 5));
}

TEST_CASE("dataset images: folders in name order, JPEG, sizes, decode errors") {
  TempDir dir("dataset_images_folder");
  write_uniform_png(dir.file("b.png"), 3, 2, 40);
  write_uniform_png(dir.file("a.PNG"), 3, 2, 10);
  std::vector<unsigned char> gray(3 * 2 * 3, 128);
  REQUIRE(stbi_write_jpg(dir.file("c.jpg").c_str(), 3, 2, 3, gray.data(), 100) != 0);
  DataSpec spec = image_spec(dir.path());
  Expected<Dataset> dataset = open_dataset(spec);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  CHECK(dataset->count == 3);
  CHECK(dataset->first().files[0].path == dir.file("a.PNG"));
  const auto samples = all_samples(*dataset);
  REQUIRE(samples.size() == 3);
  CHECK(samples[0][0] == 10.0f);
  CHECK(samples[1][5] == 40.0f);
  for (float v : samples[2]) CHECK(std::fabs(v - 128.0f) <= 2.0f);  // lossy, but a flat image stays flat

  // Two threads at once get the same decoded samples.
  std::vector<std::vector<float>> other;
  std::thread reader([&] { other = all_samples(*dataset); });
  const auto mine = all_samples(*dataset);
  reader.join();
  CHECK(other == mine);

  write_uniform_png(dir.file("d.png"), 5, 4, 0);
  CHECK(open_error(spec) == dir.file("d.png") + ": image is 4x5 (HxW), " + dir.file("a.PNG") +
                                " is 2x3; set load-data option 'resize' to feed images of different sizes");
  spec.resize_height = 2;
  spec.resize_width = 2;
  Expected<Dataset> resized = open_dataset(spec);
  REQUIRE_MESSAGE(resized.has_value(), resized.status().message());
  CHECK(resized->first().sample_shape == Shape{3, 2, 2});

  std::ofstream(dir.file("e.png")) << "this is not a PNG";
  const std::string error = open_error(spec);
  CHECK(error.rfind(dir.file("e.png") + ": cannot decode the image (", 0) == 0);
  CHECK(error.back() == ')');

  TempDir mixed("dataset_images_mixed");
  write_uniform_png(mixed.file("a.png"), 2, 2, 1);
  test::write_npy(mixed.file("b.npy"), {1, 2}, {1.0f, 2.0f});
  CHECK(open_error(image_spec(mixed.path())) ==
        mixed.path() + ": the folder holds both .npy files and images; keep one kind of sample per folder");
}

TEST_CASE("dataset images: a PNG with alpha and a gray PNG") {
  TempDir dir("dataset_images_channels");
  const unsigned char rgba[] = {10, 20, 30, 255, 40, 50, 60, 0};
  REQUIRE(stbi_write_png(dir.file("rgba.png").c_str(), 2, 1, 4, rgba, 8) != 0);
  CHECK(only_sample(image_spec(dir.path()), {3, 1, 2}) == std::vector<float>{10, 40, 20, 50, 30, 60});

  TempDir gray_dir("dataset_images_gray");
  const unsigned char gray[] = {5, 250};
  REQUIRE(stbi_write_png(gray_dir.file("g.png").c_str(), 2, 1, 1, gray, 2) != 0);
  DataSpec spec = image_spec(gray_dir.path());
  CHECK(only_sample(spec, {3, 1, 2}) == std::vector<float>{5, 250, 5, 250, 5, 250});
  spec.color = ColorOrder::Gray;
  CHECK(only_sample(spec, {1, 1, 2}) == std::vector<float>{5, 250});
}

TEST_CASE("dataset progress bar: throttled redraws, final line, silent without a sink") {
  CHECK(ProgressBar::format("stage 'observe'", 50, 100, 10.0) == "stage 'observe'  50/100 samples  5.0/s  ETA 0:10");
  CHECK(ProgressBar::format("x", 0, 100, 0.0) == "x  0/100 samples");
  CHECK(ProgressBar::format("x", 1, 7201, 1.0) == "x  1/7201 samples  1.0/s  ETA 2:00:00");

  std::string out;
  {
    ProgressBar bar("obs", 5, [&](std::string_view text) { out += text; });
    bar.advance(1);
    bar.advance(1);  // within 100 ms of the first draw: not redrawn
    bar.advance(3);
    bar.finish();
    bar.finish();  // once only
  }
  CHECK(std::count(out.begin(), out.end(), '\r') == 2);
  CHECK(out.rfind("\robs  1/5 samples", 0) == 0);
  CHECK(out.find("\robs  5/5 samples") != std::string::npos);
  CHECK(out.back() == '\n');
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  ProgressBar silent("quiet", 3, ProgressBar::Sink());
  silent.advance(3);
  silent.finish();  // nothing to write to, nothing happens
}

TEST_CASE("progress bar: other units, an unknown total and phases on fresh lines") {
  CHECK(ProgressBar::format("stage 'sensitivity' ranking", 30, 120, 3.0, "node-samples") ==
        "stage 'sensitivity' ranking  30/120 node-samples  10.0/s  ETA 0:09");
  CHECK(ProgressBar::format("search", 12, 0, 24.0, "models") == "search  12 models  0.5/s  0:24 elapsed");
  CHECK(ProgressBar::format("search", 0, 0, 0.0, "models") == "search  0 models");
  CHECK(ProgressBar::format("x", 5, 4, 1.0) == "x  5/4 samples  5.0/s  ETA 0:00");  // never a negative ETA

  std::string out;
  {
    ProgressBar bar("stage 'p'", 0, [&](std::string_view text) { out += text; });
    bar.restart("ranking", "node-samples", 4);  // nothing drawn yet: no line to end
    bar.advance(4);
    bar.restart("search", "models", 0);  // ends the ranking line
    bar.advance(1);
  }  // the destructor finishes the search line
  CHECK(out.rfind("\rstage 'p' ranking  4/4 node-samples", 0) == 0);
  CHECK(out.find("\n\rstage 'p' search  1 models") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 2);
  CHECK(out.back() == '\n');

  // A bar given nothing to count (a calibrate stage whose calibrator scores no table) leaves
  // no line; one with a total draws its final state.
  std::string idle;
  { ProgressBar bar("stage 'calibrate'", 0, [&](std::string_view text) { idle += text; }); }
  CHECK(idle.empty());
  { ProgressBar bar("stage 'v'", 3, [&](std::string_view text) { idle += text; }); }
  CHECK(idle.rfind("\rstage 'v'  0/3 samples", 0) == 0);
  CHECK(idle.back() == '\n');
}

}  // namespace qflow
