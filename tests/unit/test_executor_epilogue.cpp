// Epilogue programs: chains of element-wise nodes after a Conv/Gemm computed in its output
// loop must give the bytes of the nodes run one by one (a hook turns fusion off).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "framework/onnx/onnx_import.h"
#include "framework/interpreter/executor.h"
#include "qflow/ir/graph.h"
#include "qflow/runtime/isa_cap.h"

namespace qflow {
namespace {

std::vector<float> noise(int64_t n, uint32_t seed, float scale = 2.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  uint32_t s = seed * 2654435761u + 1u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 20001 - 10000) / 10000.0f * scale;
  }
  return v;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Builds a graph node by node with generated names and random constants.
class Net {
 public:
  explicit Net(int64_t opset) : opset_(opset) { model_.opset_imports.push_back({"", opset}); }
  Model& model() { return model_; }
  Graph& graph() { return *model_.graph; }
  int64_t opset() const { return opset_; }

  Value* input(const std::string& name) {
    Value* v = graph().get_or_create_value(name);
    graph().inputs.push_back(v);
    return v;
  }
  Value* constant(Tensor t) {
    std::string name = "c";
    name += std::to_string(next_++);
    Value* v = graph().get_or_create_value(name);
    graph().set_initializer(v, std::move(t));
    return v;
  }
  Value* random(const Shape& shape, float scale = 1.0f) {
    return constant(Tensor::from_vector<float>(shape, noise(numel(shape), next_ + 17, scale)));
  }
  Value* scalar(float value, Shape shape = {}) {
    return constant(Tensor::from_vector<float>(std::move(shape), {value}));
  }
  Node* node(const std::string& op, std::vector<Value*> inputs) {
    const std::string name = op + std::to_string(next_++);
    last_ = graph().get_or_create_value(name + "_out");
    return graph().add_node(op, std::move(inputs), {last_}, name);
  }
  Value* apply(const std::string& op, std::vector<Value*> inputs) {
    node(op, std::move(inputs));
    return last_;
  }

  // Clip(x, lo, hi) as the model's opset spells it.
  Value* clip(Value* x, float lo, float hi) {
    if (opset_ < 11) {
      Node* n = node("Clip", {x});
      n->set_attribute(Attribute::make_float("min", lo));
      n->set_attribute(Attribute::make_float("max", hi));
      return last_;
    }
    return apply("Clip", {x, scalar(lo), scalar(hi)});
  }
  Value* batchnorm(Value* x, int64_t channels) {
    std::vector<float> var = noise(channels, next_ + 3);
    for (float& v : var) v = v * v + 0.01f;
    Node* n = node("BatchNormalization", {x, random({channels}), random({channels}), random({channels}),
                                          constant(Tensor::from_vector<float>({channels}, var))});
    n->set_attribute(Attribute::make_float("epsilon", 1e-3f));
    return last_;
  }
  // x * Clip(x + 3, 0, 6) / 6 spelled with four nodes, operands in either order.
  Value* diamond(Value* x, bool swapped) {
    Value* sum = swapped ? apply("Add", {scalar(3.0f), x}) : apply("Add", {x, scalar(3.0f)});
    Value* gate = clip(sum, 0.0f, 6.0f);
    Value* product = swapped ? apply("Mul", {gate, x}) : apply("Mul", {x, gate});
    return apply("Div", {product, scalar(6.0f)});
  }
  // x * HardSigmoid(x): HardSwish as fuse-hardswish writes it below opset 14.
  Value* hard_sigmoid_product(Value* x, bool swapped) {
    Node* h = node("HardSigmoid", {x});
    h->set_attribute(Attribute::make_float("alpha", 0.1666667f));
    Value* gate = h->outputs()[0];
    return swapped ? apply("Mul", {gate, x}) : apply("Mul", {x, gate});
  }

