// Tests of the cross-layer-equalization pass: balanced ranges, skipped pairs and numerical equivalence.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "framework/interpreter/executor.h"
#include "tests/builtin_plugins/pass_test_graphs.h"
#include "plugins/passes/cross_layer_equalization.h"

namespace qflow {
namespace {

using namespace pass_test;

// Weights drawn from N(0, 1), then output channel o multiplied by row_scale[o % size]:
// very unequal per-channel ranges are what the pass exists to balance.
Tensor random_weights(const Shape& shape, const std::vector<float>& row_scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor t(DType::Float32, shape);
  const int64_t block = t.numel() / shape[0];
  float* w = t.data<float>();
  for (int64_t k = 0; k < t.numel(); ++k) w[k] = dist(rng) * row_scale[static_cast<std::size_t>(k / block) % row_scale.size()];
  return t;
}

Value* add_initializer(Graph& g, const std::string& name, Tensor t) {
  Value* v = g.get_or_create_value(name);
  g.set_initializer(v, std::move(t));
  return v;
}

Node* add_conv(Graph& g, const std::string& name, Value* in, Value* out, Tensor w, Tensor b, int64_t group,
               const std::vector<int64_t>& pads) {
  Value* wv = add_initializer(g, name + ".W", std::move(w));
  Value* bv = add_initializer(g, name + ".B", std::move(b));
  Node* n = g.add_node("Conv", {in, wv, bv}, {out}, name);
  n->set_attribute(Attribute::make_int("group", group));
  n->set_attribute(Attribute::make_ints("pads", pads));
  return n;
}

Tensor bias(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(n));
  for (float& v : values) v = dist(rng);
  return Tensor::from_vector<float>({n}, values);
}

// x[1,4,6,6] -> conv1 (3x3, 4->4) -> act -> conv2 (3x3, 4->3) -> y. `act` is "Relu",
// "Relu6" (Clip 0..6 with bound inputs) or "" for none. With `second_user`, conv1's output
// also feeds a Neg that is a graph output.
Model conv_pair(const std::string& act, bool second_user = false) {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  g.name = "cle";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({1, 4, 6, 6});
  g.inputs = {x};
  Value* a = g.get_or_create_value("a");
  add_conv(g, "conv1", x, a, random_weights({4, 4, 3, 3}, {50.0f, 0.02f, 1.0f, 3.0f}, 1), bias(4, 2), 1, {1, 1, 1, 1});
  Value* c2_in = a;
  if (act == "Relu") {
    c2_in = g.get_or_create_value("r");
    g.add_node("Relu", {a}, {c2_in}, "relu");
  } else if (act == "Relu6") {
    c2_in = g.get_or_create_value("r");
    Value* lo = add_initializer(g, "clip.min", Tensor::scalar<float>(0.0f));
    Value* hi = add_initializer(g, "clip.max", Tensor::scalar<float>(6.0f));
    g.add_node("Clip", {a, lo, hi}, {c2_in}, "relu6");
  }
  Value* y = g.get_or_create_value("y");
  // conv2's columns get their own imbalance, the other way round from conv1's rows.
  Tensor w2 = random_weights({3, 4, 3, 3}, {1.0f}, 3);
  float* w2d = w2.data<float>();
  const float column_scale[4] = {0.01f, 20.0f, 0.5f, 4.0f};
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t k = 0; k < 9; ++k) w2d[(o * 4 + i) * 9 + k] *= column_scale[i];
  add_conv(g, "conv2", c2_in, y, w2, bias(3, 4), 1, {0, 0, 0, 0});
  y->type = float_type({1, 3, 4, 4});
  g.outputs = {y};
  if (second_user) {
    Value* z = g.get_or_create_value("z");
    g.add_node("Neg", {a}, {z}, "neg");
    z->type = float_type({1, 4, 6, 6});
    g.outputs.push_back(z);
  }
  return model;
}

