// Unit tests for the Conv, ConvTranspose, Gemm, MatMul and pooling reference kernels.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tests/unit/node_runner.h"
#include "tests/unit/test_model_util.h"

namespace qflow {
namespace {

using testing::SingleNode;
using testing::run_single_node;

std::vector<float> iota(int64_t n, float start = 0.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

using test::noise;
using test::floats;

SingleNode make_node(std::string op_type, std::vector<Tensor> inputs) {
  SingleNode spec;
  spec.op_type = std::move(op_type);
  spec.inputs = std::move(inputs);
  return spec;
}

std::vector<Tensor> run(const SingleNode& spec) {
  auto out = run_single_node(spec);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return std::move(out).value();
}

void check_close(const Tensor& t, const Shape& shape, const std::vector<float>& expected, float tol = 1e-5f) {
  REQUIRE(t.dtype() == DType::Float32);
  REQUIRE(t.shape() == shape);
  REQUIRE(static_cast<std::size_t>(t.numel()) == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(t.data<float>()[i] == doctest::Approx(expected[i]).epsilon(tol));
  }
}

// Direct-loop 2-D convolution used as an independent oracle.
std::vector<float> naive_conv2d(const std::vector<float>& x, const Shape& xs, const std::vector<float>& w,
                                const Shape& ws, const std::vector<float>& b, int64_t group, int64_t stride,
                                int64_t pad, int64_t dil, int64_t oh, int64_t ow) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], m = ws[0], kh = ws[2], kw = ws[3];
  const int64_t cg = c / group, mg = m / group;
  std::vector<float> y(static_cast<std::size_t>(n * m * oh * ow));
  for (int64_t in = 0; in < n; ++in)
    for (int64_t om = 0; om < m; ++om)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(om)];
          const int64_t gi = om / mg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * stride - pad + ky * dil, ix = ox * stride - pad + kx * dil;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += double(x[static_cast<std::size_t>(((in * c + gi * cg + ic) * h + iy) * wd + ix)]) *
                       w[static_cast<std::size_t>(((om * cg + ic) * kh + ky) * kw + kx)];
              }
          y[static_cast<std::size_t>(((in * m + om) * oh + oy) * ow + ox)] = static_cast<float>(acc);
        }
  return y;
}

TEST_CASE("Conv: valid 2x2 window over a 3x3 image") {
  SingleNode spec = make_node("Conv", {floats({1, 1, 3, 3}, iota(9)), floats({1, 1, 2, 2}, {1, 1, 1, 1})});
  check_close(run(spec)[0], {1, 1, 2, 2}, {8, 12, 20, 24});
}

TEST_CASE("Conv: strides and pads (ONNX conv_with_strides_padding)") {
  SingleNode spec = make_node("Conv", {floats({1, 1, 5, 5}, iota(25)), floats({1, 1, 3, 3}, std::vector<float>(9, 1.0f))});
  spec.attributes = {Attribute::make_ints("strides", {2, 2}), Attribute::make_ints("pads", {1, 1, 1, 1})};
  check_close(run(spec)[0], {1, 1, 3, 3}, {12, 27, 24, 63, 108, 81, 72, 117, 84});
}

TEST_CASE("Conv: pointwise with groups and bias") {
  SingleNode spec = make_node("Conv", {floats({1, 2, 2, 2}, iota(8, 1)), floats({2, 1, 1, 1}, {2, -1}), floats({2}, {1, 10})});
  spec.attributes = {Attribute::make_int("group", 2)};
  check_close(run(spec)[0], {1, 2, 2, 2}, {3, 5, 7, 9, 5, 4, 3, 2});
}

TEST_CASE("Conv: dilation") {
  SingleNode spec = make_node("Conv", {floats({1, 1, 1, 5}, iota(5, 1)), floats({1, 1, 1, 2}, {1, 1})});
  spec.attributes = {Attribute::make_ints("dilations", {1, 2})};
  check_close(run(spec)[0], {1, 1, 1, 3}, {4, 6, 8});
}

TEST_CASE("Conv: auto_pad SAME_UPPER pads the end, SAME_LOWER the beginning") {
  SingleNode spec = make_node("Conv", {floats({1, 1, 4}, {1, 2, 3, 4}), floats({1, 1, 2}, {1, 10})});
  spec.attributes = {Attribute::make_string("auto_pad", "SAME_UPPER")};
  check_close(run(spec)[0], {1, 1, 4}, {21, 32, 43, 4});
  spec.attributes = {Attribute::make_string("auto_pad", "SAME_LOWER")};
  check_close(run(spec)[0], {1, 1, 4}, {10, 21, 32, 43});
  spec.attributes = {Attribute::make_string("auto_pad", "VALID"), Attribute::make_ints("pads", {5, 5})};
  check_close(run(spec)[0], {1, 1, 3}, {21, 32, 43});
}