 private:
  Model model_;
  int64_t opset_;
  int next_ = 0;
  Value* last_ = nullptr;
};

struct ConvShape {
  int64_t batch, in_channels, out_channels, group, kernel, stride, pad, height, width;
  bool bias;
};

Value* conv(Net& net, Value* x, const ConvShape& s) {
  std::vector<Value*> inputs{x, net.random({s.out_channels, s.in_channels / s.group, s.kernel, s.kernel}, 0.5f)};
  if (s.bias) inputs.push_back(net.random({s.out_channels}));
  Node* n = net.node("Conv", inputs);
  n->set_attribute(Attribute::make_ints("kernel_shape", {s.kernel, s.kernel}));
  n->set_attribute(Attribute::make_ints("strides", {s.stride, s.stride}));
  n->set_attribute(Attribute::make_ints("pads", {s.pad, s.pad, s.pad, s.pad}));
  n->set_attribute(Attribute::make_int("group", s.group));
  return n->outputs()[0];
}

// A chain after a producer with `channels` output channels, and how many nodes it absorbs.
struct Chain {
  std::string name;
  std::size_t absorbed;
  std::function<Value*(Net&, Value*, int64_t channels)> build;
};

const std::vector<Chain>& conv_chains() {
  static const std::vector<Chain> chains = {
      {"BN Relu", 2, [](Net& n, Value* x, int64_t c) { return n.apply("Relu", {n.batchnorm(x, c)}); }},
      {"BN Clip", 2, [](Net& n, Value* x, int64_t c) { return n.clip(n.batchnorm(x, c), 0.0f, 6.0f); }},
      {"BN diamond", 5, [](Net& n, Value* x, int64_t c) { return n.diamond(n.batchnorm(x, c), false); }},
      {"BN diamond swapped", 5, [](Net& n, Value* x, int64_t c) { return n.diamond(n.batchnorm(x, c), true); }},
      {"Mul Add diamond Mul Add", 8,
       [](Net& n, Value* x, int64_t) {
         Value* v = n.apply("Add", {n.apply("Mul", {n.scalar(0.94f, {1}), x}), n.scalar(0.5f, {1})});
         v = n.diamond(v, false);
         return n.apply("Add", {n.apply("Mul", {n.scalar(0.47f, {1}), v}), n.scalar(-0.0075f, {1})});
       }},
      {"Mul Add Relu", 3,
       [](Net& n, Value* x, int64_t) {
         return n.apply("Relu", {n.apply("Add", {n.apply("Mul", {x, n.scalar(1.9f)}), n.scalar(0.8f, {1, 1})})});
       }},
      {"Mul Add Conv", 2,
       [](Net& n, Value* x, int64_t c) {
         Value* v = n.apply("Add", {n.apply("Mul", {n.scalar(1.9f, {1}), x}), n.scalar(0.8f, {1})});
         return conv(n, v, {1, c, c, 1, 1, 1, 0, 0, 0, true});
       }},
      {"BN HardSigmoid product", 3,
       [](Net& n, Value* x, int64_t c) { return n.hard_sigmoid_product(n.batchnorm(x, c), false); }},
      {"HardSigmoid product swapped Relu", 3,
       [](Net& n, Value* x, int64_t) { return n.apply("Relu", {n.hard_sigmoid_product(x, true)}); }},
      {"Relu", 1, [](Net& n, Value* x, int64_t) { return n.apply("Relu", {x}); }},
      {"HardSigmoid", 1,
       [](Net& n, Value* x, int64_t) {
         Node* h = n.node("HardSigmoid", {x});
         h->set_attribute(Attribute::make_float("alpha", 0.1666667f));
         return h->outputs()[0];
       }},
      {"Clip", 1, [](Net& n, Value* x, int64_t) { return n.clip(x, -0.5f, 0.75f); }},
      {"Sub Div both sides", 4,
       [](Net& n, Value* x, int64_t) {
         Value* v = n.apply("Sub", {x, n.scalar(0.25f)});
         v = n.apply("Sub", {n.scalar(1.5f, {1, 1, 1, 1}), v});
         v = n.apply("Div", {v, n.scalar(3.0f)});
         return n.apply("Div", {n.scalar(-2.0f), v});
       }},
      {"HardSwish Sigmoid BN", 3,
       [](Net& n, Value* x, int64_t c) { return n.batchnorm(n.apply("Sigmoid", {n.apply("HardSwish", {x})}), c); }},
      // One value per channel: an Add alone, a Mul with the Add after it (either operand order).
      {"channel Add Relu", 2,
       [](Net& n, Value* x, int64_t c) { return n.apply("Relu", {n.apply("Add", {x, n.random({1, c, 1, 1})})}); }},
      {"channel Mul Add", 2,
       [](Net& n, Value* x, int64_t c) {
         return n.apply("Add", {n.random({c, 1, 1}), n.apply("Mul", {n.random({c, 1, 1}), x})});
       }},
      {"channel Mul alone", 0, [](Net& n, Value* x, int64_t c) { return n.apply("Mul", {x, n.random({c, 1, 1})}); }},
  };
  return chains;
}

const std::vector<ConvShape>& conv_shapes() {
  static const std::vector<ConvShape> shapes = {
      {1, 3, 8, 1, 3, 2, 1, 13, 11, false},  // plain 3x3, stride 2, odd sizes
      {2, 6, 6, 6, 3, 1, 1, 9, 7, true},     // depthwise, batch 2
      {1, 5, 5, 5, 5, 2, 2, 11, 9, true},    // depthwise 5x5, stride 2
      {1, 4, 6, 2, 3, 1, 1, 7, 5, true},     // grouped
      {1, 5, 7, 1, 1, 1, 0, 6, 9, true},     // pointwise
      {1, 16, 12, 1, 3, 1, 1, 40, 40, true}, // several column tiles per channel
  };
  return shapes;
}

// Runs the model fused (no hook) and node by node (no-op hook) and checks every output
// agrees bitwise and the plan absorbed `absorbed` nodes.
void check_fused_equals_separate(const Model& model, const std::map<std::string, Tensor>& feeds, std::size_t absorbed,
                                 const ExecutorOptions& base = {}) {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    ExecutorOptions options = base;
    options.threads = threads;
    auto ex = Executor::create(model, options);
    REQUIRE_MESSAGE(ex.has_value(), ex.status().message());
    CHECK((*ex)->fused_count() == absorbed);
    auto fused = (*ex)->run(feeds);
    REQUIRE_MESSAGE(fused.has_value(), fused.status().message());
    auto separate = (*ex)->run(feeds, [](const Value&, const Tensor&) { return Status::ok(); });
    REQUIRE_MESSAGE(separate.has_value(), separate.status().message());
    REQUIRE(fused->size() == separate->size());
    for (const auto& [name, tensor] : *separate) {
      CAPTURE(name);
      REQUIRE(fused->count(name) == 1);
      CHECK(fused->at(name).shape() == tensor.shape());
      CHECK(fused->at(name).bitwise_equal(tensor));
    }
  }
}

