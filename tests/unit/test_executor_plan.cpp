// Executor planning: constant nodes computed once, activations fused into Conv/Gemm, buffers
// of dead values reused; every plan must give the bytes the plain node-by-node run gives.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "framework/interpreter/executor.h"
#include "qflow/ir/graph.h"
#include "tests/unit/test_model_util.h"

namespace qflow {
namespace {

using test::floats;

std::vector<float> noise(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 500.0f;
  }
  return v;
}

// Conv (3x3, pad 1, bias) on a [1, 4, 6, 6] input, optionally followed by an activation.
struct ConvModel {
  Model model;
  Value* conv_out = nullptr;
  Node* activation = nullptr;
};

ConvModel conv_model(const std::string& activation, int64_t group = 1, std::vector<Attribute> attributes = {},
                     std::vector<Tensor> extra_inputs = {}) {
  ConvModel m;
  m.model.opset_imports.push_back({"", 17});
  Graph& g = *m.model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs.push_back(x);
  Value* w = g.get_or_create_value("w");
  g.set_initializer(w, floats({4, 4 / group, 3, 3}, noise(4 * (4 / group) * 9, 3)));
  Value* b = g.get_or_create_value("b");
  g.set_initializer(b, floats({4}, noise(4, 5)));
  m.conv_out = g.get_or_create_value("conv_out");
  Node* conv = g.add_node("Conv", {x, w, b}, {m.conv_out}, "conv");
  conv->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  conv->set_attribute(Attribute::make_int("group", group));
  if (activation.empty()) {
    g.outputs = {m.conv_out};
    return m;
  }
  std::vector<Value*> ins{m.conv_out};
  for (std::size_t i = 0; i < extra_inputs.size(); ++i) {
    Value* v = g.get_or_create_value("act_in" + std::to_string(i + 1));
    g.set_initializer(v, extra_inputs[i]);
    ins.push_back(v);
  }
  Value* y = g.get_or_create_value("y");
  m.activation = g.add_node(activation, ins, {y}, "act");
  for (const Attribute& a : attributes) m.activation->set_attribute(a);
  g.outputs = {y};
  return m;
}

std::map<std::string, Tensor> conv_feed() { return {{"x", floats({1, 4, 6, 6}, noise(144, 9))}}; }

Tensor run_output(const Executor& ex, const std::map<std::string, Tensor>& feeds, const std::string& name,
                  const ValueHook& hook = {}) {
  auto out = ex.run(feeds, hook);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return out->at(name);
}

TEST_CASE("Executor: Conv + activation fused gives the bytes of the separate nodes") {
  struct Case {
    std::string op;
    std::vector<Attribute> attributes;
    std::vector<Tensor> extra;
  };
  const std::vector<Case> cases = {
      {"Relu", {}, {}},
      {"Sigmoid", {}, {}},
      {"HardSwish", {}, {}},
      {"HardSigmoid", {Attribute::make_float("alpha", 0.1666667f)}, {}},
      {"Clip", {}, {Tensor::scalar<float>(-0.5f), Tensor::scalar<float>(0.75f)}},
      {"Clip", {}, {Tensor::scalar<float>(0.0f)}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op);
    CAPTURE(c.extra.size());
    for (int64_t group : {int64_t{1}, int64_t{4}}) {
      ConvModel m = conv_model(c.op, group, c.attributes, c.extra);
      for (int threads : {1, 2}) {
        ExecutorOptions options;
        options.threads = threads;
        auto ex = Executor::create(m.model, options);
        REQUIRE(ex.has_value());
        CHECK((*ex)->fused_count() == 1);
        const Tensor fused = run_output(**ex, conv_feed(), "y");
        // A hook sees every value, so this run computes the activation as its own node.
        bool saw_conv_out = false;
        const Tensor separate = run_output(**ex, conv_feed(), "y", [&](const Value& v, const Tensor&) {
          saw_conv_out = saw_conv_out || v.name() == "conv_out";
          return Status::ok();
        });
        CHECK(saw_conv_out);
        CHECK(fused.bitwise_equal(separate));
      }
    }
  }
}

TEST_CASE("Executor: no fusion when the Conv output is needed elsewhere") {
  SUBCASE("graph output") {
    ConvModel m = conv_model("Relu");
    m.model.graph->outputs.push_back(m.conv_out);
    auto ex = Executor::create(m.model);
    REQUIRE(ex.has_value());
    CHECK((*ex)->fused_count() == 0);
    auto out = (*ex)->run(conv_feed());
    REQUIRE(out.has_value());
    const float* c = out->at("conv_out").data<float>();
    const float* y = out->at("y").data<float>();
    for (int64_t i = 0; i < 144; ++i) CHECK(y[i] == (c[i] > 0 ? c[i] : 0.0f));
  }
  SUBCASE("extra output") {
    ConvModel m = conv_model("Relu");
    ExecutorOptions options;
    options.extra_outputs = {"conv_out"};
    auto ex = Executor::create(m.model, options);
    REQUIRE(ex.has_value());
    CHECK((*ex)->fused_count() == 0);
  }
  SUBCASE("second consumer") {
    ConvModel m = conv_model("Relu");
    Graph& g = *m.model.graph;
    Value* z = g.get_or_create_value("z");
    g.add_node("Neg", {m.conv_out}, {z}, "neg");
    g.outputs.push_back(z);
    auto ex = Executor::create(m.model);
    REQUIRE(ex.has_value());
    CHECK((*ex)->fused_count() == 0);
  }
  SUBCASE("Clip bound from a graph input") {
    ConvModel m = conv_model("Clip");
    Graph& g = *m.model.graph;
    Value* lo = g.get_or_create_value("lo");
    g.inputs.push_back(lo);
    m.activation->set_input(1, lo);
    auto ex = Executor::create(m.model);
    REQUIRE(ex.has_value());
    CHECK((*ex)->fused_count() == 0);
    auto feeds = conv_feed();
    feeds["lo"] = Tensor::scalar<float>(0.25f);
    const Tensor y = run_output(**ex, feeds, "y");
    for (float v : y.span<const float>()) CHECK(v >= 0.25f);
  }
}

TEST_CASE("Executor: double Conv with a fused Relu falls back to the separate node") {
  ConvModel m = conv_model("Relu");
  Graph& g = *m.model.graph;
  for (const char* name : {"w", "b"}) {
    Value* v = g.find_value(name);
    g.set_initializer(v, g.initializer(v)->cast(DType::Float64));
  }
  auto ex = Executor::create(m.model);
  REQUIRE(ex.has_value());
  CHECK((*ex)->fused_count() == 1);
  const Tensor x = conv_feed().at("x").cast(DType::Float64);
  const Tensor y = run_output(**ex, {{"x", x}}, "y");
  const Tensor plain = run_output(**ex, {{"x", x}}, "y", [](const Value&, const Tensor&) { return Status::ok(); });
  CHECK(y.dtype() == DType::Float64);
  CHECK(y.bitwise_equal(plain));
  for (double v : y.span<const double>()) CHECK(v >= 0.0);
}

TEST_CASE("Executor: DequantizeLinear of a constant weight is computed once, at create") {
  Model model;
  model.opset_imports.push_back({"", 17});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs.push_back(x);
  std::vector<int8_t> q(4 * 4 * 9);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  Value* wq = g.get_or_create_value("wq");
  g.set_initializer(wq, Tensor::from_vector<int8_t>({4, 4, 3, 3}, q));
  Value* scale = g.get_or_create_value("scale");
  g.set_initializer(scale, Tensor::scalar<float>(0.02f));
  Value* w = g.get_or_create_value("w");
  g.add_node("DequantizeLinear", {wq, scale}, {w}, "dq");
  Value* y = g.get_or_create_value("y");
  g.add_node("Conv", {x, w}, {y}, "conv")->set_attribute(Attribute::make_ints("pads", {1, 1, 1, 1}));
  g.outputs = {y};

  auto ex = Executor::create(model);
  REQUIRE(ex.has_value());
  CHECK((*ex)->folded_count() == 1);
  // The hook still sees the dequantized weight, in execution order.
  std::vector<std::string> seen;
  const Tensor out = run_output(**ex, conv_feed(), "y", [&](const Value& v, const Tensor& t) {
    seen.push_back(v.name());
    if (v.name() == "w") CHECK(t.data<float>()[1] == doctest::Approx(q[1] * 0.02f));
    return Status::ok();
  });
  CHECK(seen == std::vector<std::string>{"w", "y"});

  // Same result as the model with the float weight as an initializer.
  std::vector<float> wf(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) wf[i] = static_cast<float>(q[i]) * 0.02f;
  ConvModel plain = conv_model("");
  plain.model.graph->set_initializer(plain.model.graph->find_value("w"), floats({4, 4, 3, 3}, wf));
  plain.model.graph->set_initializer(plain.model.graph->find_value("b"), floats({4}, std::vector<float>(4, 0.0f)));
  auto ex_plain = Executor::create(plain.model);
  REQUIRE(ex_plain.has_value());
  const Tensor expected = run_output(**ex_plain, conv_feed(), "conv_out");
  const float* a = out.data<float>();
  const float* e = expected.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) CHECK(a[i] == doctest::Approx(e[i]).epsilon(1e-5));
}