TEST_CASE("Conv: 3-D input") {
  SingleNode spec = make_node("Conv", {floats({1, 1, 2, 2, 3}, iota(12)), floats({1, 1, 2, 2, 2}, std::vector<float>(8, 1.0f))});
  // Windows start at x = 0 and x = 1 of each row: sums of {0,1,3,4,6,7,9,10} and shifted by one.
  check_close(run(spec)[0], {1, 1, 1, 1, 2}, {40, 48});
}

TEST_CASE("Conv: depthwise, strided, dilated and padded conv matches a direct loop") {
  for (int64_t group : {1, 3, 6}) {
    const Shape xs{2, 6, 9, 8}, ws{6, 6 / group, 3, 3};
    const auto x = noise(shape_numel(xs), 7), w = noise(shape_numel(ws), 11), b = noise(6, 13);
    SingleNode spec = make_node("Conv", {floats(xs, x), floats(ws, w), floats({6}, b)});
    spec.attributes = {Attribute::make_int("group", group), Attribute::make_ints("strides", {2, 2}),
                       Attribute::make_ints("pads", {2, 2, 2, 2}), Attribute::make_ints("dilations", {2, 2})};
    // (9 + 4 - 5) / 2 + 1 = 5 rows, (8 + 4 - 5) / 2 + 1 = 4 columns.
    const auto expected = naive_conv2d(x, xs, w, ws, b, group, 2, 2, 2, 5, 4);
    INFO("group " << group);
    check_close(run(spec)[0], {2, 6, 5, 4}, expected, 1e-4f);
  }
}

TEST_CASE("Conv: results are bit-identical for any thread count") {
  const Shape xs{2, 8, 40, 40}, ws{8, 2, 3, 3};
  SingleNode spec = make_node("Conv", {floats(xs, noise(shape_numel(xs), 3)), floats(ws, noise(shape_numel(ws), 5)),
                           floats({8}, noise(8, 9))});
  spec.attributes = {Attribute::make_int("group", 4), Attribute::make_ints("pads", {1, 1, 1, 1})};
  spec.threads = 1;
  const Tensor one = run(spec)[0];
  CHECK(one.shape() == Shape{2, 8, 40, 40});
  for (int threads : {2, 3}) {
    spec.threads = threads;
    CHECK(run(spec)[0].bitwise_equal(one));
  }
}

TEST_CASE("Conv: mismatched channels are reported, not crashed on") {
  SingleNode spec = make_node("Conv", {floats({1, 3, 4, 4}, iota(48)), floats({2, 2, 3, 3}, iota(36))});
  auto out = run_single_node(spec);
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().message().find("Conv 'node'") != std::string::npos);
}

TEST_CASE("ConvTranspose: strides, pads, output_padding, groups, output_shape") {
  SingleNode spec = make_node("ConvTranspose", {floats({1, 1, 2}, {1, 2}), floats({1, 1, 2}, {1, 1})});
  check_close(run(spec)[0], {1, 1, 3}, {1, 3, 2});
  spec.attributes = {Attribute::make_ints("strides", {2})};
  check_close(run(spec)[0], {1, 1, 4}, {1, 1, 2, 2});
  spec.attributes = {Attribute::make_ints("strides", {2}), Attribute::make_ints("pads", {1, 0})};
  check_close(run(spec)[0], {1, 1, 3}, {1, 2, 2});
  spec.attributes = {Attribute::make_ints("strides", {2}), Attribute::make_ints("output_padding", {1})};
  check_close(run(spec)[0], {1, 1, 5}, {1, 1, 2, 2, 0});
  spec.attributes = {Attribute::make_ints("strides", {2}), Attribute::make_ints("output_shape", {5})};
  check_close(run(spec)[0], {1, 1, 5}, {1, 1, 2, 2, 0});

  SingleNode grouped = make_node("ConvTranspose", {floats({1, 2, 1}, {1, 2}), floats({2, 1, 1}, {3, 4}), floats({2}, {0.5f, 1})});
  grouped.attributes = {Attribute::make_int("group", 2)};
  check_close(run(grouped)[0], {1, 2, 1}, {3.5f, 9});
}

TEST_CASE("ConvTranspose: 2-D with dilation scatters taps apart") {
  SingleNode spec = make_node("ConvTranspose", {floats({1, 1, 1, 1}, {2}), floats({1, 1, 2, 2}, {1, 2, 3, 4})});
  spec.attributes = {Attribute::make_ints("dilations", {2, 2})};
  check_close(run(spec)[0], {1, 1, 3, 3}, {2, 0, 4, 0, 0, 0, 6, 0, 8});
}

