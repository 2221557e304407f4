// Unit tests for Conv, Gemm and MatMul with constant weights, which the kernels pack once for
// sgemm: results against direct loops, bit-identical to the unpacked path and across thread
// counts, batched MatMul, and a weight that is also a graph input (fed at run time in place
// of the packed constant).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "framework/interpreter/kernels/sgemm.h"
#include "tests/unit/node_runner.h"
#include "tests/unit/test_model_util.h"

namespace qflow {
namespace {

using testing::SingleNode;
using testing::run_single_node;

using test::noise;
using test::floats;

Tensor run_spec(const SingleNode& spec) {
  auto out = run_single_node(spec);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return out->at(0);
}

void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::fabs(got.data<float>()[i] - want[i]) <= tol);
  }
}

// Runs the spec with weights as initializers (packed) and as graph inputs (unpacked), at 1
// and 2 threads; all four must agree bit for bit. Returns the packed 1-thread result.
Tensor run_packed_and_unpacked(SingleNode spec, std::vector<bool> constant) {
  spec.threads = 1;
  spec.constant_inputs.assign(spec.inputs.size(), false);
  const Tensor unpacked = run_spec(spec);
  spec.constant_inputs = constant;
  const Tensor packed = run_spec(spec);
  CHECK(packed.bitwise_equal(unpacked));
  spec.threads = 2;
  CHECK(run_spec(spec).bitwise_equal(packed));
  return packed;
}

struct ConvCase {
  Shape xs, ws;
  int64_t group, stride, pad;
};

// Direct-loop 2-D convolution with bias.
std::vector<double> direct_conv(const ConvCase& c, const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& b, int64_t oh, int64_t ow) {
  const int64_t n = c.xs[0], ch = c.xs[1], h = c.xs[2], wd = c.xs[3], m = c.ws[0], kh = c.ws[2], kw = c.ws[3];
  const int64_t cg = ch / c.group, mg = m / c.group;
  std::vector<double> y;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t om = 0; om < m; ++om)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b[static_cast<std::size_t>(om)];
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * c.stride - c.pad + ky, ix = ox * c.stride - c.pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += double(x[static_cast<std::size_t>(((in * ch + om / mg * cg + ic) * h + iy) * wd + ix)]) *
                       w[static_cast<std::size_t>(((om * cg + ic) * kh + ky) * kw + kx)];
              }
          y.push_back(acc);
        }
  return y;
}

TEST_CASE("Conv with a constant weight: packed GEMM matches a direct loop and the unpacked path") {
  const ConvCase cases[] = {
      {{1, 3, 17, 19}, {8, 3, 3, 3}, 1, 1, 1},     // partial strips and rows
      {{2, 32, 9, 11}, {13, 32, 3, 3}, 1, 2, 1},   // 288 rows: more than one depth block
      {{1, 8, 10, 10}, {12, 4, 3, 3}, 2, 1, 0},    // groups, no padding
      {{1, 20, 12, 30}, {7, 20, 1, 1}, 1, 1, 0},   // pointwise: B read straight from the image
      {{1, 300, 5, 7}, {6, 300, 1, 1}, 1, 1, 0},   // pointwise, deep
      {{1, 4, 6, 6}, {4, 1, 3, 3}, 4, 1, 1},       // depthwise: not packed, still correct
  };
  for (const ConvCase& c : cases) {
    const int64_t oh = (c.xs[2] + 2 * c.pad - c.ws[2]) / c.stride + 1, ow = (c.xs[3] + 2 * c.pad - c.ws[3]) / c.stride + 1;
    const auto x = noise(shape_numel(c.xs), 3), w = noise(shape_numel(c.ws), 5), b = noise(c.ws[0], 7);
    SingleNode spec = testing::single_node(
        "Conv", {floats(c.xs, x), floats(c.ws, w), floats({c.ws[0]}, b)},
        {Attribute::make_int("group", c.group), Attribute::make_ints("strides", {c.stride, c.stride}),
         Attribute::make_ints("pads", {c.pad, c.pad, c.pad, c.pad})});
    INFO("weight " << shape_to_string(c.ws) << " group " << c.group);
    const Tensor y = run_packed_and_unpacked(spec, {false, true, true});
    CHECK(y.shape() == Shape{c.xs[0], c.ws[0], oh, ow});
    check_close(y, direct_conv(c, x, w, b, oh, ow), 1e-4);
  }
}

