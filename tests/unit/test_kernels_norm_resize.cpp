// Normalization, softmax-family and resize kernels against hand-computed values.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/unit/node_runner.h"
#include "tests/unit/test_model_util.h"

using namespace qflow;
using qflow::testing::run_single_node;
using qflow::testing::SingleNode;

namespace {

using test::floats;
Tensor int64s(Shape shape, std::vector<int64_t> values) { return Tensor::from_vector<int64_t>(std::move(shape), values); }

void check_close(const Tensor& actual, const Shape& shape, const std::vector<float>& expected, float tol = 1e-5f) {
  REQUIRE(actual.dtype() == DType::Float32);
  REQUIRE(actual.shape() == shape);
  REQUIRE(actual.numel() == static_cast<int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(actual.data<float>()[i] == doctest::Approx(expected[i]).epsilon(tol));
  }
}

Tensor run_one(const SingleNode& spec) {
  auto result = run_single_node(spec);
  INFO((result ? std::string() : result.status().message()));
  REQUIRE(result.has_value());
  return result->at(0);
}

SingleNode resize_node(Tensor x, Tensor scales, Tensor sizes, std::vector<Attribute> attributes, int64_t opset = 13) {
  SingleNode spec;
  spec.op_type = "Resize";
  spec.opset = opset;
  spec.inputs = {std::move(x), Tensor(), std::move(scales), std::move(sizes)};
  spec.attributes = std::move(attributes);
  return spec;
}

}  // namespace

