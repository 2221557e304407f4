// Tests of the bpu backend: bundled platforms, per-node capability and the partition plan.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/backends/bpu/bpu_backend.h"
#include "plugins/backends/bpu/bpu_platform.h"
#include "test_bpu_helpers.h"

namespace qflow {
namespace {

using namespace bpu_test;

// x -> conv9 (9x9) -> relu -> softmax -> conv3 (3x3) -> relu2 -> y
Model chain_model() {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  g.name = "chain";
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* v = conv(g, "conv9", x, {8, 3, 9, 9});
  v = unary(g, "Relu", "relu", v);
  v = unary(g, "Softmax", "softmax", v);
  v = conv(g, "conv3", v, {8, 8, 3, 3});
  v = unary(g, "Relu", "relu2", v);
  g.outputs = {v};
  return model;
}

TEST_CASE("bpu: the three bundled platforms load") {
  for (const char* name : {"bernoulli2", "bayes", "nash"}) {
    auto platform = load_bpu_platform(QFLOW_BPU_PLATFORM_DIR, name);
    REQUIRE_MESSAGE(platform.has_value(), platform.status().message());
    CHECK(platform->name == name);
    CHECK(platform->ops.count("Conv") == 1);
  }
  CHECK(list_bpu_platforms(QFLOW_BPU_PLATFORM_DIR) == std::vector<std::string>{"bayes", "bernoulli2", "nash"});
}

TEST_CASE("bpu: a 9x9 conv and Softmax are refused on bernoulli2, accepted on nash") {
  const Model model = chain_model();
  auto on_b2 = backend_for("bernoulli2").capability(model);
  REQUIRE(on_b2.has_value());
  REQUIRE(on_b2->size() == 5);
  const std::vector<NodeCapability>& caps = on_b2.value();
  CHECK(caps[0].node == "conv9");
  CHECK_FALSE(caps[0].supported);
  CHECK(caps[0].reason == "Conv kernel 9x9 > 7x7");
  CHECK(caps[1].supported);
  CHECK(caps[1].reason.empty());
  CHECK_FALSE(caps[2].supported);
  CHECK(caps[2].op_type == "Softmax");
  CHECK(caps[2].reason == "op type Softmax is not supported on bernoulli2");
  CHECK(caps[3].supported);
  CHECK(caps[4].supported);

  auto on_nash = backend_for("nash").capability(model);
  REQUIRE(on_nash.has_value());
  for (const NodeCapability& cap : on_nash.value()) CHECK_MESSAGE(cap.supported, (cap.node + ": " + cap.reason));
}

TEST_CASE("bpu: channel, stride and domain constraints name the actual value") {
  Model model;
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* wide = conv(g, "wide", x, {4096, 3, 3, 3});
  Value* grouped = conv(g, "grouped", wide, {16, 1024, 1, 1});
  g.find_value("grouped_out")->producer()->set_attribute(Attribute::make_int("group", 4));  // 4096 input channels
  Value* strided = conv(g, "strided", grouped, {8, 16, 3, 3});
  g.find_value("strided_out")->producer()->set_attribute(Attribute::make_ints("strides", {1, 8}));
  Value* custom = g.get_or_create_value("custom_out");
  g.add_node("Foo", {strided}, {custom}, "custom", "com.example");
  Value* dynamic_out = g.get_or_create_value("dyn_out");
  g.add_node("Conv", {custom, g.get_or_create_value("runtime_weight")}, {dynamic_out}, "dynamic");
  g.inputs.push_back(g.find_value("runtime_weight"));
  g.outputs = {dynamic_out};

  auto b2 = backend_for("bernoulli2").capability(model);
  REQUIRE(b2.has_value());
  CHECK(b2->at(0).reason == "Conv output channels 4096 > 2048");
  CHECK(b2->at(1).reason == "Conv input channels 4096 > 2048");
  CHECK(b2->at(2).supported);  // bernoulli2 declares no stride limit
  CHECK(b2->at(3).reason == "op type com.example::Foo is not supported on bernoulli2");
  CHECK(b2->at(4).reason == "Conv kernel size is unknown (no kernel_shape and weight 'runtime_weight' has no static shape)");

  auto bayes = backend_for("bayes").capability(model);
  REQUIRE(bayes.has_value());
  CHECK(bayes->at(2).reason == "Conv stride 1x8 > 7x7");
}

TEST_CASE("bpu: subgraph ids are the connected BPU regions in topological order") {
  const Model model = chain_model();
  auto plan_b2 = backend_for("bernoulli2").compile(model, {});
  REQUIRE(plan_b2.has_value());
  const std::string& json = plan_b2.value();
  CHECK(json.find("\"platform\": \"bernoulli2\"") != std::string::npos);
  CHECK(json.find("{\"index\": 0, \"name\": \"conv9\", \"op_type\": \"Conv\", \"placement\": \"cpu\", \"subgraph\": null, "
                  "\"reason\": \"Conv kernel 9x9 > 7x7\"}") != std::string::npos);
  CHECK(json.find("{\"index\": 1, \"name\": \"relu\", \"op_type\": \"Relu\", \"placement\": \"bpu\", \"subgraph\": 0, ") !=
        std::string::npos);
  CHECK(json.find("\"name\": \"softmax\", \"op_type\": \"Softmax\", \"placement\": \"cpu\", \"subgraph\": null") !=
        std::string::npos);
  CHECK(json.find("\"name\": \"conv3\", \"op_type\": \"Conv\", \"placement\": \"bpu\", \"subgraph\": 1") != std::string::npos);
  CHECK(json.find("\"name\": \"relu2\", \"op_type\": \"Relu\", \"placement\": \"bpu\", \"subgraph\": 1") != std::string::npos);
  CHECK(json.find("\"id\": 0,\n      \"nodes\": [1],") != std::string::npos);
  CHECK(json.find("\"id\": 1,\n      \"nodes\": [3, 4],") != std::string::npos);
  CHECK(json.find("\"id\": 2") == std::string::npos);

  auto plan_nash = backend_for("nash").compile(model, {});
  REQUIRE(plan_nash.has_value());
  CHECK(plan_nash->find("\"id\": 0,\n      \"nodes\": [0, 1, 2, 3, 4],") != std::string::npos);
  CHECK(plan_nash->find("\"id\": 1") == std::string::npos);
}

TEST_CASE("bpu: the plan is deterministic and carries boundary quantization") {
  const Model model = chain_model();
  QuantParams q;
  q.dtype = DType::Int8;
  q.scale = {0.0625f};
  q.zero_point = {0};
  q.method = "max";
  const QuantTable table = {{"softmax_out", q}};
  const BpuBackend backend = backend_for("bernoulli2");
  auto first = backend.compile(model, table);
  auto second = backend.compile(model, table);
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  CHECK(first.value() == second.value());
  CHECK(first->find("{\"name\": \"softmax_out\", \"conversion\": \"quantize\", \"quant\": {\"dtype\": \"int8\", \"axis\": -1, \"scale\": [0.0625], "
                    "\"zero_point\": [0]}}") != std::string::npos);
  CHECK(first->find("{\"name\": \"conv9_out\", \"conversion\": \"quantize\", \"quant\": null}") != std::string::npos);
  CHECK(first->find("\"outputs\": [\n        {\"name\": \"relu2_out\", \"conversion\": \"dequantize\"") != std::string::npos);
}

TEST_CASE("bpu: a region that leaves through the CPU and re-enters is split in two") {
  Model model;
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  g.inputs = {x};
  Value* p = unary(g, "Relu", "a", x);
  Value* q = unary(g, "Softmax", "b", p);
  Value* r = g.get_or_create_value("c_out");
  g.add_node("Add", {p, q}, {r}, "c");
  g.outputs = {r};
  auto plan = backend_for("bernoulli2").compile(model, {});
  REQUIRE(plan.has_value());
  // a and c are joined by an edge but a -> b (CPU) -> c would make one unit wait on itself.
  CHECK(plan->find("\"id\": 0,\n      \"nodes\": [0],") != std::string::npos);
  CHECK(plan->find("\"id\": 1,\n      \"nodes\": [2],") != std::string::npos);
  // c reads a_out straight from subgraph 0 (stays quantized) and b_out from the CPU.
  CHECK(plan->find("{\"name\": \"a_out\", \"conversion\": \"none\"") != std::string::npos);
  CHECK(plan->find("{\"name\": \"b_out\", \"conversion\": \"quantize\"") != std::string::npos);
  auto nash = backend_for("nash").compile(model, {});
  REQUIRE(nash.has_value());
  CHECK(nash->find("\"nodes\": [0, 1, 2],") != std::string::npos);
}

TEST_CASE("bpu: platform files are validated with file and line") {
  TempDir dir("backend");
  dir.write("typo.toml", "name = \"typo\"\n[ops]\nConv = { max-kernal = 7 }\n");
  dir.write("wrongname.toml", "name = \"other\"\n[ops]\n");
  dir.write("badops.toml", "name = \"badops\"\n[ops]\nRelu = { max-channels = 4 }\n");
  dir.write("syntax.toml", "name = \"syntax\"\n[ops\n");
  dir.write("noops.toml", platform_header("noops"));

  auto typo = load_bpu_platform(dir.path.string(), "typo");
  REQUIRE_FALSE(typo.has_value());
  CHECK(typo.status().message().find("typo.toml:3: unknown key ops.Conv.max-kernal") != std::string::npos);
  auto wrong = load_bpu_platform(dir.path.string(), "wrongname");
  REQUIRE_FALSE(wrong.has_value());
  CHECK(wrong.status().message().find("wrongname.toml:1: name 'other' does not match") != std::string::npos);
  auto badops = load_bpu_platform(dir.path.string(), "badops");
  REQUIRE_FALSE(badops.has_value());
  CHECK(badops.status().message().find("badops.toml:3: ops.Relu.max-channels: max-channels applies only to Concat, Conv, ConvTranspose") != std::string::npos);
  auto syntax = load_bpu_platform(dir.path.string(), "syntax");
  REQUIRE_FALSE(syntax.has_value());
  CHECK(syntax.status().message().find('\n') == std::string::npos);
  auto noops = load_bpu_platform(dir.path.string(), "noops");
  REQUIRE_FALSE(noops.has_value());
  CHECK(noops.status().message().find("missing table 'ops'") != std::string::npos);

  auto missing = load_bpu_platform(QFLOW_BPU_PLATFORM_DIR, "x9");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().code() == StatusCode::NotFound);
  CHECK(missing.status().message().find("(available: bayes, bernoulli2, nash)") != std::string::npos);
  auto traversal = load_bpu_platform(QFLOW_BPU_PLATFORM_DIR, "../nash");
  REQUIRE_FALSE(traversal.has_value());
  CHECK(traversal.status().code() == StatusCode::InvalidInput);
}

TEST_CASE("bpu: factory options") {
  Options options;
  options.set("platform", std::string("bernoulli2"));
  options.set("platform-dir", std::string(QFLOW_BPU_PLATFORM_DIR));
  options.set("run-on-cpu", std::vector<std::string>{});
  options.set("run-on-bpu", std::vector<std::string>{});
  auto backend = BpuBackend::from_options(options);
  REQUIRE(backend.has_value());
  auto caps = backend->capability(chain_model());
  REQUIRE(caps.has_value());
  CHECK(caps->at(2).reason == "op type Softmax is not supported on bernoulli2");

  const std::vector<OptionSpec> specs = BpuBackend::options();
  REQUIRE(specs.size() == 4);
  CHECK(specs[2].name == "run-on-cpu");
  CHECK(specs[3].name == "run-on-bpu");
  CHECK(std::get<std::string>(specs[0].default_value) == "nash");
}

}  // namespace
}  // namespace qflow