TEST_CASE("Epilogue: every Conv chain gives the bytes of the separate nodes") {
  for (int64_t opset : {int64_t{9}, int64_t{13}}) {
    for (const Chain& chain : conv_chains()) {
      for (const ConvShape& s : conv_shapes()) {
        CAPTURE(opset);
        CAPTURE(chain.name);
        CAPTURE(s.group);
        CAPTURE(s.kernel);
        CAPTURE(s.height);
        Net net(opset);
        Value* y = chain.build(net, conv(net, net.input("x"), s), s.out_channels);
        net.graph().outputs = {y};
        const Shape in{s.batch, s.in_channels, s.height, s.width};
        check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>(in, noise(numel(in), 7))}},
                                    chain.absorbed);
      }
    }
  }
}

TEST_CASE("Epilogue: ConvTranspose runs a per-channel chain after it, as a detection head has it") {
  // ConvTranspose -> Add (its bias apart) -> Mul -> Add (a BatchNorm) -> Relu, on the
  // kernel = stride path and on the general one, with and without the kernel's own bias.
  struct Case {
    int64_t kernel, stride, pad, channels;
    bool bias;
  };
  for (const Case& c : {Case{2, 2, 0, 6, false}, Case{2, 2, 0, 5, true}, Case{3, 2, 1, 4, true}}) {
    CAPTURE(c.kernel);
    CAPTURE(c.bias);
    Net net(13);
    std::vector<Value*> inputs{net.input("x"), net.random({3, c.channels, c.kernel, c.kernel}, 0.5f)};
    if (c.bias) inputs.push_back(net.random({c.channels}));
    Node* t = net.node("ConvTranspose", inputs);
    t->set_attribute(Attribute::make_ints("kernel_shape", {c.kernel, c.kernel}));
    t->set_attribute(Attribute::make_ints("strides", {c.stride, c.stride}));
    t->set_attribute(Attribute::make_ints("pads", {c.pad, c.pad, c.pad, c.pad}));
    Value* y = net.apply("Add", {t->outputs()[0], net.random({1, c.channels, 1, 1})});
    y = net.apply("Add", {net.apply("Mul", {y, net.random({c.channels, 1, 1})}), net.random({c.channels, 1, 1})});
    net.graph().outputs = {net.apply("Relu", {y})};
    const Shape in{1, 3, 9, 11};
    check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>(in, noise(numel(in), 5))}}, 4);
  }
}