TEST_CASE("Resize bilinear 2x2 -> 4x4 half_pixel") {
  auto spec = resize_node(floats({1, 1, 2, 2}, {1, 2, 3, 4}), floats({4}, {1, 1, 2, 2}), Tensor(),
                          {Attribute::make_string("mode", "linear")});
  check_close(run_one(spec), {1, 1, 4, 4},
              {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST_CASE("Resize bilinear 2x2 -> 4x4 align_corners from sizes") {
  auto spec = resize_node(floats({1, 1, 2, 2}, {1, 2, 3, 4}), Tensor(), int64s({4}, {1, 1, 4, 4}),
                          {Attribute::make_string("mode", "linear"),
                           Attribute::make_string("coordinate_transformation_mode", "align_corners")});
  const float t = 1.0f / 3.0f;
  check_close(run_one(spec), {1, 1, 4, 4},
              {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t, 3 + 2 * t, 4});
}

TEST_CASE("Resize bilinear float32 rounds as one float sum of four weighted neighbours") {
  // 3x5 -> 7x9 half_pixel, values with long mantissas: the result must equal, bit for bit,
  // float weights from float coordinates (0.5 each where both taps are the border) summed
  // in the order x11, x21, x12, x22 (what ONNX Runtime computes), not a double evaluation.
  std::vector<float> values;
  for (int i = 0; i < 15; ++i) values.push_back(0.1f + 1.7f * static_cast<float>(i) / 3.0f);
  auto spec = resize_node(floats({1, 1, 3, 5}, values), Tensor(), int64s({4}, {1, 1, 7, 9}),
                          {Attribute::make_string("mode", "linear")});
  const Tensor y = run_one(spec);
  auto taps = [](int64_t o, int64_t in_len, int64_t out_len, int64_t& i1, int64_t& i2, float& w1, float& w2) {
    const float scale = static_cast<float>(out_len) / static_cast<float>(in_len);
    float in = (static_cast<float>(o) + 0.5f) / scale - 0.5f;
    in = std::max(0.0f, std::min(in, static_cast<float>(in_len - 1)));
    i1 = std::min(static_cast<int64_t>(in), in_len - 1);
    i2 = std::min(i1 + 1, in_len - 1);
    w1 = std::fabs(in - static_cast<float>(i2));
    w2 = std::fabs(in - static_cast<float>(i1));
    if (i1 == i2) w1 = w2 = 0.5f;
  };
  for (int64_t oy = 0; oy < 7; ++oy) {
    for (int64_t ox = 0; ox < 9; ++ox) {
      int64_t y1, y2, x1, x2;
      float dy1, dy2, dx1, dx2;
      taps(oy, 3, 7, y1, y2, dy1, dy2);
      taps(ox, 5, 9, x1, x2, dx1, dx2);
      const float expected = dx1 * dy1 * values[static_cast<std::size_t>(y1 * 5 + x1)] +
                             dx2 * dy1 * values[static_cast<std::size_t>(y1 * 5 + x2)] +
                             dx1 * dy2 * values[static_cast<std::size_t>(y2 * 5 + x1)] +
                             dx2 * dy2 * values[static_cast<std::size_t>(y2 * 5 + x2)];
      CHECK(y.data<float>()[oy * 9 + ox] == expected);
    }
  }
}

TEST_CASE("Resize nearest rounding modes on ties") {
  // asymmetric 3 -> 6 puts every odd output exactly halfway between two inputs.
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"round_prefer_floor", {10, 10, 20, 20, 30, 30}},
      {"round_prefer_ceil", {10, 20, 20, 30, 30, 30}},
      {"floor", {10, 10, 20, 20, 30, 30}},
      {"ceil", {10, 20, 20, 30, 30, 30}},
  };
  for (const auto& [mode, expected] : cases) {
    INFO(mode);
    auto spec = resize_node(floats({1, 3}, {10, 20, 30}), Tensor(), int64s({2}, {1, 6}),
                            {Attribute::make_string("coordinate_transformation_mode", "asymmetric"),
                             Attribute::make_string("nearest_mode", mode)});
    check_close(run_one(spec), {1, 6}, expected);
  }
}

TEST_CASE("Resize nearest moves integer and bool data") {
  auto spec = resize_node(Tensor::from_vector<int32_t>({1, 2}, {7, -3}), floats({2}, {1, 2}), Tensor(), {});
  Tensor y = run_one(spec);
  REQUIRE(y.dtype() == DType::Int32);
  REQUIRE(y.shape() == Shape{1, 4});
  CHECK(std::vector<int32_t>(y.data<int32_t>(), y.data<int32_t>() + 4) == std::vector<int32_t>{7, 7, -3, -3});

  auto bspec = resize_node(Tensor::from_vector<bool>({2}, {true, false}), floats({1}, {1.5f}), Tensor(), {});
  Tensor b = run_one(bspec);
  REQUIRE(b.dtype() == DType::Bool);
  REQUIRE(b.shape() == Shape{3});
  // half_pixel 2 -> 3 samples at -1/6, 1/2 and 7/6; the tie at 1/2 rounds down.
  CHECK(b.data<bool>()[0] == true);
  CHECK(b.data<bool>()[1] == true);
  CHECK(b.data<bool>()[2] == false);
}

TEST_CASE("Resize nearest by integer factors copies each input value factor times along every axis") {
  // The upsampling of detection necks (the last axis copied without an index per output),
  // checked against y[c][h][w] = x[c][h / kh][w / kw] on floats and integers.
  for (const auto& [kh, kw] : {std::pair<int64_t, int64_t>{2, 2}, {1, 3}, {4, 4}, {3, 1}}) {
    CAPTURE(kh);
    CAPTURE(kw);
    const int64_t c = 3, h = 4, w = 5;
    std::vector<float> xf(static_cast<std::size_t>(c * h * w));
    std::vector<int32_t> xi(xf.size());
    for (std::size_t i = 0; i < xf.size(); ++i) {
      xf[i] = static_cast<float>(i) * 0.25f - 3.0f;
      xi[i] = static_cast<int32_t>(i * 7) - 40;
    }
    const Tensor scales = floats({4}, {1, 1, static_cast<float>(kh), static_cast<float>(kw)});
    const Tensor yf = run_one(resize_node(floats({1, c, h, w}, xf), scales, Tensor(), {}));
    const Tensor yi = run_one(resize_node(Tensor::from_vector<int32_t>({1, c, h, w}, xi), scales, Tensor(), {}));
    REQUIRE(yf.shape() == Shape{1, c, h * kh, w * kw});
    REQUIRE(yi.shape() == yf.shape());
    int mismatches = 0;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h * kh; ++y)
        for (int64_t x = 0; x < w * kw; ++x) {
          const int64_t out = (ch * h * kh + y) * w * kw + x, in = (ch * h + y / kh) * w + x / kw;
          mismatches += yf.data<float>()[out] != xf[static_cast<std::size_t>(in)];
          mismatches += yi.data<int32_t>()[out] != xi[static_cast<std::size_t>(in)];
        }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("Resize cubic matches the Keys kernel with A = -0.75") {
  // asymmetric scale 2: output 1 sits at 0.5 (neighbours -1..2 clamp to 1,1,2,4) and
  // output 3 at 1.5 (neighbours 1,2,4,8). Weights at ratio 0.5: -3/32, 19/32, 19/32, -3/32.
  auto spec = resize_node(floats({1, 4}, {1, 2, 4, 8}), floats({2}, {1, 2}), Tensor(),
                          {Attribute::make_string("mode", "cubic"),
                           Attribute::make_string("coordinate_transformation_mode", "asymmetric")});
  Tensor y = run_one(spec);
  REQUIRE(y.shape() == Shape{1, 8});
  CHECK(y.data<float>()[0] == doctest::Approx(1.0));
  CHECK(y.data<float>()[1] == doctest::Approx(1.3125));
  CHECK(y.data<float>()[2] == doctest::Approx(2.0));
  CHECK(y.data<float>()[3] == doctest::Approx(2.71875));

  // exclude_outside drops the clamped neighbour at -1 and renormalises: 45/32 / (35/32).
  spec.attributes.push_back(Attribute::make_int("exclude_outside", 1));
  Tensor z = run_one(spec);
  CHECK(z.data<float>()[1] == doctest::Approx(9.0 / 7.0));
  CHECK(z.data<float>()[3] == doctest::Approx(2.71875));
}

TEST_CASE("Resize tf_crop_and_resize extrapolates outside the roi") {
  SingleNode spec = resize_node(floats({1, 4}, {1, 2, 3, 4}), Tensor(), int64s({2}, {1, 4}),
                                {Attribute::make_string("mode", "linear"),
                                 Attribute::make_string("coordinate_transformation_mode", "tf_crop_and_resize"),
                                 Attribute::make_float("extrapolation_value", 10.0f)});
  spec.inputs[1] = floats({4}, {0, 0, 1, 1.5f});
  check_close(run_one(spec), {1, 4}, {1, 2.5, 4, 10});

  // Nearest, with a row before the roi's start: it holds the extrapolation value though it
  // reads index 0 as the next row does, which is the image's (a repeated row is copied, an
  // outside one is not, and neither is one after it).
  SingleNode nearest = resize_node(floats({2, 2}, {1, 2, 3, 4}), Tensor(), int64s({2}, {4, 2}),
                                   {Attribute::make_string("mode", "nearest"),
                                    Attribute::make_string("coordinate_transformation_mode", "tf_crop_and_resize"),
                                    Attribute::make_float("extrapolation_value", 10.0f)});
  nearest.inputs[1] = floats({4}, {-0.5f, 0, 1, 1});
  check_close(run_one(nearest), {4, 2}, {10, 10, 1, 2, 1, 2, 3, 4});  // y = -0.5, 0, 0.5 (to 0), 1
}

TEST_CASE("Resize-10 and Upsample use asymmetric coordinates") {
  SingleNode r10;
  r10.op_type = "Resize";
  r10.opset = 10;
  r10.inputs = {floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), floats({4}, {1, 1, 0.6f, 0.6f})};
  check_close(run_one(r10), {1, 1, 1, 2}, {1, 3});

  SingleNode up9;
  up9.op_type = "Upsample";
  up9.opset = 9;
  up9.inputs = {floats({1, 1, 2, 2}, {1, 2, 3, 4}), floats({4}, {1, 1, 2, 3})};
  check_close(run_one(up9), {1, 1, 4, 6},
              {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});

  SingleNode up7;
  up7.op_type = "Upsample";
  up7.opset = 7;
  up7.inputs = {floats({1, 2}, {1, 3})};
  up7.attributes = {Attribute::make_string("mode", "linear"), Attribute::make_floats("scales", {1, 2})};
  check_close(run_one(up7), {1, 4}, {1, 2, 3, 3});
}

TEST_CASE("Resize refuses both scales and sizes") {
  auto spec = resize_node(floats({1, 2}, {1, 2}), floats({2}, {1, 2}), int64s({2}, {1, 4}), {});
  auto result = run_single_node(spec);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.status().message().find("exactly one of scales and sizes") != std::string::npos);
}

