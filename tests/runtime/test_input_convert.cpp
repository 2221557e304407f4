// input_convert: the BT.601 full-range YUV -> RGB conversion in Q16 integers against a float
// reference, the frame layouts, and one program run by the reference kernels, the fast
// kernels, the .hbm codec and the C API with bit-identical results (docs/input-types.md).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "qflow/runtime.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/test_lowered_common.h"

namespace qflow::lowered::test {
namespace {

// The float reference: BT.601 full range (JFIF), clamped to [0, 255], not rounded.
void float_yuv_to_rgb(double y, double u, double v, double rgb[3]) {
  rgb[0] = std::clamp(y + 1.402 * (v - 128), 0.0, 255.0);
  rgb[1] = std::clamp(y - 0.344136 * (u - 128) - 0.714136 * (v - 128), 0.0, 255.0);
  rgb[2] = std::clamp(y + 1.772 * (u - 128), 0.0, 255.0);
}

TEST_CASE("input_convert: Q16 YUV -> RGB is within 0.5 + 2^-9 of the float reference on every YUV triple") {
  double worst = 0.0;
  int64_t off_by_one = 0;
  for (int y = 0; y < 256; ++y)
    for (int u = 0; u < 256; ++u)
      for (int v = 0; v < 256; ++v) {
        int32_t q[3];
        double f[3];
        fx::yuv_to_rgb(y, u, v, q);
        float_yuv_to_rgb(y, u, v, f);
        for (int c = 0; c < 3; ++c) {
          worst = std::max(worst, std::fabs(q[c] - f[c]));
          off_by_one += q[c] != static_cast<int32_t>(std::nearbyint(f[c])) ? 1 : 0;
        }
      }
  // Rounding to an integer costs 0.5; the Q16 coefficients at most 128 * 2^-17 * 3 more.
  CHECK(worst <= 0.5 + 1.0 / 512);
  // Where the two round differently, the float value sits within 2^-9 of a half.
  MESSAGE("values rounded differently from the float reference: " << off_by_one << " of " << 3 * (1 << 24));
  CHECK(off_by_one < 3 * (1 << 24) / 1000);
}

TEST_CASE("input_convert: grey, neutral chroma and the primaries convert exactly") {
  int32_t q[3];
  fx::yuv_to_rgb(77, 128, 128, q);
  CHECK(q[0] == 77);
  CHECK(q[1] == 77);
  CHECK(q[2] == 77);
  fx::yuv_to_rgb(255, 128, 128, q);
  CHECK((q[0] == 255 && q[1] == 255 && q[2] == 255));
  // Saturation: a strong V clamps R.
  fx::yuv_to_rgb(200, 128, 255, q);
  CHECK(q[0] == 255);
}

// A 2x4 nv12 frame through input_convert to RGB with an identity-like table (value v -> v - 128
// in int8, scale 1): the output is each pixel's converted RGB minus 128.
TEST_CASE("input_convert: nv12 reads Y per pixel and UV per 2x2 block; nhwc and nchw agree") {
  const int64_t H = 2, W = 4;
  std::vector<int32_t> frame = {10, 20, 30, 40,    // Y row 0
                                50, 60, 70, 80,    // Y row 1
                                100, 150, 200, 90};  // UV: block 0 (100, 150), block 1 (200, 90)
  std::vector<int32_t> table(3 * 256);
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table[static_cast<size_t>(c * 256 + v)] = v - 128;
  fx::InputConvertParams p;
  p.format = fx::PixelFormat::Nv12;
  p.height = H;
  p.width = W;
  p.yuv_to_rgb = true;
  p.channels = {0, 1, 2};
  p.output = {1.0, 0, fx::QType::Int8};
  std::vector<int32_t> y(static_cast<size_t>(3 * H * W));
  REQUIRE(fx::input_convert(p, frame, table, y).is_ok());
  for (int64_t h = 0; h < H; ++h)
    for (int64_t w = 0; w < W; ++w) {
      const int32_t u = w < 2 ? 100 : 200, v = w < 2 ? 150 : 90;
      int32_t rgb[3];
      fx::yuv_to_rgb(frame[static_cast<size_t>(h * W + w)], u, v, rgb);
      for (int c = 0; c < 3; ++c) CHECK(y[static_cast<size_t>(c * H * W + h * W + w)] == rgb[c] - 128);
    }

  // The same pixels as yuv444 nhwc and nchw, BGR order out.
  std::vector<int32_t> nhwc, nchw(static_cast<size_t>(3 * H * W));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t w = 0; w < W; ++w) {
      const int32_t px[3] = {frame[static_cast<size_t>(h * W + w)], w < 2 ? 100 : 200, w < 2 ? 150 : 90};
      for (int c = 0; c < 3; ++c) {
        nhwc.push_back(px[c]);
        nchw[static_cast<size_t>(c * H * W + h * W + w)] = px[c];
      }
    }
  p.format = fx::PixelFormat::Yuv444;
  p.channels = {2, 1, 0};
  std::vector<int32_t> a(y.size()), b(y.size());
  p.nhwc = true;
  REQUIRE(fx::input_convert(p, nhwc, table, a).is_ok());
  p.nhwc = false;
  REQUIRE(fx::input_convert(p, nchw, table, b).is_ok());
  CHECK(a == b);
  for (int64_t i = 0; i < H * W; ++i) {
    CHECK(a[static_cast<size_t>(i)] == y[static_cast<size_t>(2 * H * W + i)]);  // B first
    CHECK(a[static_cast<size_t>(2 * H * W + i)] == y[static_cast<size_t>(i)]);
  }

