// Input types (plugins/backends/bpu/input_type.h): the options per input, the conversions they
// resolve to, the input_convert rewrite of a lowered model, and the host-side frame round trip.
#include <doctest/doctest.h>

#include <cmath>

#include "plugins/backends/bpu/input_type.h"
#include "qflow/runtime/executor.h"
#include "qflow/runtime/fixed_point.h"

namespace qflow {
namespace {

using Inputs = std::vector<std::pair<std::string, Shape>>;

InputTypeOptions opts(std::string rt, std::string train = "", std::string mean = "", std::string scale = "",
                      std::string layout = "") {
  return InputTypeOptions{std::move(rt), std::move(layout), std::move(train), std::move(mean), std::move(scale)};
}

TEST_CASE("input types: featuremap, the default, resolves to nothing") {
  auto none = resolve_input_types(opts(""), Inputs{{"x", {1, 3, 8, 8}}});
  REQUIRE(none.has_value());
  CHECK(none->empty());
  auto featuremap = resolve_input_types(opts("featuremap"), Inputs{{"x", {1, 3, 8, 8}}});
  REQUIRE(featuremap.has_value());
  CHECK(featuremap->empty());
}

TEST_CASE("input types: conversions, shapes and per-channel values") {
  auto nv12 = resolve_input_types(opts("nv12", "bgr", "123.675, 116.28 103.53", "0.017"), Inputs{{"x", {1, 3, 48, 192}}});
  REQUIRE_MESSAGE(nv12.has_value(), nv12.message());
  REQUIRE(nv12->size() == 1);
  const InputType& t = (*nv12)[0];
  CHECK(t.yuv_to_rgb);
  CHECK(t.channels == std::vector<int32_t>{2, 1, 0});
  CHECK(t.rt_shape == std::vector<int64_t>{1, 72, 192});
  CHECK(t.mean == std::vector<double>{123.675, 116.28, 103.53});
  CHECK(t.scale == std::vector<double>{0.017, 0.017, 0.017});

  auto bgr = resolve_input_types(opts("bgr", "rgb", "", "", "nchw"), Inputs{{"x", {2, 3, 4, 6}}});
  REQUIRE(bgr.has_value());
  CHECK(!(*bgr)[0].yuv_to_rgb);
  CHECK((*bgr)[0].channels == std::vector<int32_t>{2, 1, 0});
  CHECK((*bgr)[0].rt_shape == std::vector<int64_t>{2, 3, 4, 6});

  auto gray = resolve_input_types(opts("yuv444", "gray"), Inputs{{"x", {1, 1, 4, 4}}});
  REQUIRE(gray.has_value());
  CHECK((*gray)[0].channels == std::vector<int32_t>{0});
  CHECK((*gray)[0].rt_shape == std::vector<int64_t>{1, 4, 4, 3});
}

TEST_CASE("input types: per-input values and errors that name the option and the input") {
  const Inputs two{{"image", {1, 3, 4, 4}}, {"mask", {1, 1, 4, 4}}};
  auto per = resolve_input_types(opts("image:rgb; mask:featuremap", "", "image:127.5"), two);
  REQUIRE_MESSAGE(per.has_value(), per.message());
  REQUIRE(per->size() == 1);
  CHECK((*per)[0].input == "image");
  CHECK((*per)[0].mean == std::vector<double>{127.5, 127.5, 127.5});

  CHECK(resolve_input_types(opts("img:rgb"), two).message() ==
        "input-type-rt: the model has no input 'img' (inputs: image, mask)");
  CHECK(resolve_input_types(opts("nv21"), Inputs{{"x", {1, 3, 4, 4}}}).message() ==
        "input-type-rt of input 'x': 'nv21' is not one of featuremap, gray, rgb, bgr, yuv444, nv12");
  CHECK(resolve_input_types(opts("rgb", "", "1 2"), Inputs{{"x", {1, 3, 4, 4}}}).message() ==
        "mean-value of input 'x': 2 values for 3 channels (give 1 or 3)");
  CHECK(resolve_input_types(opts("gray"), Inputs{{"x", {1, 3, 4, 4}}}).message() ==
        "input 'x': input-type-train gray has 1 channels, the model input has shape [1, 3, 4, 4]");
  CHECK(resolve_input_types(opts("nv12"), Inputs{{"x", {1, 3, 5, 4}}}).message() ==
        "input 'x': nv12 needs an even height and width, the model input has shape [1, 3, 5, 4]");
  CHECK(resolve_input_types(opts("rgb", "gray"), Inputs{{"x", {1, 1, 4, 4}}}).message() ==
        "input 'x': input-type-rt rgb with input-type-train gray is not supported");
}

// x [1, 3, 2, 4] f32 -> quantize (int8, scale 1/64, zero point -3) -> dequantize -> y.
lowered::Model quantize_model() {
  lowered::Model m;
  m.name = std::string(1, 'm');
  m.platform = "nash";
  m.tensors.push_back({"x", lowered::ElemType::f32, {1, 3, 2, 4}, {}, false, {}});
  m.tensors.push_back({"xq", lowered::ElemType::i8, {1, 3, 2, 4}, {1.0 / 64, -3}, false, {}});
  m.tensors.push_back({"y", lowered::ElemType::f32, {1, 3, 2, 4}, {}, false, {}});
  m.inputs = {0};
  m.outputs = {2};
  m.segments.push_back({0, lowered::SegmentKind::bpu, {{"quantize", "q", {0}, {1}, {}}, {"dequantize", "d", {1}, {2}, {}}}});
  return m;
}

TEST_CASE("input types: the lowered input becomes an nv12 frame the float reference agrees with") {
  auto types = resolve_input_types(opts("nv12", "rgb", "127.5", "0.0078431373"), Inputs{{"x", {1, 3, 2, 4}}});
  REQUIRE(types.has_value());
  lowered::Model m = quantize_model();
  REQUIRE(apply_input_types(m, *types).is_ok());
  CHECK(m.tensors[0].type == lowered::ElemType::u8);
  CHECK(m.tensors[0].shape == std::vector<int64_t>{1, 3, 4});
  CHECK(m.segments[0].ops[0].type == "input_convert");
  auto ex = lowered::Executor::create(m);
  REQUIRE_MESSAGE(ex.has_value(), ex.message());

  // A float sample -> its frame -> the .hbm's result, against the reference's float tensor.
  std::vector<float> sample;
  for (int i = 0; i < 24; ++i) sample.push_back(std::sin(0.7f * static_cast<float>(i)));
  const std::vector<float> frame = train_to_frame((*types)[0], sample);
  REQUIRE(frame.size() == 12);
  const std::vector<float> reference = frame_to_train((*types)[0], frame);
  std::vector<std::vector<float>> out;
  REQUIRE(ex->run({std::span<const float>(frame)}, out).is_ok());
  // The integer conversion is within one pixel level of the float one, plus half a step.
  for (size_t i = 0; i < reference.size(); ++i) CHECK(std::fabs(out[0][i] - reference[i]) <= 1.0 / 127.5 + 1.0 / 128 + 1e-6);
  // The reference stays close to the sample (nv12 halves the chroma resolution).
  double worst = 0.0;
  for (size_t i = 0; i < sample.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(sample[i] - reference[i])));
  MESSAGE("largest |sample - frame's float tensor|: " << worst);