TEST_CASE("Softmax axis semantics differ between opset 11 and 13") {
  SingleNode spec;
  spec.op_type = "Softmax";
  spec.inputs = {floats({1, 2, 2}, {0, 1, 2, 3})};
  spec.opset = 11;  // coerced to [1, 4]: one softmax over all four values
  check_close(run_one(spec), {1, 2, 2}, {0.0320586f, 0.0871443f, 0.2368828f, 0.6439143f});
  spec.opset = 13;  // along the last axis
  check_close(run_one(spec), {1, 2, 2}, {0.2689414f, 0.7310586f, 0.2689414f, 0.7310586f});
}

TEST_CASE("LogSoftmax is stable on large logits and Hardmax picks the first maximum") {
  SingleNode spec;
  spec.op_type = "LogSoftmax";
  spec.inputs = {floats({2}, {1000, 1001})};
  check_close(run_one(spec), {2}, {-1.3132617f, -0.3132617f});

  SingleNode hard;
  hard.op_type = "Hardmax";
  hard.inputs = {floats({2, 3}, {1, 3, 3, 2, 0, 1})};
  check_close(run_one(hard), {2, 3}, {0, 1, 0, 1, 0, 0});
  hard.opset = 11;
  hard.attributes = {Attribute::make_int("axis", 0)};  // coerced to one row of six
  check_close(run_one(hard), {2, 3}, {0, 1, 0, 0, 0, 0});
}