  // Errors: a value outside [0, 255], an odd nv12 size, a table entry outside the type.
  nhwc[0] = 256;
  CHECK(!fx::input_convert(p, nhwc, table, a).is_ok());
  table[0] = 300;
  p.nhwc = false;
  CHECK(!fx::input_convert(p, nchw, table, a).is_ok());
}

// nv12 [1, 6, 4] -> input_convert (RGB, a per-channel normalization table) -> conv2d 3 -> 2
// channels, 3x3, pad 1 -> dequantize.
Model nv12_model() {
  Builder b;
  b.model.platform = "nash";
  const Quant qx{0.02, 3}, qy{0.05, -2};
  const int32_t frame = b.tensor("image", ElemType::u8, {1, 6, 4}, {1.0, 0});
  b.model.inputs.push_back(frame);
  std::vector<int64_t> table;
  const double mean[3] = {123.7, 116.3, 103.5}, scale[3] = {0.0171, 0.0175, 0.0174};
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table.push_back(fx::quantize((v - mean[c]) * scale[c], qp(ElemType::i8, qx)));
  const int32_t t = b.constant_ints("table", ElemType::i32, {3, 256}, table);
  const int32_t x = b.tensor("x", ElemType::i8, {1, 3, 4, 4}, qx);
  b.bpu("input_convert", {frame, t}, {x},
        {ints("channels", {0, 1, 2}), strings("format", {"nv12"}), strings("layout", {"nhwc"}), ints("yuv_to_rgb", {1})});
  std::vector<int64_t> w;
  for (int i = 0; i < 2 * 3 * 9; ++i) w.push_back((i * 37) % 255 - 127);
  const int32_t wt = b.constant_ints("w", ElemType::i8, {2, 3, 3, 3}, w, {0.01, 0});
  const int32_t y = b.tensor("y", ElemType::i8, {1, 2, 4, 4}, qy);
  const fx::Multiplier m = make_mult(0.02 * 0.01 / 0.05);
  b.bpu("conv2d", {x, wt, -1}, {y},
        {ints("pads", {1, 1, 1, 1}), ints("multiplier_mantissa", {m.mantissa}), ints("multiplier_shift", {m.shift})});
  const int32_t out = b.output("out", {1, 2, 4, 4});
  b.bpu("dequantize", {y}, {out});
  return b.model;
}

std::vector<float> nv12_frame() {
  std::vector<float> f;
  for (int i = 0; i < 24; ++i) f.push_back(static_cast<float>((i * 53 + 11) % 256));
  return f;
}

TEST_CASE("input_convert: reference and fast kernels, the .hbm and the C API agree bit for bit") {
  const Model model = nv12_model();
  REQUIRE_MESSAGE(validate(model).is_ok(), validate(model).message());
  const std::vector<float> frame = nv12_frame();
  std::vector<std::vector<float>> ref, fast;
  auto er = Executor::create(model, Kernels::reference);
  REQUIRE_MESSAGE(er.has_value(), er.message());
  REQUIRE(er->run({std::span<const float>(frame)}, ref).is_ok());
  auto ef = Executor::create(model, Kernels::portable);
  REQUIRE_MESSAGE(ef.has_value(), ef.message());
  REQUIRE(ef->run({std::span<const float>(frame)}, fast).is_ok());
  CHECK(ref == fast);

  // Given as u8 values.
  ElemType type;
  Quant quant;
  REQUIRE(er->quantized_input(0, type, quant));
  CHECK(type == ElemType::u8);
  Value v;
  v.type = ElemType::u8;
  for (float f : frame) v.ints.push_back(static_cast<int32_t>(f));
  std::vector<std::vector<float>> from_ints;
  REQUIRE(er->run_values({v}, from_ints).is_ok());
  CHECK(from_ints == ref);

  // A float frame value that is not an integer in [0, 255] is refused.
  std::vector<float> bad = frame;
  bad[3] = 1.5f;
  CHECK(contains(run_error(model, {bad}), "not an integer in [0, 255]"));

  // The .hbm round trip and the C API, float and uint8 frames.
  auto bytes = encode_hbm(model, "test");
  REQUIRE_MESSAGE(bytes.has_value(), bytes.message());
  auto decoded = decode_hbm(*bytes);
  REQUIRE_MESSAGE(decoded.has_value(), decoded.message());
  CHECK(*decoded == model);
  qflow_rt_model* h = nullptr;
  REQUIRE_MESSAGE(qflow_rt_load_memory(bytes->data(), bytes->size(), &h) == QFLOW_RT_OK, qflow_rt_last_error());
  qflow_rt_tensor_info info{};
  REQUIRE(qflow_rt_input_info(h, 0, &info) == QFLOW_RT_OK);
  CHECK(info.quantized_dtype == QFLOW_RT_UINT8);
  CHECK(std::vector<int64_t>(info.shape, info.shape + info.rank) == std::vector<int64_t>{1, 6, 4});
  std::vector<float> y(32), yq(32);
  const float* in[] = {frame.data()};
  float* out[] = {y.data()};
  REQUIRE_MESSAGE(qflow_rt_run(h, in, out) == QFLOW_RT_OK, qflow_rt_last_error());
  std::vector<uint8_t> u8(frame.begin(), frame.end());
  const void* qin[] = {u8.data()};
  float* qout[] = {yq.data()};
  REQUIRE_MESSAGE(qflow_rt_run_quantized(h, qin, qout) == QFLOW_RT_OK, qflow_rt_last_error());
  qflow_rt_free(h);
  CHECK(y == ref[0]);
  CHECK(yq == ref[0]);
}

TEST_CASE("input_convert: validation names what is wrong") {
  Model model = nv12_model();
  Op& op = model.segments[0].ops[0];
  op.attributes[1].strings = {"nv21"};
  CHECK(contains(validate(model).message(), "format 'nv21' is not gray, rgb, bgr, yuv444 or nv12"));
  op.attributes[1].strings = {"rgb"};
  CHECK(contains(validate(model).message(), "yuv_to_rgb needs a yuv444 or nv12 frame"));
  op.attributes[3].ints = {0};
  CHECK(contains(validate(model).message(), "the frame has shape [1, 6, 4], expected [1, 4, 4, 3] for rgb nhwc"));
  model = nv12_model();
  model.tensors[static_cast<size_t>(model.inputs[0])].type = ElemType::i8;
  CHECK(contains(validate(model).message(), "must be a non-constant f32 or u8 tensor"));
}

}  // namespace
}  // namespace qflow::lowered::test