TEST_CASE("Executor: a profile times each computed node and names the step that ran a fused one") {
  ConvModel m = conv_model("Relu");
  auto ex = Executor::create(m.model);
  REQUIRE(ex.has_value());
  const std::vector<Node*>& order = (*ex)->order();
  REQUIRE(order.size() == 2);
  RunProfile profile;
  for (int run = 0; run < 2; ++run) REQUIRE((*ex)->run(conv_feed(), {}, &profile).has_value());
  CHECK(profile.runs == 2);
  CHECK(profile.computed == std::vector<char>{1, 0});
  CHECK(profile.fused_into == std::vector<int>{-1, 0});
  CHECK(profile.seconds[0] > 0.0);
  CHECK(profile.seconds[1] == 0.0);
  // With a hook nothing is fused: both nodes run and are timed on their own.
  RunProfile separate;
  REQUIRE((*ex)->run(conv_feed(), [](const Value&, const Tensor&) { return Status::ok(); }, &separate).has_value());
  CHECK(separate.computed == std::vector<char>{1, 1});
  CHECK(separate.fused_into == std::vector<int>{-1, -1});
  CHECK(separate.seconds[1] > 0.0);
}

TEST_CASE("Executor: a buffer still viewed by a Reshape is not reused while the view lives") {
  // a = Relu(x); b = Reshape(a) shares a's buffer; a dies at the Reshape but b lives on, so
  // c and d (same size as a) must get buffers of their own.
  Model model;
  model.opset_imports.push_back({"", 17});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs.push_back(x);
  Value* shape = g.get_or_create_value("shape");
  g.set_initializer(shape, Tensor::from_vector<int64_t>({2}, {4, 36}));
  auto value = [&](const char* name) { return g.get_or_create_value(name); };
  g.add_node("Relu", {x}, {value("a")}, "relu_a");
  g.add_node("Reshape", {value("a"), shape}, {value("b")}, "reshape");
  g.add_node("Sigmoid", {value("b")}, {value("c")}, "sigmoid");
  g.add_node("Neg", {value("c")}, {value("d")}, "neg");
  g.add_node("Add", {value("b"), value("d")}, {value("y")}, "add");
  g.outputs = {value("y")};
  auto ex = Executor::create(model);
  REQUIRE(ex.has_value());
  const std::map<std::string, Tensor> feeds{{"x", floats({144}, noise(144, 21))}};
  const Tensor reused = run_output(**ex, feeds, "y");
  const Tensor plain = run_output(**ex, feeds, "y", [](const Value&, const Tensor&) { return Status::ok(); });
  CHECK(reused.bitwise_equal(plain));
  const std::vector<float> xs = noise(144, 21);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float a = xs[i] > 0 ? xs[i] : 0.0f;
    CHECK(reused.data<float>()[i] == doctest::Approx(a - 1.0f / (1.0f + std::exp(-a))));
  }
  // A second run on the same executor starts from a clean arena.
  CHECK(run_output(**ex, feeds, "y").bitwise_equal(reused));
}