TEST_CASE("BatchNormalization inference, old attributes and training mode") {
  SingleNode spec;
  spec.op_type = "BatchNormalization";
  spec.inputs = {floats({1, 2, 1, 2}, {1, 2, 3, 4}), floats({2}, {1, 2}), floats({2}, {0, 1}),
                 floats({2}, {1.5f, 3.5f}), floats({2}, {0.25f, 0.25f})};
  spec.attributes = {Attribute::make_float("epsilon", 0.0f)};
  check_close(run_one(spec), {1, 2, 1, 2}, {-1, 1, -1, 3});

  spec.opset = 6;
  spec.attributes.push_back(Attribute::make_int("is_test", 1));
  spec.attributes.push_back(Attribute::make_int("spatial", 1));
  check_close(run_one(spec), {1, 2, 1, 2}, {-1, 1, -1, 3});

  SingleNode train;
  train.op_type = "BatchNormalization";
  train.opset = 15;
  train.outputs = 3;
  train.inputs = {floats({2, 1}, {1, 3}), floats({1}, {1}), floats({1}, {0}), floats({1}, {0}), floats({1}, {2})};
  train.attributes = {Attribute::make_float("epsilon", 0.0f), Attribute::make_int("training_mode", 1)};
  auto result = run_single_node(train);
  REQUIRE(result.has_value());
  check_close(result->at(0), {2, 1}, {-1, 1});
  check_close(result->at(1), {1}, {0.2f});   // 0 * 0.9 + 2 * 0.1
  check_close(result->at(2), {1}, {1.9f});   // 2 * 0.9 + 1 * 0.1
}