// x[1,3,8,8] -> expand (1x1, 3->6) -> Relu -> depthwise (3x3, 6 groups) -> Relu -> project (1x1, 6->4) -> y.
Model depthwise_triple() {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  g.name = "cle_dw";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({1, 3, 8, 8});
  g.inputs = {x};
  Value* a = g.get_or_create_value("a");
  Value* ar = g.get_or_create_value("ar");
  Value* d = g.get_or_create_value("d");
  Value* dr = g.get_or_create_value("dr");
  Value* y = g.get_or_create_value("y");
  add_conv(g, "expand", x, a, random_weights({6, 3, 1, 1}, {10.0f, 0.1f, 1.0f, 0.5f, 30.0f, 2.0f}, 11), bias(6, 12), 1,
           {0, 0, 0, 0});
  g.add_node("Relu", {a}, {ar}, "relu1");
  add_conv(g, "dw", ar, d, random_weights({6, 1, 3, 3}, {0.05f, 8.0f, 1.0f, 40.0f, 0.2f, 3.0f}, 13), bias(6, 14), 6,
           {1, 1, 1, 1});
  g.add_node("Relu", {d}, {dr}, "relu2");
  Tensor wp = random_weights({4, 6, 1, 1}, {1.0f}, 15);
  float* wpd = wp.data<float>();
  const float column_scale[6] = {5.0f, 0.02f, 1.0f, 0.3f, 12.0f, 0.7f};
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 6; ++i) wpd[o * 6 + i] *= column_scale[i];
  add_conv(g, "project", dr, y, wp, bias(4, 16), 1, {0, 0, 0, 0});
  y->type = float_type({1, 4, 8, 8});
  g.outputs = {y};
  return model;
}

const Tensor& weights(const Model& model, const std::string& conv) {
  const Tensor* t = model.graph->initializer(model.graph->find_value(conv + ".W"));
  REQUIRE(t != nullptr);
  return *t;
}

// max |W[o, ...]| per output channel.
std::vector<double> output_ranges(const Tensor& w) {
  const int64_t block = w.numel() / w.dim(0);
  std::vector<double> r(static_cast<std::size_t>(w.dim(0)), 0.0);
  const auto s = w.span<float>();
  for (int64_t k = 0; k < w.numel(); ++k)
    r[static_cast<std::size_t>(k / block)] = std::max(r[static_cast<std::size_t>(k / block)], std::abs(double(s[k])));
  return r;
}

// max |W[:, i, ...]| per input channel of an ungrouped conv.
std::vector<double> input_ranges(const Tensor& w) {
  const int64_t in = w.dim(1);
  const int64_t spatial = w.numel() / (w.dim(0) * in);
  std::vector<double> r(static_cast<std::size_t>(in), 0.0);
  const auto s = w.span<float>();
  for (int64_t k = 0; k < w.numel(); ++k) {
    const auto i = static_cast<std::size_t>((k / spatial) % in);
    r[i] = std::max(r[i], std::abs(double(s[k])));
  }
  return r;
}

double spread(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(a[i], b[i]));
  return worst;
}

Tensor random_input(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Tensor t(DType::Float32, shape);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

Tensor run_model(const Model& model, const Tensor& x) {
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto outputs = executor.value()->run({{"x", x}});
  REQUIRE(outputs.has_value());
  return outputs.value().at("y");
}

// Largest |before - after| relative to the largest |before|: the outputs' own scale.
double relative_error(const Tensor& before, const Tensor& after) {
  REQUIRE(before.shape() == after.shape());
  double peak = 0.0;
  double diff = 0.0;
  const auto b = before.span<float>();
  const auto a = after.span<float>();
  for (std::size_t k = 0; k < b.size(); ++k) {
    peak = std::max(peak, std::abs(double(b[k])));
    diff = std::max(diff, std::abs(double(b[k]) - double(a[k])));
  }
  REQUIRE(peak > 0.0);
  return diff / peak;
}

Options options(double tolerance = 1e-4, int64_t max_iterations = 20, bool through_relu6 = false) {
  Options o;
  o.set("tolerance", tolerance);
  o.set("max-iterations", max_iterations);
  o.set("through-relu6", through_relu6);
  return o;
}

std::unique_ptr<Pass> make_pass(const Options& o) {
  auto pass = CrossLayerEqualization::create(o);
  REQUIRE(pass.has_value());
  return std::move(pass.value());
}

TEST_CASE("cross-layer-equalization: Conv -> Relu -> Conv ends with equal per-channel ranges") {
  Model model = conv_pair("Relu");
  const Tensor w1_before = weights(model, "conv1");
  const Tensor w2_before = weights(model, "conv2");
  // The setup really is unbalanced: ranges differ by orders of magnitude.
  CHECK(spread(output_ranges(w1_before), input_ranges(w2_before)) > 0.9);

  auto result = make_pass(options())->run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("pairs-equalized") == 1);
  CHECK(result->counters.at("iterations") == 2);  // one step balances, the second confirms
  const std::vector<double> r1 = output_ranges(weights(model, "conv1"));
  const std::vector<double> r2 = input_ranges(weights(model, "conv2"));
  CHECK(spread(r1, r2) < 1e-5);
  // The balanced range is the geometric mean of the original two.
  const std::vector<double> r1_before = output_ranges(w1_before);
  const std::vector<double> r2_before = input_ranges(w2_before);
  for (std::size_t i = 0; i < r1.size(); ++i)
    CHECK(r1[i] == doctest::Approx(std::sqrt(r1_before[i] * r2_before[i])).epsilon(1e-5));
  // Fresh tensors: the handles taken before the pass still hold the original weights.
  CHECK_FALSE(w1_before.bitwise_equal(weights(model, "conv1")));
  CHECK(output_ranges(w1_before) == r1_before);
  CHECK(model.graph->node_count() == 3);
  CHECK(model.graph->validate().is_ok());
}