// QuantizeLinear then DequantizeLinear of x with one scale and zero point `zp` (its type is
// the integer type), `dq_scale` (default: the same) for the DequantizeLinear.
Value* qdq(Net& n, Value* x, float scale, Tensor zp, float dq_scale = 0.0f) {
  Value* z = n.constant(std::move(zp));
  Value* q = n.apply("QuantizeLinear", {x, n.scalar(scale), z});
  return n.apply("DequantizeLinear", {q, n.scalar(dq_scale > 0.0f ? dq_scale : scale), z});
}

TEST_CASE("Epilogue: a Q/DQ pair gives the bytes of the two nodes under every cap") {
  struct Case {
    std::string name;
    float scale;
    Tensor zp;
  };
  const std::vector<Case> cases = {
      {"int8", 0.02f, Tensor::from_vector<int8_t>({}, {3})},      // saturates at both ends
      {"uint8", 0.05f, Tensor::from_vector<uint8_t>({}, {128})},
      {"uint8 zero 0", 0.01f, Tensor::from_vector<uint8_t>({}, {0})},  // every negative clips to 0
      {"int16", 0.0004f, Tensor::from_vector<int16_t>({}, {0})},
      {"int16 offset", 0.00007f, Tensor::from_vector<int16_t>({}, {-1200})},
      {"uint16", 0.0003f, Tensor::from_vector<uint16_t>({}, {30000})},
      {"exact halves", 0.125f, Tensor::from_vector<int8_t>({}, {0})},  // many v / s on .5
  };
  struct Reset {
    ~Reset() { isa::reset_cap(); }
  } reset;
  for (const char* cap : {"portable", "avx2", "avx512", "native"}) {
    if (!isa::set_cap(cap, "test").is_ok()) continue;  // a level this CPU lacks
    for (const Case& c : cases) {
      CAPTURE(cap);
      CAPTURE(c.name);
      Net net(13);
      Value* y = conv(net, net.input("x"), {1, 4, 6, 1, 3, 1, 1, 9, 11, true});
      y = qdq(net, net.apply("Relu", {qdq(net, y, c.scale, c.zp)}), c.scale, c.zp);
      net.graph().outputs = {y};
      std::vector<float> x = noise(4 * 9 * 11, 11, 3.0f);
      x[40] = std::numeric_limits<float>::quiet_NaN();  // NaN outputs quantize to the zero point
      x[200] = 1e30f;                                      // and these saturate
      x[300] = -1e30f;
      // Two pairs and the Relu between them.
      check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 4, 9, 11}, x)}}, 5);
    }
  }
}