TEST_CASE("ConvTranspose: kernel equal to the stride, one product for all channels, the general path's bits") {
  // The 2-D case takes one GEMM per tile of input positions; the same numbers as a 3-D
  // ConvTranspose with a depth of one run the general path (per channel, then col2im).
  struct Case {
    std::string name;
    int64_t batch, c, m, h, w, sh, sw;
    bool bias = true;
  };
  const std::vector<Case> cases = {
      {"2x2, several tiles, batch 2", 2, 5, 7, 40, 33, 2, 2},
      {"2x2 without bias", 1, 4, 3, 6, 13, 2, 2, false},
      {"2x3", 1, 3, 4, 9, 11, 2, 3},
      {"1x1", 1, 6, 2, 5, 5, 1, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto x = noise(c.batch * c.c * c.h * c.w, 21), w = noise(c.c * c.m * c.sh * c.sw, 22), b = noise(c.m, 23);
    x[3] = std::numeric_limits<float>::quiet_NaN();
    w[1] = -0.0f;
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      std::vector<Tensor> flat_inputs = {floats({c.batch, c.c, c.h, c.w}, x), floats({c.c, c.m, c.sh, c.sw}, w)};
      std::vector<Tensor> deep_inputs = {floats({c.batch, c.c, 1, c.h, c.w}, x), floats({c.c, c.m, 1, c.sh, c.sw}, w)};
      if (c.bias) {
        flat_inputs.push_back(floats({c.m}, b));
        deep_inputs.push_back(floats({c.m}, b));
      }
      SingleNode flat = make_node("ConvTranspose", flat_inputs);
      flat.attributes = {Attribute::make_ints("strides", {c.sh, c.sw})};
      flat.threads = threads;
      SingleNode deep = make_node("ConvTranspose", deep_inputs);
      deep.attributes = {Attribute::make_ints("strides", {1, c.sh, c.sw})};
      deep.threads = threads;
      const Tensor got = run(flat)[0], want = run(deep)[0];
      REQUIRE(got.shape() == Shape{c.batch, c.m, c.h * c.sh, c.w * c.sw});
      CHECK(got.reshaped(want.shape()).bitwise_equal(want));
    }
  }
}

TEST_CASE("Gemm: transposes, alpha, beta and a broadcast C") {
  const Tensor a = floats({2, 3}, iota(6, 1));       // [[1,2,3],[4,5,6]]
  const Tensor b = floats({3, 2}, {1, 0, 0, 1, 1, 1});  // A*B = [[4,5],[10,11]]
  SingleNode spec = make_node("Gemm", {a, b, floats({2}, {100, 200})});
  spec.attributes = {Attribute::make_float("alpha", 2.0f), Attribute::make_float("beta", 0.5f)};
  check_close(run(spec)[0], {2, 2}, {58, 110, 70, 122});

  SingleNode trans = make_node("Gemm", {floats({3, 2}, {1, 4, 2, 5, 3, 6}), floats({2, 3}, {1, 0, 1, 0, 1, 1})});
  trans.attributes = {Attribute::make_int("transA", 1), Attribute::make_int("transB", 1)};
  check_close(run(trans)[0], {2, 2}, {4, 5, 10, 11});

  SingleNode column_c = make_node("Gemm", {a, b, floats({2, 1}, {1, 2})});
  check_close(run(column_c)[0], {2, 2}, {5, 6, 12, 13});

  SingleNode old = make_node("Gemm", {a, b, floats({1}, {1})});
  old.opset = 6;
  old.attributes = {Attribute::make_int("broadcast", 1)};
  check_close(run(old)[0], {2, 2}, {5, 6, 11, 12});
}

TEST_CASE("Gemm: many rows across threads equal one thread") {
  const Tensor a = floats({150, 7}, noise(150 * 7, 1)), b = floats({7, 5}, noise(35, 2));
  SingleNode spec = make_node("Gemm", {a, b});
  const Tensor one = run(spec)[0];
  spec.threads = 2;
  CHECK(run(spec)[0].bitwise_equal(one));
  CHECK(one.data<float>()[149 * 5 + 4] == doctest::Approx([&] {
          double s = 0;
          for (int k = 0; k < 7; ++k) s += double(a.data<float>()[149 * 7 + k]) * b.data<float>()[k * 5 + 4];
          return s;
        }()));
}