TEST_CASE("cross-layer-equalization: outputs are preserved through Relu and without activation") {
  for (const std::string act : {"Relu", ""}) {
    CAPTURE(act);
    const Model original = conv_pair(act);
    Model optimized = conv_pair(act);
    auto result = make_pass(options())->run(optimized);
    REQUIRE(result.has_value());
    REQUIRE(result->changed);
    for (uint32_t seed : {21u, 22u, 23u}) {
      const Tensor x = random_input({1, 4, 6, 6}, seed);
      // float32 convolutions of rescaled weights: 1e-4 of the output's peak.
      CHECK(relative_error(run_model(original, x), run_model(optimized, x)) < 1e-4);
    }
  }
}

TEST_CASE("cross-layer-equalization: depthwise triple is balanced from both sides") {
  const Model original = depthwise_triple();
  Model model = depthwise_triple();
  auto result = make_pass(options(1e-9, 200))->run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("pairs-equalized") == 2);
  CHECK(result->counters.at("iterations") > 2);  // the shared depthwise conv couples the pairs
  const std::vector<double> ra = output_ranges(weights(model, "expand"));
  const std::vector<double> rd = output_ranges(weights(model, "dw"));  // a depthwise row is its input channel too
  const std::vector<double> rp = input_ranges(weights(model, "project"));
  CHECK(spread(ra, rd) < 1e-5);
  CHECK(spread(rd, rp) < 1e-5);
  for (uint32_t seed : {31u, 32u}) {
    const Tensor x = random_input({1, 3, 8, 8}, seed);
    CHECK(relative_error(run_model(original, x), run_model(model, x)) < 1e-4);
  }
}

TEST_CASE("cross-layer-equalization: a conv whose output has two users is left alone") {
  Model model = conv_pair("Relu", /*second_user=*/true);
  const Tensor w1 = weights(model, "conv1");
  const Tensor w2 = weights(model, "conv2");
  auto result = make_pass(options())->run(model);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->changed);
  CHECK(result->counters.at("pairs-equalized") == 0);
  CHECK(result->counters.at("iterations") == 0);
  CHECK(weights(model, "conv1").bitwise_equal(w1));
  CHECK(weights(model, "conv2").bitwise_equal(w2));
}

TEST_CASE("cross-layer-equalization: Relu6 is crossed only on request, and then approximately") {
  {
    Model model = conv_pair("Relu6");
    const Tensor w1 = weights(model, "conv1");
    auto result = make_pass(options())->run(model);
    REQUIRE(result.has_value());
    CHECK_FALSE(result->changed);
    CHECK(weights(model, "conv1").bitwise_equal(w1));
  }
  Model model = conv_pair("Relu6");
  auto result = make_pass(options(1e-4, 20, /*through_relu6=*/true))->run(model);
  REQUIRE(result.has_value());
  CHECK(result->changed);
  CHECK(result->counters.at("pairs-equalized") == 1);
  CHECK(spread(output_ranges(weights(model, "conv1")), input_ranges(weights(model, "conv2"))) < 1e-5);
}

TEST_CASE("cross-layer-equalization: an already balanced pair is unchanged") {
  Model model = conv_pair("Relu");
  REQUIRE(make_pass(options())->run(model).has_value());
  const Tensor w1 = weights(model, "conv1");
  auto second = make_pass(options())->run(model);
  REQUIRE(second.has_value());
  CHECK_FALSE(second->changed);
  CHECK(second->counters.at("pairs-equalized") == 0);
  CHECK(weights(model, "conv1").bitwise_equal(w1));
}

TEST_CASE("cross-layer-equalization: component metadata and option checks") {
  const ComponentInfo info = CrossLayerEqualization::info();
  CHECK(info.kind == ComponentKind::Pass);
  CHECK(info.name == "cross-layer-equalization");
  CHECK(info.options.size() == 3);
  CHECK(CrossLayerEqualization::create(options()).has_value());
  CHECK_FALSE(CrossLayerEqualization::create(options(0.0)).has_value());
  CHECK_FALSE(CrossLayerEqualization::create(options(1e-4, 0)).has_value());
}

}  // namespace
}  // namespace qflow