TEST_CASE("Epilogue: a Q/DQ pair after a kernel without an epilogue gives the bytes of the two nodes") {
  const Tensor zp = Tensor::from_vector<int8_t>({}, {-2});
  const std::vector<float> x = noise(2 * 3 * 5 * 7, 23, 3.0f);
  const std::map<std::string, Tensor> feeds = {{"x", Tensor::from_vector<float>({2, 3, 5, 7}, x)}};
  SUBCASE("a new output, computed in place") {
    Net net(13);
    Value* y = net.apply("Mul", {net.input("x"), net.random({3, 1, 1})});
    net.graph().outputs = {qdq(net, y, 0.03f, zp)};
    check_fused_equals_separate(net.model(), feeds, 2);
  }
  SUBCASE("element-wise kernels run the pair on each block they write") {
    // 38247 values: past the parallel grain and nine blocks of 4096 with a partial one.
    const std::vector<float> big = noise(3 * 61 * 209, 29, 3.0f);
    const std::map<std::string, Tensor> big_feeds = {{"x", Tensor::from_vector<float>({1, 3, 61, 209}, big)},
                                                     {"z", Tensor::from_vector<float>({1, 3, 61, 209}, noise(big.size(), 31, 2.0f))}};
    Net net(13);
    Value* scaled = net.apply("Mul", {net.input("x"), net.random({3, 1, 1})});
    Value* sum = net.apply("Add", {qdq(net, scaled, 0.03f, zp), net.input("z")});
    Value* gate = net.apply("HardSigmoid", {qdq(net, sum, 0.05f, zp)});
    net.graph().outputs = {qdq(net, gate, 0.004f, zp)};
    check_fused_equals_separate(net.model(), big_feeds, 6);
  }
  SUBCASE("a view of a value still needed, computed on a copy") {
    Net net(13);
    Value* in = net.input("x");
    Value* sum = net.apply("Add", {in, net.scalar(0.5f)});
    Value* flat = net.apply("Reshape", {sum, net.constant(Tensor::from_vector<int64_t>({2}, {2, -1}))});
    net.graph().outputs = {qdq(net, flat, 0.03f, zp), sum};
    check_fused_equals_separate(net.model(), feeds, 2);
  }
  SUBCASE("the caller's input handed through, never written") {
    Net net(13);
    net.graph().outputs = {qdq(net, net.apply("Identity", {net.input("x")}), 0.03f, zp)};
    check_fused_equals_separate(net.model(), feeds, 2);
    CHECK(std::memcmp(feeds.at("x").data<float>(), x.data(), x.size() * sizeof(float)) == 0);
  }
  SUBCASE("integers in: the pair runs as its nodes") {
    Net net(13);
    Node* cast = net.node("Cast", {net.input("x")});
    cast->set_attribute(Attribute::make_int("to", static_cast<int64_t>(DType::Int32)));
    net.graph().outputs = {qdq(net, cast->outputs()[0], 0.5f, zp)};
    check_fused_equals_separate(net.model(), feeds, 2);
  }
}

TEST_CASE("Epilogue: Q/DQ pairs that are not one rounding stay nodes") {
  const auto build = [](Net& net) { return conv(net, net.input("x"), {1, 3, 4, 1, 3, 1, 1, 7, 9, true}); };
  const std::map<std::string, Tensor> feeds = {{"x", Tensor::from_vector<float>({1, 3, 7, 9}, noise(189, 5))}};
  SUBCASE("another scale in the DequantizeLinear") {
    Net net(13);
    net.graph().outputs = {qdq(net, build(net), 0.02f, Tensor::from_vector<int8_t>({}, {0}), 0.03f)};
    check_fused_equals_separate(net.model(), feeds, 0);
  }
  SUBCASE("the integers are an output too") {
    Net net(13);
    Value* y = qdq(net, build(net), 0.02f, Tensor::from_vector<int8_t>({}, {0}));
    net.graph().outputs = {y, y->producer()->inputs()[0]};
    check_fused_equals_separate(net.model(), feeds, 0);
  }
  SUBCASE("per-channel parameters") {
    Net net(13);
    Value* c = build(net);
    Value* s = net.constant(Tensor::from_vector<float>({4}, {0.01f, 0.02f, 0.03f, 0.04f}));
    Value* z = net.constant(Tensor::from_vector<int8_t>({4}, {0, 0, 0, 0}));
    Node* q = net.node("QuantizeLinear", {c, s, z});
    q->set_attribute(Attribute::make_int("axis", 1));
    Node* dq = net.node("DequantizeLinear", {q->outputs()[0], s, z});
    dq->set_attribute(Attribute::make_int("axis", 1));
    net.graph().outputs = {dq->outputs()[0]};
    check_fused_equals_separate(net.model(), feeds, 0);
  }
}