TEST_CASE("Executor: depthwise Conv with a channel multiplier is identical for 1 and 2 threads") {
  Model model;
  model.opset_imports.push_back({"", 17});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs.push_back(x);
  Value* w = g.get_or_create_value("w");
  const std::vector<float> wv = noise(8 * 25, 17);
  g.set_initializer(w, floats({8, 1, 5, 5}, wv));
  Value* y = g.get_or_create_value("y");
  Node* conv = g.add_node("Conv", {x, w}, {y}, "dw");
  conv->set_attribute(Attribute::make_int("group", 4));
  conv->set_attribute(Attribute::make_ints("strides", {2, 1}));
  conv->set_attribute(Attribute::make_ints("pads", {2, 1, 2, 3}));
  g.outputs = {y};
  const std::vector<float> xv = noise(2 * 4 * 11 * 7, 19);
  const std::map<std::string, Tensor> feeds{{"x", floats({2, 4, 11, 7}, xv)}};
  std::vector<Tensor> outs;
  for (int threads : {1, 2}) {
    ExecutorOptions options;
    options.threads = threads;
    auto ex = Executor::create(model, options);
    REQUIRE(ex.has_value());
    outs.push_back(run_output(**ex, feeds, "y"));
  }
  CHECK(outs[0].bitwise_equal(outs[1]));
  // (11 + 4 - 5) / 2 + 1 = 6 rows, (7 + 4 - 5) + 1 = 7 columns; output channel oc reads input oc / 2.
  REQUIRE(outs[0].shape() == Shape{2, 8, 6, 7});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t oc = 0; oc < 8; ++oc)
      for (int64_t oy = 0; oy < 6; ++oy)
        for (int64_t ox = 0; ox < 7; ++ox) {
          double sum = 0;
          for (int64_t ky = 0; ky < 5; ++ky)
            for (int64_t kx = 0; kx < 5; ++kx) {
              const int64_t iy = oy * 2 - 2 + ky, ix = ox - 1 + kx;
              if (iy < 0 || iy >= 11 || ix < 0 || ix >= 7) continue;
              sum += double(wv[static_cast<std::size_t>(oc * 25 + ky * 5 + kx)]) *
                     xv[static_cast<std::size_t>(((n * 4 + oc / 2) * 11 + iy) * 7 + ix)];
            }
          const float got = outs[0].data<float>()[((n * 8 + oc) * 6 + oy) * 7 + ox];
          CHECK(got == doctest::Approx(sum).epsilon(1e-5));
        }
}

}  // namespace
}  // namespace qflow