TEST_CASE("MatMul: batch broadcasting and 1-D operands") {
  SingleNode spec = make_node("MatMul", {floats({2, 2, 3}, iota(12)), floats({3, 1}, {1, 1, 1})});
  check_close(run(spec)[0], {2, 2, 1}, {3, 12, 21, 30});

  SingleNode bcast = make_node("MatMul", {floats({2, 1, 1, 2}, {1, 2, 3, 4}), floats({3, 2, 1}, {1, 0, 0, 1, 1, 1})});
  check_close(run(bcast)[0], {2, 3, 1, 1}, {1, 2, 3, 3, 4, 7});

  SingleNode dot = make_node("MatMul", {floats({3}, {1, 2, 3}), floats({3}, {4, 5, 6})});
  check_close(run(dot)[0], {}, {32});

  SingleNode vec_mat = make_node("MatMul", {floats({2}, {1, 2}), floats({2, 2, 3}, iota(12))});
  check_close(run(vec_mat)[0], {2, 3}, {6, 9, 12, 24, 27, 30});

  SingleNode mat_vec = make_node("MatMul", {floats({2, 3}, iota(6)), floats({3}, {1, 0, -1})});
  check_close(run(mat_vec)[0], {2}, {-2, -2});

  SingleNode ints = make_node("MatMul", {Tensor::from_vector<int32_t>({1, 2}, {3, 4}),
                             Tensor::from_vector<int32_t>({2, 1}, {5, 6})});
  const Tensor r = run(ints)[0];
  REQUIRE(r.dtype() == DType::Int32);
  CHECK(r.data<int32_t>()[0] == 39);

  SingleNode bad = make_node("MatMul", {floats({2, 3}, iota(6)), floats({2, 3}, iota(6))});
  CHECK_FALSE(run_single_node(bad).has_value());
}

TEST_CASE("MaxPool: strides, indices in both storage orders") {
  SingleNode spec = make_node("MaxPool", {floats({1, 1, 4, 4}, iota(16))});
  spec.outputs = 2;
  spec.attributes = {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})};
  auto out = run(spec);
  check_close(out[0], {1, 1, 2, 2}, {5, 7, 13, 15});
  REQUIRE(out[1].dtype() == DType::Int64);
  CHECK(out[1].to_int64s() == std::vector<int64_t>{5, 7, 13, 15});
  spec.attributes.push_back(Attribute::make_int("storage_order", 1));
  out = run(spec);
  // Column-major within the plane: (row 1, col 1) -> 5, (1, 3) -> 13, (3, 1) -> 7, (3, 3) -> 15.
  CHECK(out[1].to_int64s() == std::vector<int64_t>{5, 13, 7, 15});
}

TEST_CASE("MaxPool: indices include the batch and channel offset") {
  SingleNode spec = make_node("MaxPool", {floats({1, 2, 1, 3}, {3, 1, 2, 0, 9, 4})});
  spec.outputs = 2;
  spec.attributes = {Attribute::make_ints("kernel_shape", {1, 3})};
  auto out = run(spec);
  check_close(out[0], {1, 2, 1, 1}, {3, 9});
  CHECK(out[1].to_int64s() == std::vector<int64_t>{0, 4});
}

TEST_CASE("MaxPool: ceil_mode, pads, dilations, auto_pad") {
  SingleNode spec = make_node("MaxPool", {floats({1, 1, 3, 3}, iota(9))});
  spec.attributes = {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2}),
                     Attribute::make_int("ceil_mode", 1)};
  check_close(run(spec)[0], {1, 1, 2, 2}, {4, 5, 7, 8});
  spec.attributes[2] = Attribute::make_int("ceil_mode", 0);
  check_close(run(spec)[0], {1, 1, 1, 1}, {4});

  SingleNode padded = make_node("MaxPool", {floats({1, 1, 3}, {-1, -2, -3})});
  padded.attributes = {Attribute::make_ints("kernel_shape", {2}), Attribute::make_ints("pads", {1, 1})};
  // Padding never wins, even against negative values.
  check_close(run(padded)[0], {1, 1, 4}, {-1, -1, -2, -3});

  SingleNode dilated = make_node("MaxPool", {floats({1, 1, 5}, {5, 1, 2, 9, 0})});
  dilated.attributes = {Attribute::make_ints("kernel_shape", {2}), Attribute::make_ints("dilations", {3})};
  check_close(run(dilated)[0], {1, 1, 2}, {9, 1});

  SingleNode same = make_node("MaxPool", {floats({1, 1, 5}, {1, 5, 2, 4, 3})});
  same.attributes = {Attribute::make_ints("kernel_shape", {2}), Attribute::make_ints("strides", {2}),
                     Attribute::make_string("auto_pad", "SAME_UPPER")};
  check_close(run(same)[0], {1, 1, 3}, {5, 4, 3});
  same.attributes[2] = Attribute::make_string("auto_pad", "SAME_LOWER");
  check_close(run(same)[0], {1, 1, 3}, {1, 5, 4});
}