TEST_CASE("Epilogue: Gemm absorbs the channel-free part of a chain") {
  struct GemmChain {
    std::string name;
    std::size_t absorbed;
    std::function<Value*(Net&, Value*)> build;
  };
  const std::vector<GemmChain> chains = {
      {"Mul Add Relu", 3,
       [](Net& n, Value* x) { return n.apply("Relu", {n.apply("Add", {n.apply("Mul", {x, n.scalar(1.5f)}), n.scalar(0.2f)})}); }},
      {"diamond", 4, [](Net& n, Value* x) { return n.diamond(x, true); }},
      {"HardSigmoid product", 2, [](Net& n, Value* x) { return n.hard_sigmoid_product(x, false); }},
      // BatchNormalization's channel is Gemm's column, not its row: stays a node.
      {"BN", 0, [](Net& n, Value* x) { return n.batchnorm(x, 9); }},
      {"Relu BN", 1, [](Net& n, Value* x) { return n.batchnorm(n.apply("Relu", {x}), 9); }},
  };
  for (const GemmChain& chain : chains) {
    CAPTURE(chain.name);
    Net net(13);
    Value* y = net.apply("Gemm", {net.input("a"), net.random({7, 9}), net.random({9})});
    net.graph().outputs = {chain.build(net, y)};
    check_fused_equals_separate(net.model(), {{"a", Tensor::from_vector<float>({5, 7}, noise(35, 3))}}, chain.absorbed);
  }
}

// Conv -> Mul -> Add -> Relu with the Mul and Add outputs named, for the cases below.
struct MulAddRelu {
  Net net{13};
  Value* mul = nullptr;
  Value* add = nullptr;
  Value* y = nullptr;
  MulAddRelu() {
    Value* c = conv(net, net.input("x"), {1, 3, 4, 1, 3, 1, 1, 7, 9, true});
    mul = net.apply("Mul", {c, net.scalar(1.5f)});
    add = net.apply("Add", {mul, net.scalar(0.2f)});
    y = net.apply("Relu", {add});
    net.graph().outputs = {y};
  }
  std::map<std::string, Tensor> feeds() const { return {{"x", Tensor::from_vector<float>({1, 3, 7, 9}, noise(189, 5))}}; }
};

TEST_CASE("Epilogue: values that must be seen end the chain") {
  SUBCASE("graph output in the middle") {
    MulAddRelu m;
    m.net.graph().outputs.push_back(m.mul);
    check_fused_equals_separate(m.net.model(), m.feeds(), 1);
  }
  SUBCASE("extra output in the middle") {
    MulAddRelu m;
    ExecutorOptions options;
    options.extra_outputs = {m.add->name()};
    check_fused_equals_separate(m.net.model(), m.feeds(), 2, options);
  }
  SUBCASE("second consumer in the middle") {
    MulAddRelu m;
    m.net.graph().outputs.push_back(m.net.apply("Neg", {m.mul}));
    check_fused_equals_separate(m.net.model(), m.feeds(), 1);
  }
  SUBCASE("the last value may be an output") {
    MulAddRelu m;
    check_fused_equals_separate(m.net.model(), m.feeds(), 3);
  }
}

TEST_CASE("Epilogue: x * HardSigmoid(x) is absorbed only when the gate is seen by the Mul alone") {
  for (const bool gate_is_output : {false, true}) {
    CAPTURE(gate_is_output);
    Net net(13);
    Value* c = conv(net, net.input("x"), {1, 3, 4, 1, 3, 1, 1, 6, 5, true});
    Value* gate = net.node("HardSigmoid", {c})->outputs()[0];
    net.graph().outputs = {net.apply("Mul", {c, gate})};
    if (gate_is_output) net.graph().outputs.push_back(gate);
    check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 3, 6, 5}, noise(90, 9))}},
                                gate_is_output ? 0 : 2);
  }
}