  // A CPU reader of the input is refused.
  lowered::Model cpu = quantize_model();
  cpu.segments[0].ops[0].type = "cpu.Relu";
  CHECK(apply_input_types(cpu, *types).message() ==
        "input-type-rt nv12 of input 'x': it is read by cpu.Relu 'q' (on the CPU); a uint8 input needs every reader on the BPU");
}

// x [1, 1, 4, 4] -> quantize (int8, scale 1/32) -> conv2d 1 -> 2, 3x3, pad 1, bias -> y.
lowered::Model conv_model() {
  lowered::Model m;
  m.name = std::string(1, 'm');
  m.platform = "nash";
  const auto i32 = [](const std::vector<int32_t>& v) {
    std::vector<uint8_t> d;
    for (int32_t x : v)
      for (int b = 0; b < 4; ++b) d.push_back(static_cast<uint8_t>(static_cast<uint32_t>(x) >> (8 * b)));
    return d;
  };
  std::vector<uint8_t> w;
  for (int i = 0; i < 18; ++i) w.push_back(static_cast<uint8_t>(static_cast<int8_t>((i * 29) % 200 - 100)));
  m.tensors.push_back({"x", lowered::ElemType::f32, {1, 1, 4, 4}, {}, false, {}});
  m.tensors.push_back({"xq", lowered::ElemType::i8, {1, 1, 4, 4}, {1.0 / 32, 0}, false, {}});
  m.tensors.push_back({"w", lowered::ElemType::i8, {2, 1, 3, 3}, {0.01, 0}, true, w});
  m.tensors.push_back({"b", lowered::ElemType::i32, {2}, {1.0, 0}, true, i32({500, -700})});
  m.tensors.push_back({"yq", lowered::ElemType::i8, {1, 2, 4, 4}, {0.02, 1}, false, {}});
  m.tensors.push_back({"y", lowered::ElemType::f32, {1, 2, 4, 4}, {}, false, {}});
  m.inputs = {0};
  m.outputs = {5};
  fx::Multiplier mult;
  REQUIRE(fx::make_multiplier(1.0 / 32 * 0.01 / 0.02, mult).is_ok());
  lowered::Op conv{"conv2d", "c", {1, 2, 3}, {4},
                   {{"multiplier_mantissa", {mult.mantissa}, {}, {}}, {"multiplier_shift", {mult.shift}, {}, {}},
                    {"pads", {1, 1, 1, 1}, {}, {}}}};
  m.segments.push_back({0, lowered::SegmentKind::bpu,
                        {{"quantize", "q", {0}, {1}, {}}, conv, {"dequantize", "d", {4}, {5}, {}}}});
  return m;
}

TEST_CASE("input types: NCHW gray with an integer mean folds into the first conv, exactly where the table rounds") {
  auto types = resolve_input_types(opts("gray", "", "128", "0.0078125", "nchw"), Inputs{{"x", {1, 1, 4, 4}}});
  REQUIRE(types.has_value());
  lowered::Model folded = conv_model(), table = conv_model();
  std::vector<InputType> table_types = *types;
  REQUIRE(apply_input_types(folded, *types).is_ok());
  REQUIRE(apply_input_types(table, table_types, /*power_of_two=*/true).is_ok());
  CHECK((*types)[0].folded.find("into the first layer") == 0);
  CHECK(table_types[0].folded.find("into input_convert's table") == 0);
  REQUIRE(folded.segments[0].ops.size() == 2);
  CHECK(folded.segments[0].ops[0].type == "conv2d");
  CHECK(folded.segments[0].ops[0].inputs[0] == 0);
  CHECK(folded.tensors[0].type == lowered::ElemType::u8);
  CHECK(folded.tensors[0].quant == lowered::Quant{0.0078125, 128});
  CHECK(table.segments[0].ops[0].type == "input_convert");

  auto a = lowered::Executor::create(folded);
  auto b = lowered::Executor::create(table);
  REQUIRE_MESSAGE(a.has_value(), a.message());
  REQUIRE_MESSAGE(b.has_value(), b.message());
  std::vector<float> frame;
  for (int i = 0; i < 16; ++i) frame.push_back(static_cast<float>((i * 71 + 5) % 256));
  std::vector<std::vector<float>> ya, yb;
  REQUIRE(a->run({std::span<const float>(frame)}, ya).is_ok());
  REQUIRE(b->run({std::span<const float>(frame)}, yb).is_ok());
  // The table rounds the input to the calibrated 1/32 steps (here exact: v/128 - 1 is a
  // multiple of 1/128, not of 1/32); the fold keeps it exact. Both within a few output steps.
  for (size_t i = 0; i < ya[0].size(); ++i) CHECK(std::fabs(ya[0][i] - yb[0][i]) <= 4 * 0.02 + 1e-6);

  // A mean that is not an integer, or per-channel values, keep the table.
  auto odd = resolve_input_types(opts("gray", "", "127.5", "0.0078125", "nchw"), Inputs{{"x", {1, 1, 4, 4}}});
  lowered::Model m = conv_model();
  REQUIRE(apply_input_types(m, *odd).is_ok());
  CHECK(m.segments[0].ops[0].type == "input_convert");
}

TEST_CASE("input types: gray frames round-trip exactly through the normalization") {
  auto types = resolve_input_types(opts("gray", "", "72.93", "0.011109259"), Inputs{{"x", {1, 1, 2, 2}}});
  REQUIRE(types.has_value());
  const std::vector<float> pixels = {0, 17, 128, 255};
  std::vector<float> sample;
  for (float p : pixels) sample.push_back(static_cast<float>((p - 72.93) * 0.011109259));
  CHECK(train_to_frame((*types)[0], sample) == pixels);
}

}  // namespace
}  // namespace qflow