TEST_CASE("Conv with few output channels: the direct kernel gives the GEMM's bits on every tile") {
  struct DirectCase {
    std::string name;
    Shape xs, ws;
    std::vector<int64_t> strides, dilations, pads;
  };
  const std::vector<DirectCase> cases = {
      // 13 channels: strips of 6, 6 and 1 (AVX-512: a pair of strips and a single one); 70
      // columns: whole, partial and masked chunks; rows 1 to 11 read no padding row.
      {"3x3 pad 1", {1, 5, 13, 70}, {13, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"3x5 dilated, row stride 2, uneven pads", {2, 4, 17, 41}, {7, 4, 3, 5}, {2, 1}, {2, 2}, {2, 0, 1, 3}},
      {"1x3 without pads", {1, 6, 3, 50}, {9, 6, 1, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {"wider window than the image", {1, 2, 5, 4}, {3, 2, 3, 7}, {1, 1}, {1, 1}, {1, 3, 1, 3}},
      {"48 channels, 160 columns in several tiles", {1, 8, 6, 160}, {48, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
  };
  const SgemmIsa saved = sgemm_isa();
  for (const SgemmIsa isa : {SgemmIsa::Avx2, SgemmIsa::Avx512}) {
    if (!sgemm_set_isa(isa)) continue;
    for (const DirectCase& c : cases) {
      CAPTURE(c.name);
      CAPTURE(static_cast<int>(isa));
      auto x = noise(shape_numel(c.xs), 11), w = noise(shape_numel(c.ws), 12);
      SingleNode spec = testing::single_node(
          "Conv", {floats(c.xs, x), floats(c.ws, w), floats({c.ws[0]}, noise(c.ws[0], 13))},
          {Attribute::make_ints("strides", c.strides), Attribute::make_ints("dilations", c.dilations),
           Attribute::make_ints("pads", c.pads)});
      run_packed_and_unpacked(spec, {false, true, true});
      // Padding taps are multiply-adds of zeros, as im2col's: an infinite weight makes NaN
      // wherever its tap falls into the padding, a NaN pixel spreads to its windows.
      w[static_cast<std::size_t>(c.ws[1] * c.ws[2] * c.ws[3] + 1)] = std::numeric_limits<float>::infinity();
      x[7] = std::numeric_limits<float>::quiet_NaN();
      spec.inputs[0] = floats(c.xs, x);
      spec.inputs[1] = floats(c.ws, w);
      run_packed_and_unpacked(spec, {false, true, true});
    }
  }
  REQUIRE(sgemm_set_isa(saved));
}

TEST_CASE("Conv with a constant weight: 1-D and 3-D convolutions") {
  const auto x1 = noise(2 * 5 * 40, 1), w1 = noise(6 * 5 * 3, 2);
  SingleNode one = testing::single_node("Conv", {floats({2, 5, 40}, x1), floats({6, 5, 3}, w1)});
  const Tensor y1 = run_packed_and_unpacked(one, {false, true});
  REQUIRE(y1.shape() == Shape{2, 6, 38});
  double acc = 0;  // batch 1, channel 5, position 37
  for (int64_t c = 0; c < 5; ++c)
    for (int64_t t = 0; t < 3; ++t)
      acc += double(x1[static_cast<std::size_t>((5 + c) * 40 + 37 + t)]) * w1[static_cast<std::size_t>((5 * 5 + c) * 3 + t)];
  CHECK(y1.data<float>()[(6 + 5) * 38 + 37] == doctest::Approx(acc).epsilon(1e-5));

  SingleNode three = testing::single_node("Conv", {floats({1, 2, 4, 5, 6}, noise(240, 3)), floats({3, 2, 2, 2, 2}, noise(48, 4))},
                                          {Attribute::make_ints("pads", {1, 0, 1, 1, 0, 1})});
  CHECK(run_packed_and_unpacked(three, {false, true}).shape() == Shape{1, 3, 5, 4, 7});
}

// out[batch..., m, n] = A x B with numpy broadcasting of the batch dimensions, in double.
std::vector<double> direct_matmul(const Shape& as, const std::vector<float>& a, const Shape& bs,
                                  const std::vector<float>& b, const Shape& out_batch) {
  const std::size_t rank = out_batch.size();
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  auto matrix_index = [&](const Shape& s, const Shape& index) {
    int64_t at = 0;
    const std::size_t lead = rank - (s.size() - 2);
    for (std::size_t d = lead; d < rank; ++d) at = at * s[d - lead] + (s[d - lead] == 1 ? 0 : index[d]);
    return at;
  };
  std::vector<double> y;
  Shape index(rank, 0);
  for (int64_t bi = 0; bi < shape_numel(out_batch); ++bi) {
    for (int64_t d = static_cast<int64_t>(rank) - 1, rem = bi; d >= 0; --d) {
      index[static_cast<std::size_t>(d)] = rem % out_batch[static_cast<std::size_t>(d)];
      rem /= out_batch[static_cast<std::size_t>(d)];
    }
    const int64_t ia = matrix_index(as, index), ib = matrix_index(bs, index);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(a[static_cast<std::size_t>((ia * m + i) * k + p)]) * b[static_cast<std::size_t>((ib * k + p) * n + j)];
        y.push_back(acc);
      }
  }
  return y;
}

TEST_CASE("MatMul on sgemm: batched and broadcast shapes, constant B packed per matrix") {
  struct Case {
    Shape as, bs, out_batch;
  };
  const Case cases[] = {
      {{2, 3, 5, 7}, {7, 9}, {2, 3}},           // one B for all: a single tall product
      {{2, 3, 70, 7}, {1, 7, 9}, {2, 3}},       // tall enough for several row blocks
      {{2, 3, 5, 7}, {3, 7, 17}, {2, 3}},       // B broadcast over the leading dimension
      {{1, 5, 300}, {2, 1, 300, 20}, {2, 1}},   // A broadcast, B deep with a batch of two
      {{4, 1, 33}, {4, 33, 1}, {4}},            // one-row, one-column products
      // A packed B wider than A is tall goes to the threads by column ranges: n not a
      // multiple of the tiles, k over two depth blocks, A stacked from a batch.
      {{1, 40, 300}, {300, 1000}, {1}},
      {{2, 3, 300}, {300, 100}, {2}},
  };
  for (const Case& c : cases) {
    const auto a = noise(shape_numel(c.as), 11), b = noise(shape_numel(c.bs), 13);
    SingleNode spec = testing::single_node("MatMul", {floats(c.as, a), floats(c.bs, b)});
    INFO("A " << shape_to_string(c.as) << " B " << shape_to_string(c.bs));
    const Tensor y = run_packed_and_unpacked(spec, {false, true});
    Shape want_shape = c.out_batch;
    want_shape.push_back(c.as[c.as.size() - 2]);
    want_shape.push_back(c.bs.back());
    CHECK(y.shape() == want_shape);
    check_close(y, direct_matmul(c.as, a, c.bs, b, c.out_batch), 1e-4);
  }
}

TEST_CASE("Gemm on sgemm: transposed operands, alpha, beta and C with a constant B") {
  const auto a = noise(9 * 70, 17), b = noise(70 * 21, 19), c = noise(21, 23);
  for (int trans_a : {0, 1})
    for (int trans_b : {0, 1}) {
      const Shape as = trans_a ? Shape{70, 9} : Shape{9, 70}, bs = trans_b ? Shape{21, 70} : Shape{70, 21};
      SingleNode spec = testing::single_node(
          "Gemm", {floats(as, a), floats(bs, b), floats({21}, c)},
          {Attribute::make_int("transA", trans_a), Attribute::make_int("transB", trans_b),
           Attribute::make_float("alpha", 0.5f), Attribute::make_float("beta", 2.0f)});
      INFO("transA " << trans_a << " transB " << trans_b);
      const Tensor y = run_packed_and_unpacked(spec, {false, true, true});
      std::vector<double> want;
      for (int64_t i = 0; i < 9; ++i)
        for (int64_t j = 0; j < 21; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < 70; ++p)
            acc += double(a[static_cast<std::size_t>(trans_a ? p * 9 + i : i * 70 + p)]) *
                   b[static_cast<std::size_t>(trans_b ? j * 70 + p : p * 21 + j)];
          want.push_back(0.5 * acc + 2.0 * c[static_cast<std::size_t>(j)]);
        }
      CHECK(y.shape() == Shape{9, 21});
      check_close(y, want, 1e-4);
    }
}

// One node y = op(x, w) on graph inputs x and w; w is also an initializer when `initial` is
// given, so a run may feed it or not.
Model x_w_model(const std::string& op, const Tensor* initial, const std::vector<Attribute>& attributes = {}) {
  Model model;
  model.opset_imports.push_back({"", 17});
  Graph& g = *model.graph;
  Value* xv = g.get_or_create_value("x");
  Value* wv = g.get_or_create_value("w");
  Value* yv = g.get_or_create_value("y");
  g.inputs = {xv, wv};
  if (initial) g.set_initializer(wv, *initial);
  Node* node = g.add_node(op, {xv, wv}, {yv}, "node");
  for (const Attribute& a : attributes) node->set_attribute(a);
  g.outputs = {yv};
  return model;
}

Tensor run_with_overridable_weight(const std::string& op, const Tensor& x, const Tensor& initial,
                                   const Tensor* fed) {
  const Model model = x_w_model(op, &initial);
  auto executor = Executor::create(model, ExecutorOptions{});
  REQUIRE_MESSAGE(executor.has_value(), executor.status().message());
  std::map<std::string, Tensor> feeds{{"x", x}};
  if (fed) feeds["w"] = *fed;
  auto results = (*executor)->run(feeds);
  REQUIRE_MESSAGE(results.has_value(), results.status().message());
  return results->at("y");
}

TEST_CASE("A weight that is also a graph input: a fed value replaces the packed constant") {
  const Tensor x = floats({1, 2, 4, 4}, noise(32, 29));
  const Tensor ones = floats({1, 2, 1, 1}, {1, 1}), twos = floats({1, 2, 1, 1}, {2, 2});
  const Tensor by_initializer = run_with_overridable_weight("Conv", x, ones, nullptr);
  const Tensor by_feed = run_with_overridable_weight("Conv", x, ones, &twos);
  for (int64_t i = 0; i < 16; ++i) {
    const float sum = x.data<float>()[i] + x.data<float>()[16 + i];
    CHECK(by_initializer.data<float>()[i] == doctest::Approx(sum));
    CHECK(by_feed.data<float>()[i] == doctest::Approx(2 * sum));
  }

  const Tensor a = floats({3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor identity = floats({2, 2}, {1, 0, 0, 1}), swap = floats({2, 2}, {0, 1, 1, 0});
  const Tensor kept = run_with_overridable_weight("MatMul", a, identity, nullptr);
  const Tensor swapped = run_with_overridable_weight("MatMul", a, identity, &swap);
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(kept.data<float>()[2 * i] == a.data<float>()[2 * i]);
    CHECK(swapped.data<float>()[2 * i] == a.data<float>()[2 * i + 1]);
  }
}

TEST_CASE("Conv derives its geometry again when a run brings other shapes") {
  // One executor, inputs and weights of changing shapes (batch, image, kernel), dense and
  // depthwise: each result must equal a fresh executor's.
  for (const int64_t group : {int64_t{1}, int64_t{4}}) {
    const Model model =
        x_w_model("Conv", nullptr, {Attribute::make_int("group", group), Attribute::make_ints("pads", {1, 1, 1, 1})});
    auto shared = Executor::create(model, ExecutorOptions{});
    REQUIRE_MESSAGE(shared.has_value(), shared.status().message());
    struct Run {
      Shape x, w;
    };
    const int64_t cg = 4 / group;
    uint32_t seed = 3;
    for (const Run& r : {Run{{1, 4, 6, 6}, {4, cg, 3, 3}}, Run{{2, 4, 9, 5}, {4, cg, 3, 3}},
                         Run{{1, 4, 6, 6}, {4, cg, 5, 5}}, Run{{1, 4, 6, 6}, {4, cg, 3, 3}}}) {
      const auto count = [](const Shape& s) {
        int64_t n = 1;
        for (const int64_t d : s) n *= d;
        return n;
      };
      const std::map<std::string, Tensor> feeds{{"x", floats(r.x, noise(count(r.x), ++seed))},
                                                {"w", floats(r.w, noise(count(r.w), ++seed))}};
      auto fresh = Executor::create(model, ExecutorOptions{});
      REQUIRE(fresh.has_value());
      auto want = (*fresh)->run(feeds);
      auto got = (*shared)->run(feeds);
      REQUIRE_MESSAGE(want.has_value(), want.status().message());
      REQUIRE_MESSAGE(got.has_value(), got.status().message());
      INFO("group ", group, " x ", shape_to_string(r.x), " w ", shape_to_string(r.w));
      CHECK(got->at("y").shape() == want->at("y").shape());
      CHECK(got->at("y").bitwise_equal(want->at("y")));
    }
  }
}

}  // namespace
}  // namespace qflow