TEST_CASE("Epilogue: x * HardSigmoid(x) with a Q/DQ pair on the gate gives the bytes of the nodes under every cap") {
  struct Reset {
    ~Reset() { isa::reset_cap(); }
  } reset;
  for (const char* cap : {"portable", "avx2", "avx512", "native"}) {
    if (!isa::set_cap(cap, "test").is_ok()) continue;  // a level this CPU lacks
    for (const bool int16 : {false, true}) {
      CAPTURE(cap);
      CAPTURE(int16);
      // The gate in [0, 1] on a grid of 1/127 (int8) or 1/16384 (int16), x and the product
      // through their own pairs, as a PTQ model quantizes HardSwish before opset 14.
      const Tensor zp = int16 ? Tensor::from_vector<int16_t>({}, {0}) : Tensor::from_vector<int8_t>({}, {0});
      const float gate_scale = int16 ? 1.0f / 16384 : 1.0f / 127;
      Net net(13);
      Value* x = qdq(net, conv(net, net.input("x"), {1, 3, 4, 1, 3, 1, 1, 6, 37, true}), 0.03f, zp);
      Value* gate = qdq(net, net.node("HardSigmoid", {x})->outputs()[0], gate_scale, zp);
      net.graph().outputs = {qdq(net, net.apply("Mul", {x, gate}), 0.02f, zp)};
      std::vector<float> in = noise(3 * 6 * 37, 17, 4.0f);
      in[5] = std::numeric_limits<float>::quiet_NaN();
      // x's pair, the HardSigmoid, the gate's pair, the Mul and its pair.
      check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 3, 6, 37}, in)}}, 8);
    }
  }
  SUBCASE("a gate pair whose output is also seen elsewhere keeps its nodes") {
    Net net(13);
    const Tensor zp = Tensor::from_vector<int8_t>({}, {0});
    Value* x = conv(net, net.input("x"), {1, 3, 4, 1, 3, 1, 1, 6, 5, true});
    Value* gate = qdq(net, net.node("HardSigmoid", {x})->outputs()[0], 1.0f / 127, zp);
    net.graph().outputs = {net.apply("Mul", {x, gate}), gate};
    // Only the gate's pair after the HardSigmoid's kernel.
    check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 3, 6, 5}, noise(90, 9))}}, 2);
  }
}

TEST_CASE("Epilogue: a node with a kernel other than the built-in one is never absorbed") {
  MulAddRelu m;
  KernelRegistry registry = KernelRegistry::builtin();
  registry.add_function("", "Add", 1, kLatestOpset, [](KernelContext& context) -> Status {
    const Tensor* a = context.input(0);
    Tensor out(DType::Float32, a->shape());
    for (int64_t i = 0; i < a->numel(); ++i) out.data<float>()[i] = a->data<float>()[i] + 100.0f;
    context.outputs[0] = std::move(out);
    return Status::ok();
  });
  auto ex = Executor::create(m.net.model(), {}, registry);
  REQUIRE(ex.has_value());
  // At most the Mul: kernels of a copied registry are not known to be the built-in ones.
  CHECK((*ex)->fused_count() <= 1);
  auto out = (*ex)->run(m.feeds());
  REQUIRE(out.has_value());
  // The replacement adds 100 to Mul's output, which stays within a few units of 0.
  for (float v : out->at(m.y->name()).span<const float>()) CHECK(v > 50.0f);
  auto separate = (*ex)->run(m.feeds(), [](const Value&, const Tensor&) { return Status::ok(); });
  REQUIRE(separate.has_value());
  CHECK(out->at(m.y->name()).bitwise_equal(separate->at(m.y->name())));
}