TEST_CASE("LayerNormalization with Mean and InvStdDev outputs") {
  SingleNode spec;
  spec.op_type = "LayerNormalization";
  spec.outputs = 3;
  spec.inputs = {floats({2, 2}, {1, 3, 2, 6}), floats({2}, {1, 2}), floats({2}, {0, 0.5f})};
  spec.attributes = {Attribute::make_float("epsilon", 0.0f)};
  auto result = run_single_node(spec);
  REQUIRE(result.has_value());
  check_close(result->at(0), {2, 2}, {-1, 2.5f, -1, 2.5f});
  check_close(result->at(1), {2, 1}, {2, 4});
  check_close(result->at(2), {2, 1}, {1, 0.5f});
}

TEST_CASE("InstanceNormalization, LpNormalization and MeanVarianceNormalization") {
  SingleNode inst;
  inst.op_type = "InstanceNormalization";
  inst.inputs = {floats({1, 1, 4}, {1, 2, 3, 4}), floats({1}, {2}), floats({1}, {1})};
  inst.attributes = {Attribute::make_float("epsilon", 0.0f)};
  const float s = 2.0f / std::sqrt(1.25f);
  check_close(run_one(inst), {1, 1, 4}, {1 - 1.5f * s, 1 - 0.5f * s, 1 + 0.5f * s, 1 + 1.5f * s});

  SingleNode lp;
  lp.op_type = "LpNormalization";
  lp.inputs = {floats({1, 2}, {3, 4})};
  check_close(run_one(lp), {1, 2}, {0.6f, 0.8f});
  lp.attributes = {Attribute::make_int("p", 1)};
  check_close(run_one(lp), {1, 2}, {3.0f / 7, 4.0f / 7});

  SingleNode mvn;
  mvn.op_type = "MeanVarianceNormalization";
  mvn.inputs = {floats({1, 2, 1, 2}, {1, 3, 10, 10})};
  check_close(run_one(mvn), {1, 2, 1, 2}, {-1, 1, 0, 0});
}

TEST_CASE("GroupNormalization: scale and bias per group at 18, per channel at 21") {
  // Two groups of two channels; group 0 holds {1, 2, 3, 4}, group 1 {10, 10, 12, 12}.
  SingleNode gn;
  gn.op_type = "GroupNormalization";
  gn.opset = 18;
  gn.inputs = {floats({1, 4, 2}, {1, 2, 3, 4, 10, 10, 12, 12}), floats({2}, {2, 3}), floats({2}, {1, -1})};
  gn.attributes = {Attribute::make_int("num_groups", 2), Attribute::make_float("epsilon", 0.0f)};
  const float s = 2.0f / std::sqrt(1.25f);
  check_close(run_one(gn), {1, 4, 2}, {1 - 1.5f * s, 1 - 0.5f * s, 1 + 0.5f * s, 1 + 1.5f * s, -4, -4, 2, 2});
  // Opset 21: one scale per channel, so group 0's channels may scale differently.
  gn.opset = 21;
  gn.inputs[1] = floats({4}, {2, 4, 3, 3});
  gn.inputs[2] = floats({4}, {1, 0, -1, -1});
  const float t = 4.0f / std::sqrt(1.25f);
  check_close(run_one(gn), {1, 4, 2}, {1 - 1.5f * s, 1 - 0.5f * s, 0.5f * t, 1.5f * t, -4, -4, 2, 2});
  // The per-group form at 21 (and per-channel at 18) is refused.
  gn.inputs[1] = floats({2}, {2, 3});
  gn.inputs[2] = floats({2}, {1, -1});
  auto wrong = run_single_node(gn);
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.status().message().find("scale and bias must have 4 elements (one per channel at opset 21)") !=
        std::string::npos);
}