TEST_CASE("AveragePool: count_include_pad and ceil_mode") {
  SingleNode spec = make_node("AveragePool", {floats({1, 1, 2, 2}, {1, 2, 3, 4})});
  spec.attributes = {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("pads", {1, 1, 1, 1})};
  check_close(run(spec)[0], {1, 1, 3, 3}, {1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4});
  spec.attributes.push_back(Attribute::make_int("count_include_pad", 1));
  check_close(run(spec)[0], {1, 1, 3, 3}, {0.25f, 0.75f, 0.5f, 1, 2.5f, 1.5f, 0.75f, 1.75f, 1});

  SingleNode ceil = make_node("AveragePool", {floats({1, 1, 3}, {1, 2, 6})});
  ceil.attributes = {Attribute::make_ints("kernel_shape", {2}), Attribute::make_ints("strides", {2}),
                     Attribute::make_int("ceil_mode", 1)};
  // The partial last window averages the one element it covers.
  check_close(run(ceil)[0], {1, 1, 2}, {1.5f, 6});
}

TEST_CASE("Global pools and LpPool") {
  const Tensor x = floats({1, 2, 2, 2}, {1, 2, 3, 4, -1, -5, 0, 2});
  check_close(run(make_node("GlobalAveragePool", {x}))[0], {1, 2, 1, 1}, {2.5f, -1});
  check_close(run(make_node("GlobalMaxPool", {x}))[0], {1, 2, 1, 1}, {4, 2});
  check_close(run(make_node("GlobalLpPool", {x}))[0], {1, 2, 1, 1}, {std::sqrt(30.0f), std::sqrt(30.0f)});

  SingleNode lp = make_node("LpPool", {floats({1, 1, 3}, {3, -4, 12})});
  lp.attributes = {Attribute::make_ints("kernel_shape", {2}), Attribute::make_int("p", 1)};
  check_close(run(lp)[0], {1, 1, 2}, {7, 16});
  lp.attributes[1] = Attribute::make_int("p", 2);
  check_close(run(lp)[0], {1, 1, 2}, {5, std::sqrt(160.0f)});
}

TEST_CASE("MaxUnpool: scatters values to their indices") {
  SingleNode spec = make_node("MaxUnpool", {floats({1, 1, 2, 2}, {5, 6, 7, 8}),
                                            Tensor::from_vector<int64_t>({1, 1, 2, 2}, {5, 7, 13, 15})});
  spec.attributes = {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})};
  std::vector<float> expected(16, 0.0f);
  expected[5] = 5;
  expected[7] = 6;
  expected[13] = 7;
  expected[15] = 8;
  check_close(run(spec)[0], {1, 1, 4, 4}, expected);
  // A larger output_shape keeps each value at its (row, column), not at its flat index.
  spec.inputs.push_back(Tensor::from_vector<int64_t>({4}, {1, 1, 5, 5}));
  expected.assign(25, 0.0f);
  expected[6] = 5;
  expected[8] = 6;
  expected[16] = 7;
  expected[18] = 8;
  check_close(run(spec)[0], {1, 1, 5, 5}, expected);
  spec.inputs[1] = Tensor::from_vector<int64_t>({1, 1, 2, 2}, {5, 7, 13, 16});
  CHECK_FALSE(run_single_node(spec).has_value());
}

TEST_CASE("Conv and Gemm run on double") {
  SingleNode conv = make_node("Conv", {Tensor::from_vector<double>({1, 1, 3}, {1, 2, 3}),
                                       Tensor::from_vector<double>({1, 1, 2}, {1, -1})});
  const Tensor y = run(conv)[0];
  REQUIRE(y.dtype() == DType::Float64);
  CHECK(y.to_doubles() == std::vector<double>{-1, -1});
  SingleNode gemm = make_node("Gemm", {Tensor::from_vector<double>({1, 2}, {1, 2}),
                                       Tensor::from_vector<double>({2, 1}, {3, 4})});
  CHECK(run(gemm)[0].to_doubles() == std::vector<double>{11});
}

TEST_CASE("Pools: missing kernel_shape is an error") {
  auto out = run_single_node(make_node("MaxPool", {floats({1, 1, 2, 2}, iota(4))}));
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().message().find("kernel_shape") != std::string::npos);
}

}  // namespace
}  // namespace qflow