TEST_CASE("Epilogue: operands the program cannot take keep their nodes") {
  SUBCASE("per-position BatchNormalization parameters") {
    Net net(9);
    Value* c = conv(net, net.input("x"), {1, 2, 3, 1, 1, 1, 0, 2, 2, false});
    const int64_t n = 3 * 2 * 2;
    std::vector<float> var = noise(n, 4);
    for (float& v : var) v = v * v + 0.5f;
    net.graph().outputs = {net.apply("BatchNormalization", {c, net.random({n}), net.random({n}), net.random({n}),
                                                            net.constant(Tensor::from_vector<float>({n}, var))})};
    check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 2, 2, 2}, noise(8, 1))}}, 0);
  }
  SUBCASE("constant with more than one element") {
    Net net(13);
    Value* c = conv(net, net.input("x"), {1, 2, 3, 1, 1, 1, 0, 4, 4, false});
    net.graph().outputs = {net.apply("Mul", {c, net.random({3, 1, 1})})};
    check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 2, 4, 4}, noise(32, 1))}}, 0);
  }
  SUBCASE("constant of higher rank than the output: planned, then left to the nodes") {
    Net net(13);
    Value* c = conv(net, net.input("x"), {1, 2, 3, 1, 1, 1, 0, 4, 4, false});
    net.graph().outputs = {net.apply("Relu", {net.apply("Add", {c, net.scalar(1.0f, {1, 1, 1, 1, 1})})})};
    check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 2, 4, 4}, noise(32, 1))}}, 2);
    auto ex = Executor::create(net.model());
    REQUIRE(ex.has_value());
    auto out = (*ex)->run({{"x", Tensor::from_vector<float>({1, 2, 4, 4}, noise(32, 1))}});
    REQUIRE(out.has_value());
    CHECK(out->begin()->second.shape() == Shape{1, 1, 3, 4, 4});
  }
  SUBCASE("operand from a Constant node is folded and absorbed") {
    Net net(13);
    Value* c = conv(net, net.input("x"), {1, 2, 3, 1, 1, 1, 0, 4, 4, false});
    Value* k = net.graph().get_or_create_value("k");
    Node* constant = net.graph().add_node("Constant", {}, {k}, "k");
    constant->set_attribute(Attribute::make_tensor("value", Tensor::scalar<float>(0.75f)));
    net.graph().outputs = {net.apply("Mul", {k, c})};
    check_fused_equals_separate(net.model(), {{"x", Tensor::from_vector<float>({1, 2, 4, 4}, noise(32, 1))}}, 1);
    auto ex = Executor::create(net.model());
    REQUIRE(ex.has_value());
    CHECK((*ex)->folded_count() == 1);
  }
}

// The real models: fused and separate runs agree bitwise on every output.
TEST_CASE("Epilogue: PP-OCR and Fashion models give the bytes of the separate nodes") {
  const char* home = std::getenv("HOME");
  const std::string assets = std::string(home ? home : "") + "/.cache/qflow/npm/package/assets/";
  struct RealModel {
    std::string path;
    Shape input;
  };
  const std::vector<RealModel> models = {
      {assets + "ch_ppocr_mobile_v2.0_cls_infer.onnx", {1, 3, 48, 192}},
      {assets + "ch_PP-OCRv4_det_infer.onnx", {1, 3, 96, 128}},
      {assets + "ch_PP-OCRv4_rec_infer.onnx", {1, 3, 48, 160}},
      {std::string(QFLOW_SOURCE_DIR) + "/models/fashion_mnist/fashion_mnist.onnx", {2, 1, 28, 28}},
  };
  for (const RealModel& m : models) {
    CAPTURE(m.path);
    if (std::FILE* f = std::fopen(m.path.c_str(), "rb")) {
      std::fclose(f);
    } else {
      MESSAGE("skipped: " << m.path << " is not present");
      continue;
    }
    auto model = import_onnx_file(m.path);
    REQUIRE_MESSAGE(model.has_value(), model.status().message());
    auto ex = Executor::create(*model);
    REQUIRE_MESSAGE(ex.has_value(), ex.status().message());
    CHECK((*ex)->fused_count() > 0);
    MESSAGE(m.path << ": " << (*ex)->fused_count() << " nodes absorbed");
    const std::string input = model->graph->runtime_inputs().at(0)->name();
    check_fused_equals_separate(*model, {{input, Tensor::from_vector<float>(m.input, noise(numel(m.input), 11, 1.0f))}},
                                (*ex)->fused_count());
  }
}

}  // namespace
}  // namespace qflow