TEST_CASE("Resize opset 18 axes and keep_aspect_ratio_policy") {
  // sizes name only the last two axes; not_larger keeps the 2:4 ratio inside 4x4 (factor 1),
  // not_smaller covers it (factor 2).
  auto spec = resize_node(floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), Tensor(), int64s({2}, {4, 4}),
                          {Attribute::make_ints("axes", {2, 3}),
                           Attribute::make_string("keep_aspect_ratio_policy", "not_larger")},
                          18);
  check_close(run_one(spec), {1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  spec.attributes[1] = Attribute::make_string("keep_aspect_ratio_policy", "not_smaller");
  Tensor y = run_one(spec);
  REQUIRE(y.shape() == Shape{1, 1, 4, 8});
  CHECK(y.data<float>()[0] == 1.0f);
  CHECK(y.data<float>()[2] == 2.0f);
  CHECK(y.data<float>()[31] == 8.0f);

  auto scaled = resize_node(floats({1, 2}, {1, 3}), floats({1}, {2}), Tensor(),
                            {Attribute::make_ints("axes", {-1}), Attribute::make_string("mode", "linear")}, 18);
  check_close(run_one(scaled), {1, 4}, {1, 1.5f, 2.5f, 3});
}

TEST_CASE("Kernels give the same values on several threads") {
  std::vector<float> values(2 * 3 * 5 * 7);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i)) * 3.0f;
  const Tensor x = floats({2, 3, 5, 7}, values);
  std::vector<SingleNode> specs;
  specs.push_back(resize_node(x, floats({4}, {1, 1, 1.7f, 2.3f}), Tensor(), {Attribute::make_string("mode", "cubic")}));
  specs.push_back(resize_node(x, floats({4}, {1, 1, 0.6f, 1.5f}), Tensor(), {}));
  SingleNode softmax;
  softmax.op_type = "Softmax";
  softmax.inputs = {x};
  softmax.attributes = {Attribute::make_int("axis", 1)};
  specs.push_back(softmax);
  SingleNode inst;
  inst.op_type = "InstanceNormalization";
  inst.inputs = {x, floats({3}, {1, 2, 3}), floats({3}, {0, 1, 2})};
  specs.push_back(inst);
  for (SingleNode& spec : specs) {
    INFO(spec.op_type);
    spec.threads = 1;
    const Tensor serial = run_one(spec);
    spec.threads = 3;
    const Tensor parallel = run_one(spec);
    CHECK(serial.numel() > 0);
    CHECK(serial.bitwise_equal(parallel));
  }
}

TEST_CASE("Malformed parameters are refused with a message naming the problem") {
  auto negative = resize_node(floats({1, 2}, {1, 2}), Tensor(), int64s({2}, {1, -4}), {});
  auto r1 = run_single_node(negative);
  REQUIRE_FALSE(r1.has_value());
  CHECK(r1.status().message().find("sizes must not be negative") != std::string::npos);

  auto wrong_rank = resize_node(floats({1, 2}, {1, 2}), floats({3}, {1, 1, 2}), Tensor(), {});
  auto r2 = run_single_node(wrong_rank);
  REQUIRE_FALSE(r2.has_value());
  CHECK(r2.status().message().find("expected one per input axis (2)") != std::string::npos);

  SingleNode layer;
  layer.op_type = "LayerNormalization";
  layer.inputs = {floats({2, 3}, {1, 2, 3, 4, 5, 6}), floats({2}, {1, 1})};
  auto r3 = run_single_node(layer);
  REQUIRE_FALSE(r3.has_value());
  CHECK(r3.status().message().find("does not broadcast to the normalized shape [3]") != std::string::npos);

  SingleNode bn;
  bn.op_type = "BatchNormalization";
  bn.inputs = {floats({1, 2, 1, 1}, {1, 2}), floats({3}, {1, 1, 1}), floats({3}, {0, 0, 0}), floats({3}, {0, 0, 0}),
               floats({3}, {1, 1, 1})};
  auto r4 = run_single_node(bn);
  REQUIRE_FALSE(r4.has_value());
  CHECK(r4.status().message().find("expected 2 (one per channel") != std::string::npos);
}
