// Tests of the bpu backend's constraint vocabulary: every kind of check with its exact reason, quantization checks and overrides.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plugins/backends/bpu/bpu_backend.h"
#include "test_bpu_helpers.h"

namespace qflow {
namespace {

using namespace bpu_test;

// One node of `op` fed by graph input x (declared with `x_shape` when non-empty).
struct OneNode {
  Model model;
  Graph& g = *model.graph;
  Value* x = nullptr;
  explicit OneNode(const std::vector<int64_t>& x_shape = {}) {
    model.opset_imports = {{"", 17}};
    x = g.get_or_create_value("x");
    if (!x_shape.empty()) set_shape(x, x_shape);
    g.inputs = {x};
  }
  Node* add(const std::string& op, std::vector<Value*> inputs, const std::string& domain = "") {
    Value* y = g.get_or_create_value("y");
    Node* node = g.add_node(op, inputs, {y}, "n", domain);
    g.outputs = {y};
    return node;
  }
  Value* weight(const std::string& name, Shape shape) {
    Value* w = g.get_or_create_value(name);
    g.set_initializer(w, Tensor(DType::Float32, shape));
    return w;
  }
  std::string reason(const std::string& platform) const {
    auto caps = backend_for(platform).capability(model);
    REQUIRE_MESSAGE(caps.has_value(), caps.status().message());
    REQUIRE(caps->size() == 1);
    CHECK(caps->at(0).supported == caps->at(0).reason.empty());
    return caps->at(0).reason;
  }
};

TEST_CASE("bpu constraints: input rank and batch, from declared shapes only") {
  OneNode rank3({1, 3, 8});
  rank3.add("Relu", {rank3.x});
  CHECK(rank3.reason("bernoulli2") == "Relu input 'x' rank 3 not in {4}");
  CHECK(rank3.reason("nash").empty());  // nash takes any rank

  OneNode big_batch({256, 3, 8, 8});
  big_batch.add("Relu", {big_batch.x});
  CHECK(big_batch.reason("bernoulli2") == "Relu input 'x' batch 256 > 128");
  CHECK(big_batch.reason("bayes").empty());

  OneNode undeclared;  // no shape: not checked
  undeclared.add("Relu", {undeclared.x});
  CHECK(undeclared.reason("bernoulli2").empty());

  // An op's own input-ranks replaces the platform's: bayes runs Gemm on rank 2.
  OneNode gemm({1, 16});
  gemm.add("Gemm", {gemm.x, gemm.weight("w", {4, 16})});
  CHECK(gemm.reason("bayes").empty());
  OneNode gemm_rank3({1, 2, 16});
  gemm_rank3.add("Gemm", {gemm_rank3.x, gemm_rank3.weight("w", {4, 16})});
  CHECK(gemm_rank3.reason("bayes") == "Gemm input 'x' rank 3 not in {2, 4}");
}

TEST_CASE("bpu constraints: kernel bounds, allowed strides and dilations") {
  OneNode tiny({1, 8, 8, 8});
  tiny.add("ConvTranspose", {tiny.x, tiny.weight("w", {8, 8, 1, 1})})->set_attribute(Attribute::make_ints("strides", {2, 2}));
  CHECK(tiny.reason("bernoulli2") == "ConvTranspose kernel 1x1 < 2x2");

  OneNode odd_stride({1, 8, 8, 8});
  odd_stride.add("ConvTranspose", {odd_stride.x, odd_stride.weight("w", {8, 8, 4, 4})})
      ->set_attribute(Attribute::make_ints("strides", {3, 3}));
  CHECK(odd_stride.reason("bernoulli2") == "ConvTranspose stride 3x3 not in {2, 4}");

  OneNode default_stride({1, 8, 8, 8});  // no strides attribute: 1 per axis
  default_stride.add("ConvTranspose", {default_stride.x, default_stride.weight("w", {8, 8, 4, 4})});
  CHECK(default_stride.reason("bernoulli2") == "ConvTranspose stride 1x1 not in {2, 4}");

  OneNode good({1, 8, 8, 8});
  good.add("ConvTranspose", {good.x, good.weight("w", {8, 8, 4, 4})})->set_attribute(Attribute::make_ints("strides", {4, 2}));
  CHECK(good.reason("bernoulli2").empty());

  OneNode dilated({1, 8, 16, 16});
  dilated.add("Conv", {dilated.x, dilated.weight("w", {8, 8, 3, 3})})->set_attribute(Attribute::make_ints("dilations", {3, 3}));
  CHECK(dilated.reason("bernoulli2") == "Conv dilation 3x3 is not a power of two");
  OneNode dilated2({1, 8, 16, 16});
  dilated2.add("Conv", {dilated2.x, dilated2.weight("w", {8, 8, 3, 3})})->set_attribute(Attribute::make_ints("dilations", {2, 4}));
  CHECK(dilated2.reason("bernoulli2").empty());

  OneNode pool({1, 8, 128, 128});
  pool.add("MaxPool", {pool.x})->set_attribute(Attribute::make_ints("kernel_shape", {65, 65}));
  CHECK(pool.reason("bernoulli2") == "MaxPool kernel 65x65 > 64x64");
  OneNode avg({1, 8, 16, 16});
  avg.add("AveragePool", {avg.x})->set_attribute(Attribute::make_ints("kernel_shape", {8, 2}));
  CHECK(avg.reason("bernoulli2") == "AveragePool kernel 8x2 > 7x7");
}

TEST_CASE("bpu constraints: Concat channels, from the output's shape or the inputs'") {
  OneNode concat({1, 1024, 4, 4});
  Value* other = concat.g.get_or_create_value("other");
  set_shape(other, {1, 2048, 4, 4});
  concat.g.inputs.push_back(other);
  concat.add("Concat", {concat.x, other})->set_attribute(Attribute::make_int("axis", 1));
  CHECK(concat.reason("bernoulli2") == "Concat output channels 3072 > 2048");
  set_shape(concat.g.find_value("y"), {1, 3072, 4, 4});
  CHECK(concat.reason("bernoulli2") == "Concat output channels 3072 > 2048");
  CHECK(concat.reason("bayes").empty());
}

TEST_CASE("bpu constraints: Resize modes and scale factors") {
  auto resize = [](const std::string& mode, std::vector<float> scales) {
    auto m = std::make_unique<OneNode>(std::vector<int64_t>{1, 3, 4, 4});
    Value* roi = m->g.get_or_create_value("roi");
    m->g.set_initializer(roi, Tensor(DType::Float32, {0}));
    Value* s = m->g.get_or_create_value("scales");
    m->g.set_initializer(s, Tensor::from_vector<float>({4}, scales));
    m->add("Resize", {m->x, roi, s})->set_attribute(Attribute::make_string("mode", mode));
    return m;
  };
  CHECK(resize("cubic", {1, 1, 2, 2})->reason("bernoulli2") == "Resize mode cubic not in {linear, nearest}");
  CHECK(resize("nearest", {1, 1, 1.5f, 1.5f})->reason("bernoulli2") == "Resize scale 1.5x1.5 is not a whole number");
  CHECK(resize("linear", {1, 1, 16, 2})->reason("bernoulli2") == "Resize scale 16x2 > 8x8");
  CHECK(resize("linear", {1, 1, 2, 4})->reason("bernoulli2").empty());
  CHECK(resize("nearest", {1, 1, 1.5f, 1.5f})->reason("bayes").empty());

  // Scale factors from constant sizes over the input's static shape.
  OneNode sized({1, 3, 4, 4});
  Value* roi = sized.g.get_or_create_value("roi");
  sized.g.set_initializer(roi, Tensor(DType::Float32, {0}));
  Value* scales = sized.g.get_or_create_value("scales");
  sized.g.set_initializer(scales, Tensor(DType::Float32, {0}));
  Value* sizes = sized.g.get_or_create_value("sizes");
  sized.g.set_initializer(sizes, Tensor::from_vector<int64_t>({4}, {1, 3, 8, 10}));
  sized.add("Resize", {sized.x, roi, scales, sizes});
  CHECK(sized.reason("bernoulli2") == "Resize scale 2x2.5 is not a whole number");

  // Sizes computed at run time: unknown, so not on the BPU unless the user insists.
  OneNode dynamic({1, 3, 4, 4});
  Value* runtime_sizes = dynamic.g.get_or_create_value("sizes");
  set_shape(runtime_sizes, {4});  // a parameter input: its rank 1 is not held against the rank-4 rule
  dynamic.g.inputs.push_back(runtime_sizes);
  dynamic.add("Resize", {dynamic.x, dynamic.g.get_or_create_value(""), dynamic.g.get_or_create_value(""), runtime_sizes});
  CHECK(dynamic.reason("bernoulli2") ==
        "Resize scale factors are unknown (no constant scales, no constant sizes over a static input)");
}

TEST_CASE("bpu constraints: MatMul of two activations only where the platform allows it") {
  OneNode mm({1, 4, 8});
  Value* b = mm.g.get_or_create_value("b");
  set_shape(b, {1, 8, 4});
  mm.g.inputs.push_back(b);
  mm.add("MatMul", {mm.x, b});
  CHECK(mm.reason("bayes") == "MatMul input 'b' is not a constant (bayes multiplies only by constant weights)");
  CHECK(mm.reason("nash").empty());
  CHECK(mm.reason("bernoulli2") == "op type MatMul is not supported on bernoulli2");

  OneNode weights({1, 4, 8});
  weights.add("MatMul", {weights.x, weights.weight("w", {8, 4})});
  CHECK(weights.reason("bayes").empty());
}

TEST_CASE("bpu constraints: GELU in both domains, Softmax and LayerNormalization on nash only") {
  OneNode ms({1, 16});
  ms.add("Gelu", {ms.x}, "com.microsoft");
  CHECK(ms.reason("nash").empty());
  CHECK(ms.reason("bayes") == "op type com.microsoft::Gelu is not supported on bayes");
  OneNode onnx_gelu({1, 16});
  onnx_gelu.add("Gelu", {onnx_gelu.x});
  CHECK(onnx_gelu.reason("nash").empty());
  OneNode ln({1, 16});
  ln.add("LayerNormalization", {ln.x, ln.weight("gamma", {16})});
  CHECK(ln.reason("nash").empty());
  CHECK(ln.reason("bayes") == "op type LayerNormalization is not supported on bayes");
  OneNode softmax({1, 16});
  softmax.add("Softmax", {softmax.x});
  CHECK(softmax.reason("bernoulli2") == "op type Softmax is not supported on bernoulli2");
  CHECK(softmax.reason("bayes").empty());
}

QuantParams q(DType dtype, float scale) {
  QuantParams p;
  p.dtype = dtype;
  p.scale = {scale};
  p.zero_point = {0};
  p.method = "test";
  return p;
}

std::string compiled_reason(const BpuBackend& backend, const Model& model, const QuantTable& table) {
  auto plan = backend.plan(model, table);
  REQUIRE_MESSAGE(plan.has_value(), plan.status().message());
  return plan->nodes.at(0).reason;
}

TEST_CASE("bpu constraints: activation and weight dtypes from the quantization table") {
  OneNode conv({1, 8, 8, 8});
  conv.add("Conv", {conv.x, conv.weight("w", {8, 8, 3, 3})});
  const QuantTable int16_act = {{"x", q(DType::Int16, 0.5f)}, {"w", q(DType::Int8, 0.5f)}};
  CHECK(compiled_reason(backend_for("bernoulli2"), conv.model, int16_act) == "Conv input 'x' is int16 (allowed on bernoulli2: int8)");
  CHECK(compiled_reason(backend_for("bayes"), conv.model, int16_act) == "Conv input 'x' is int16 (allowed on bayes: int8)");
  CHECK(compiled_reason(backend_for("nash"), conv.model, int16_act).empty());
  const QuantTable int16_weight = {{"w", q(DType::Int16, 0.5f)}};
  CHECK(compiled_reason(backend_for("bernoulli2"), conv.model, int16_weight) == "Conv input 'w' is int16 (allowed on bernoulli2: int8)");
  const QuantTable int16_out = {{"y", q(DType::Int16, 0.5f)}};
  CHECK(compiled_reason(backend_for("bernoulli2"), conv.model, int16_out) == "Conv output 'y' is int16 (allowed on bernoulli2: int8)");

  // bayes grants int16 activations to selected ops: Add yes, Conv (above) no.
  OneNode add({1, 8, 8, 8});
  add.add("Add", {add.x, add.x});
  CHECK(compiled_reason(backend_for("bayes"), add.model, int16_act).empty());
  // The capability pass alone does not look at the table.
  auto caps = backend_for("bernoulli2").capability(conv.model);
  REQUIRE(caps.has_value());
  CHECK(caps->at(0).supported);
}

TEST_CASE("bpu constraints: power-of-two scales") {
  TempDir dir("p2");
  dir.write("p2.toml", platform_header("p2") + "power-of-two-scales = true\n[ops]\nRelu = {}\n");
  auto loaded = load_bpu_platform(dir.path.string(), "p2");
  REQUIRE_MESSAGE(loaded.has_value(), loaded.status().message());
  CHECK(loaded->power_of_two_scales);
  const BpuBackend backend(loaded.value());
  OneNode relu({1, 8});
  relu.add("Relu", {relu.x});
  CHECK(compiled_reason(backend, relu.model, {{"x", q(DType::Int8, 0.25f)}, {"y", q(DType::Int8, 0.125f)}}).empty());
  CHECK(compiled_reason(backend, relu.model, {{"x", q(DType::Int8, 0.3f)}}) ==
        "Relu input 'x' scale 0.3 is not a power of two (p2 needs power-of-two scales)");
  CHECK(compiled_reason(backend_for("nash"), relu.model, {{"x", q(DType::Int8, 0.3f)}}).empty());
}

// x -> conv9 (9x9 on bernoulli2: CPU) -> relu -> softmax -> dyn (runtime weight) -> y
Model override_model() {
  Model model;
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* v = conv(g, "conv9", x, {8, 3, 9, 9});
  v = unary(g, "Relu", "relu", v);
  v = unary(g, "Softmax", "softmax", v);
  Value* w = g.get_or_create_value("runtime_w");
  g.inputs.push_back(w);
  v = binary(g, "Conv", "dyn", v, w);
  g.outputs = {v};
  return model;
}

TEST_CASE("bpu constraints: run-on-cpu and run-on-bpu") {
  const Model model = override_model();
  auto plain = backend_for("bernoulli2").capability(model);
  REQUIRE(plain.has_value());
  CHECK(plain->at(1).supported);
  CHECK(plain->at(3).reason == "Conv kernel size is unknown (no kernel_shape and weight 'runtime_w' has no static shape)");

  auto forced = backend_for("bernoulli2", {{"relu"}, {"dyn"}}).capability(model);
  REQUIRE(forced.has_value());
  CHECK_FALSE(forced->at(1).supported);
  CHECK(forced->at(1).reason == "placed on the CPU by run-on-cpu");
  CHECK(forced->at(3).supported);  // unknown, and the user vouches for it
  CHECK(forced->at(3).reason.empty());

  auto lacks_op = backend_for("bernoulli2", {{}, {"softmax"}}).capability(model);
  REQUIRE_FALSE(lacks_op.has_value());
  CHECK(lacks_op.status().message() ==
        "run-on-bpu: node 'softmax' cannot run on bernoulli2: op type Softmax is not supported on bernoulli2");
  auto too_big = backend_for("bernoulli2", {{}, {"conv9"}}).capability(model);
  REQUIRE_FALSE(too_big.has_value());
  CHECK(too_big.status().message() == "run-on-bpu: node 'conv9' cannot run on bernoulli2: Conv kernel 9x9 > 7x7");

  auto unknown_name = backend_for("bernoulli2", {{"nope"}, {}}).capability(model);
  REQUIRE_FALSE(unknown_name.has_value());
  CHECK(unknown_name.status().message() == "run-on-cpu: the model has no node named 'nope'");
  auto both = backend_for("bernoulli2", {{"relu"}, {"relu"}}).capability(model);
  REQUIRE_FALSE(both.has_value());
  CHECK(both.status().message() == "node 'relu' is in both run-on-cpu and run-on-bpu");

  // A forced node the quantization table rules out is an error too.
  QuantTable table;
  table["relu_out"] = q(DType::Int16, 0.5f);
  auto dtype = backend_for("bernoulli2", {{}, {"relu"}}).plan(model, table);
  REQUIRE_FALSE(dtype.has_value());
  CHECK(dtype.status().message() ==
        "run-on-bpu: node 'relu' cannot run on bernoulli2: Relu output 'relu_out' is int16 (allowed on bernoulli2: int8)");

  // Through the factory: the options reach capability() and compile().
  Options options;
  options.set("platform", std::string("bernoulli2"));
  options.set("platform-dir", std::string(QFLOW_BPU_PLATFORM_DIR));
  options.set("run-on-cpu", std::vector<std::string>{"relu"});
  options.set("run-on-bpu", std::vector<std::string>{});
  auto backend = BpuBackend::from_options(options);
  REQUIRE(backend.has_value());
  auto json = backend->compile(model, {});
  REQUIRE(json.has_value());
  CHECK(json->find("\"name\": \"relu\", \"op_type\": \"Relu\", \"placement\": \"cpu\", \"subgraph\": null, "
                   "\"reason\": \"placed on the CPU by run-on-cpu\"") != std::string::npos);
}

TEST_CASE("bpu constraints: a Constant joins its consumer's subgraph, or stays on the CPU with it") {
  Model model;
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* k = g.get_or_create_value("k");
  g.add_node("Constant", {}, {k}, "k")->set_attribute(Attribute::make_tensor("value", Tensor::from_vector<float>({1}, {2.0f})));
  Value* m = binary(g, "Mul", "mul", x, k);
  Value* k2 = g.get_or_create_value("k2");
  g.add_node("Constant", {}, {k2}, "k2")->set_attribute(Attribute::make_tensor("value", Tensor::from_vector<float>({1}, {1.0f})));
  Value* s = binary(g, "Softmax", "softmax", m, k2);  // a CPU consumer (the extra input is only there to read k2)
  g.outputs = {s};
  auto plan = backend_for("bernoulli2").plan(model, {});
  REQUIRE(plan.has_value());
  REQUIRE(plan->nodes.size() == 4);
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < plan->nodes.size(); ++i) at[plan->nodes[i].node] = i;
  CHECK(plan->subgraph_of[at["k"]] == plan->subgraph_of[at["mul"]]);
  CHECK(plan->subgraph_of[at["mul"]] >= 0);
  CHECK_FALSE(plan->nodes[at["k2"]].supported);
  CHECK(plan->nodes[at["k2"]].reason == "Constant feeds only CPU nodes");
  REQUIRE(plan->subgraphs.size() == 1);
  // The constant is inside the subgraph, so only x crosses into it.
  REQUIRE(plan->subgraphs[0].inputs.size() == 1);
  CHECK(plan->subgraphs[0].inputs[0].name == "x");
}

}  // namespace
}  // namespace qflow

namespace qflow {
namespace {

TEST_CASE("bpu constraints: max-dilation and Upsample's scales attribute, on a platform of one's own") {
  TempDir dir("limits");
  dir.write("lim.toml", platform_header("lim") +
                            "[ops]\nConv = { max-dilation = 2 }\nUpsample = { max-scale = 4, integer-scales = true }\n");
  auto loaded = load_bpu_platform(dir.path.string(), "lim");
  REQUIRE_MESSAGE(loaded.has_value(), loaded.status().message());
  const BpuBackend backend(loaded.value());
  auto reason_of = [&](const Model& model) {
    auto caps = backend.capability(model);
    REQUIRE_MESSAGE(caps.has_value(), caps.status().message());
    return caps->at(0).reason;
  };

  Model conv_model;
  Graph& g = *conv_model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* y = conv(g, "c", x, {4, 4, 3, 3});
  g.outputs = {y};
  Node* c = y->producer();
  c->set_attribute(Attribute::make_ints("dilations", {1, 4}));
  CHECK(reason_of(conv_model) == "Conv dilation 1x4 > 2x2");
  c->set_attribute(Attribute::make_ints("dilations", {2, 2}));
  CHECK(reason_of(conv_model).empty());

  Model up_model;
  Graph& u = *up_model.graph;
  Value* ux = u.get_or_create_value("x");
  u.inputs = {ux};
  Value* uy = unary(u, "Upsample", "up", ux);
  u.outputs = {uy};
  Node* up = uy->producer();
  up->set_attribute(Attribute::make_floats("scales", {1, 1, 8, 2}));
  CHECK(reason_of(up_model) == "Upsample scale 8x2 > 4x4");
  up->set_attribute(Attribute::make_floats("scales", {1, 1, 2, 2.5f}));
  CHECK(reason_of(up_model) == "Upsample scale 2x2.5 is not a whole number");
  up->set_attribute(Attribute::make_floats("scales", {1, 1, 2, 4}));
  CHECK(reason_of(up_model).empty());
}

}  // namespace
}  // namespace qflow
