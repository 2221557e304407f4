// Tests of the onnxruntime target: its platform files, the node-unit rules of the partition
// (each failed constraint named), the check section, the quantization rule and the lowering's
// refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "framework/pipeline/pipeline.h"
#include "framework/pipeline/stage_execution.h"
#include "framework/plugin/component_registry.h"
#include "plugins/targets/onnxruntime/ort_platform.h"
#include "plugins/targets/onnxruntime/ort_target.h"
#include "plugins/targets/onnxruntime/ort_units.h"
#include "qflow/core/json.h"
#include "qflow/onnx.h"
#include "test_bpu_lowering_helpers.h"

namespace qflow {
namespace {

using lowering_test::QdqGraph;

OrtPlatform ort_platform(const std::string& name) {
  auto platform = find_ort_platform({QFLOW_ORT_PLATFORM_DIR}, "", name);
  REQUIRE_MESSAGE(platform.has_value(), platform.status().message());
  return std::move(platform).value();
}

std::unique_ptr<Target> ort_target(const std::string& platform) {
  Options options;
  options.set("platform", platform);
  options.set("platform-dir", std::string(QFLOW_ORT_PLATFORM_DIR));
  auto target = OrtTarget::create(options);
  REQUIRE_MESSAGE(target.has_value(), target.status().message());
  return std::move(target).value();
}

std::string platform_error(const std::string& name, const std::string& text) {
  bpu_test::TempDir dir("ort_platform");
  dir.write(name + ".toml", text);
  auto platform = find_ort_platform({dir.path.string()}, "", name);
  REQUIRE_FALSE(platform.has_value());
  const std::string message = platform.status().message();
  // "<folder>/<name>.toml:<line>: <what>": the folder changes per run.
  const std::size_t at = message.find(name + ".toml:");
  return at == std::string::npos ? message : message.substr(at);
}

// The keys every platform file needs besides [ops].
const char* const kHeader = R"(name = "p"
cpu = "test CPUs"
activation-dtypes = ["int8", "uint8"]
weight-dtypes = ["int8"]
int8-weight-range = 64
qdq-dtypes = { int8 = 10, uint8 = 10, int32 = 10 }
)";

std::vector<int8_t> filled(std::size_t n, int8_t value) { return std::vector<int8_t>(n, value); }

// input -> Conv (weights up to `conv_weight`) -> Relu -> depthwise Conv (weights 127) ->
// GlobalAveragePool -> Flatten -> Gemm (weights up to `gemm_weight`) -> graph output, each
// output with its Q/DQ pair as the quantize stage writes them; Flatten keeps its input's
// parameters (pass-through alignment).
QdqGraph small_ptq_model(int8_t conv_weight, int8_t gemm_weight) {
  QdqGraph q;
  Value* x = q.input("x", {1, 2, 4, 4}, 0.02);
  Value* w1 = q.weight("conv_w", {4, 2, 1, 1}, filled(8, conv_weight), {0.01f, 0.01f, 0.01f, 0.01f}, 0);
  Value* b1 = q.bias("conv_b", {1, 2, 3, 4}, {0.0002f, 0.0002f, 0.0002f, 0.0002f});
  Value* c = q.qdq(q.op("Conv", "conv", {x, w1, b1}, {1, 4, 4, 4}), 0.05);
  Value* r = q.qdq(q.op("Relu", "relu", {c}, {1, 4, 4, 4}), 0.05);
  Value* wd = q.weight("dw_w", {4, 1, 3, 3}, filled(36, 127), {0.01f, 0.01f, 0.01f, 0.01f}, 0);
  Value* d = q.qdq(q.op("Conv", "dw", {r, wd}, {1, 4, 4, 4}, {Attribute::make_int("group", 4),
                                                             Attribute::make_ints("pads", {1, 1, 1, 1})}),
                   0.1);
  Value* p = q.qdq(q.op("GlobalAveragePool", "pool", {d}, {1, 4, 1, 1}), 0.08);
  Value* f = q.qdq(q.op("Flatten", "flatten", {p}, {1, 4}), 0.08);
  Value* wg = q.weight("fc_w", {4, 3}, filled(12, gemm_weight), {0.02f, 0.02f, 0.02f}, 1);
  Value* y = q.qdq(q.op("Gemm", "fc", {f, wg}, {1, 3}), 0.1);
  q.output(y);
  return q;
}

std::map<std::string, NodeCapability> by_name(const std::vector<NodeCapability>& nodes) {
  std::map<std::string, NodeCapability> out;
  for (const NodeCapability& n : nodes) out[n.node] = n;
  return out;
}

}  // namespace

TEST_CASE("onnxruntime platforms: the shipped descriptions load; x86_64 limits int8 weights to [-64, 64]") {
  const OrtPlatform base = ort_platform("x86_64");
  CHECK(base.int8_weight_range == 64);
  CHECK(base.activation_dtypes == std::vector<std::string>{"int8", "uint8"});
  CHECK(base.weight_dtypes == std::vector<std::string>{"int8"});
  CHECK(base.per_channel == std::vector<std::string>{"Conv", "Gemm", "MatMul"});
  CHECK(base.ops.at("Conv") == OrtUnitRule::Conv);
  CHECK(base.ops.at("Reshape") == OrtUnitRule::SameScale);
  CHECK(base.ops.at("Softmax") == OrtUnitRule::Unary);
  CHECK_FALSE(base.ops.count("Relu"));
  CHECK(base.qdq_dtypes.at("int16") == 21);
  const OrtPlatform vnni = ort_platform("x86_64-vnni");
  CHECK(vnni.int8_weight_range == 127);
  CHECK(vnni.ops.size() == base.ops.size());

  auto missing = find_ort_platform({QFLOW_ORT_PLATFORM_DIR}, "", "x86-64");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().message().find("available: x86_64, x86_64-vnni") != std::string::npos);
  CHECK(missing.status().message().find("did you mean x86_64?") != std::string::npos);
  CHECK_FALSE(find_ort_platform({QFLOW_ORT_PLATFORM_DIR}, "", "X86").has_value());
}

TEST_CASE("onnxruntime platforms: keys, op types, rules and ranges are checked strictly") {
  const std::string ops = "[ops]\nConv = \"conv\"\n";
  CHECK(platform_error("p", std::string(kHeader) + "weight-range = 64\n" + ops) ==
        "p.toml:7: unknown key 'weight-range' (allowed: activation-dtypes, cpu, int8-weight-range, name, ops, "
        "per-channel, qdq-dtypes, summary, weight-dtypes)");
  CHECK(platform_error("p", std::string(kHeader) + "[ops]\nConvv = \"conv\"\n") ==
        "p.toml:8: ops: unknown operator 'Convv' (did you mean Conv?)");
  CHECK(platform_error("p", std::string(kHeader) + "[ops]\nAdd = \"conv\"\n") == "p.toml:8: ops.Add: rule 'conv' fuses only Conv");
  CHECK(platform_error("p", std::string(kHeader) + "[ops]\nAdd = \"sum\"\n") ==
        "p.toml:8: ops.Add: unknown rule 'sum' (rules: conv, matmul, gemm, binary, variadic, unary, same-scale, where, "
        "dequantized-input)");
  std::string text = kHeader;
  text.replace(text.find("int8-weight-range = 64"), 22, "int8-weight-range = 32");
  CHECK(platform_error("p", text + ops) == "p.toml:5: int8-weight-range must be an integer from 64 to 127 (127: no limit), got 32");
  text = kHeader;
  text.replace(text.find("[\"int8\", \"uint8\"]"), 17, "[\"int8\", \"int16\"]");
  CHECK(platform_error("p", text + ops) == "p.toml:3: activation-dtypes: unknown value 'int16' (allowed: int8, uint8)");
  CHECK(platform_error("q", std::string(kHeader) + ops).find("name 'p' does not match the file name 'q'") != std::string::npos);
  CHECK(platform_error("p", std::string(kHeader) + "per-channel = [\"Add\"]\n[ops]\nConv = \"conv\"\nAdd = \"binary\"\n") ==
        "p.toml:7: per-channel: unknown value 'Add' (allowed: Conv)");
  text = kHeader;
  text.erase(text.find("cpu = "), std::string("cpu = \"test CPUs\"\n").size());
  CHECK(platform_error("p", text + ops).find("missing key 'cpu'") != std::string::npos);
}

TEST_CASE("onnxruntime target: each node is int8 where ONNX Runtime fuses its unit, else the failed constraint") {
  QdqGraph q = small_ptq_model(64, 64);
  auto nodes = ort_target("x86_64")->partition(q.model);
  REQUIRE_MESSAGE(nodes.has_value(), nodes.status().message());
  REQUIRE(nodes->size() == 6);  // Q and DQ nodes are the conversions, not placed
  const auto n = by_name(*nodes);
  CHECK(n.at("conv").supported);
  CHECK(n.at("dw").supported);
  CHECK(n.at("pool").supported);
  CHECK(n.at("flatten").supported);
  CHECK(n.at("fc").supported);
  CHECK_FALSE(n.at("relu").supported);
  CHECK(n.at("relu").reason == "no int8 kernel for Relu");
}

TEST_CASE("onnxruntime target: int8 weights beyond the platform's range fail the u8s8 rule, depthwise excepted") {
  QdqGraph q = small_ptq_model(127, -100);
  auto on_x86 = ort_placement(q.model, ort_platform("x86_64"));
  REQUIRE(on_x86.has_value());
  std::map<std::string, OrtNodePlacement> n;
  for (const OrtNodePlacement& p : *on_x86) n[p.node] = p;
  CHECK_FALSE(n.at("conv").int8);
  CHECK(n.at("conv").breaks_numerics);
  CHECK(n.at("conv").reason == "weight range [127, 127] exceeds [-64, 64] of the u8s8 kernels on x86-64 CPUs without VNNI");
  CHECK(n.at("fc").reason == "weight range [-100, -100] exceeds [-64, 64] of the u8s8 kernels on x86-64 CPUs without VNNI");
  // The depthwise Conv holds 127 too, but MLAS widens its operands: exact on every x86 CPU.
  CHECK(n.at("dw").int8);
  CHECK_FALSE(n.at("relu").breaks_numerics);

  // With VNNI the kernels sum in 32 bits: the same model runs whole in int8.
  auto on_vnni = ort_target("x86_64-vnni")->partition(q.model);
  REQUIRE(on_vnni.has_value());
  for (const NodeCapability& node : *on_vnni) CHECK(node.supported == (node.node != "relu"));
}

TEST_CASE("onnxruntime target: inputs, outputs, types and parameters each name their constraint") {
  const OrtPlatform platform = ort_platform("x86_64");
  auto reason_of = [&](const QdqGraph& q, const std::string& node) {
    auto placed = ort_placement(q.model, platform);
    REQUIRE_MESSAGE(placed.has_value(), placed.status().message());
    for (const OrtNodePlacement& p : *placed)
      if (p.node == node) return p.reason;
    FAIL("no node " << node);
    return std::string();
  };
  SUBCASE("an input that is not dequantized") {
    QdqGraph q;
    Value* x = q.float_input("x", {1, 4});
    Value* b = q.input("b", {1, 4}, 0.1);
    q.output(q.qdq(q.op("Add", "add", {x, b}, {1, 4}), 0.1));
    CHECK(reason_of(q, "add") == "input 'x' not dequantized from int8");
  }
  SUBCASE("an output left float, read by another node, or a graph output") {
    QdqGraph q;
    Value* a = q.input("a", {1, 4}, 0.1);
    Value* b = q.input("b", {1, 4}, 0.1);
    Value* sum = q.op("Add", "add", {a, b}, {1, 4});
    q.output(q.qdq(q.op("Sigmoid", "sig", {sum}, {1, 4}), 0.01));
    CHECK(reason_of(q, "add") == "output 'add_out' is read unquantized by 'sig'");
    CHECK(reason_of(q, "sig") == "input 'add_out' not dequantized from int8");
    QdqGraph r;
    Value* c = r.input("c", {1, 4}, 0.1);
    r.output(r.op("Sigmoid", "sig", {c}, {1, 4}));
    CHECK(reason_of(r, "sig") == "output 'sig_out' is a graph output (not quantized)");
  }
  SUBCASE("16-bit activations and mixed types") {
    QdqGraph q;
    Value* a = q.input("a", {1, 4}, 0.001, 0, DType::Int16);
    q.output(q.qdq(q.op("Sigmoid", "sig", {a}, {1, 4}), 0.0001, 0, DType::Int16));
    CHECK(reason_of(q, "sig") == "input 'a_dequantized' is int16 (the int8 kernels take int8, uint8)");
    QdqGraph r;
    Value* b = r.input("b", {1, 4}, 0.1);
    r.output(r.qdq(r.op("Sigmoid", "sig", {b}, {1, 4}), 0.004, 0, DType::UInt8));
    CHECK(reason_of(r, "sig") == "input 'b_dequantized' is int8 but output 'sig_out' is uint8");
  }
  SUBCASE("data movement keeps its Q/DQ only when input and output parameters agree") {
    QdqGraph q;
    Value* a = q.input("a", {1, 4}, 0.1);
    Value* shape = q.constant("shape", Tensor::from_vector<int64_t>({2}, {2, 2}));
    Value* same = q.qdq(q.op("Reshape", "reshape", {a, shape}, {2, 2}), 0.1);
    q.output(q.qdq(q.op("Transpose", "transpose", {same}, {2, 2}), 0.2));
    CHECK(reason_of(q, "reshape").empty());
    CHECK(reason_of(q, "transpose") ==
          "output 'transpose_out' is quantized with scale 0.2, zero point 0, the input with 0.1, 0 (the Q/DQ pair is "
          "dropped only when they agree)");
  }
  SUBCASE("a float bias, and Gemm's beta") {
    QdqGraph q;
    Value* a = q.input("a", {1, 4}, 0.1);
    Value* w = q.weight("w", {4, 2}, filled(8, 10), {0.01f}, 1);
    Value* b = q.constant("b", Tensor::from_vector<float>({2}, {0.5f, 0.25f}));
    q.output(q.qdq(q.op("Gemm", "fc", {a, w, b}, {1, 2}), 0.1));
    CHECK(reason_of(q, "fc") == "input 'b' not dequantized from int8");
    QdqGraph r;
    Value* c = r.input("c", {1, 4}, 0.1);
    Value* v = r.weight("v", {4, 2}, filled(8, 10), {0.01f}, 1);
    Value* d = r.bias("d", {1, 2}, {0.001f});
    r.output(r.qdq(r.op("Gemm", "fc", {c, v, d}, {1, 2}, {Attribute::make_float("beta", 0.5f)}), 0.1));
    CHECK(reason_of(r, "fc") == "Gemm beta 0.5 with a bias (the int8 kernel takes 1)");
  }
  SUBCASE("a malformed node is placed, not crashed on") {
    QdqGraph q;
    Value* a = q.input("a", {1, 4}, 0.1);
    q.output(q.qdq(q.op("Concat", "empty", {}, {1, 4}, {Attribute::make_int("axis", 0)}), 0.1));
    q.output(q.qdq(q.op("Sigmoid", "bare", {}, {1, 4}), 0.1));
    q.output(q.qdq(q.op("MatMul", "half", {a}, {1, 4}), 0.1));
    CHECK(reason_of(q, "empty") == "no inputs");
    CHECK(reason_of(q, "bare") == "input 0 missing");
    CHECK(reason_of(q, "half") == "input 1 missing");
  }
  SUBCASE("ops without an int8 kernel, and a MatMul whose float output ONNX Runtime still fuses") {
    QdqGraph q;
    Value* a = q.input("a", {1, 4}, 0.1);
    Value* w = q.weight("w", {4, 2}, filled(8, 10), {0.01f}, 1);
    Value* m = q.op("MatMul", "mm", {a, w}, {1, 2});
    q.output(q.op("Erf", "erf", {m}, {1, 2}));
    CHECK(reason_of(q, "mm").empty());  // MatMulIntegerToFloat
    CHECK(reason_of(q, "erf") == "no int8 kernel for Erf");
  }
}

TEST_CASE("onnxruntime target: the check section lists every node with its placement and a summary") {
  QdqGraph q = small_ptq_model(127, 64);
  std::unique_ptr<Target> target = ort_target("x86_64");
  auto check = target->check(q.model);
  REQUIRE_MESSAGE(check.has_value(), check.status().message());
  auto doc = parse_json(check->json, "check");
  REQUIRE_MESSAGE(doc.has_value(), doc.status().message());
  CHECK(doc->at("target") == "onnxruntime");
  CHECK(doc->at("accelerator") == "int8");
  CHECK(doc->at("fallback") == "float");
  CHECK(doc->at("platform") == "x86_64");
  const Json* nodes = json_member(*doc, "nodes");
  REQUIRE(nodes);
  REQUIRE(nodes->size() == 6);
  for (const Json& node : *nodes) {
    const std::string name = node.at("name").get<std::string>();
    CAPTURE(name);
    const bool int8 = name != "relu" && name != "conv";
    CHECK(node.at("placement") == (int8 ? "int8" : "float"));
    CHECK(node.at("reason").get<std::string>().empty() == int8);
    CHECK(node.at("op_type").is_string());
  }
  const Json& summary = doc->at("summary");
  CHECK(summary.at("nodes") == 6);
  CHECK(summary.at("int8_nodes") == 4);
  CHECK(summary.at("float_nodes") == 2);
  CHECK(summary.at("overflowing_units") == 1);
  CHECK(summary.at("float_op_types").at("Relu") == 1);
  CHECK(check->text.find("nodes: 6 (int8 4, float 2)") != std::string::npos);
  CHECK(check->text.find("no int8 kernel for Relu") != std::string::npos);
  CHECK(check->text.find("units ONNX Runtime would fuse into overflowing kernels: 1") != std::string::npos);
  CHECK(target->estimate(q.model, QuantTable{}).status().code() == StatusCode::Unsupported);
}

TEST_CASE("onnxruntime target: the rule asks reduce-range where the platform limits int8 weights") {
  const QuantConfig rule = ort_target("x86_64")->quantization_rule();
  REQUIRE(rule.model.reduce_range.has_value());
  CHECK(*rule.model.reduce_range);
  CHECK(rule.op_types.empty());
  CHECK(ort_target("x86_64-vnni")->quantization_rule().empty());
}

TEST_CASE("onnxruntime target: the lowering emits the PTQ model, or refuses naming the node and the remedy") {
  QdqGraph fits = small_ptq_model(64, -64);
  auto files = ort_target("x86_64")->lower(fits.model);
  REQUIRE_MESSAGE(files.has_value(), files.status().message());
  REQUIRE(files->size() == 1);
  CHECK((*files)[0].role == "onnx");
  CHECK((*files)[0].suffix == "_ort_model.onnx");
  auto bytes = serialize_onnx(fits.model);
  REQUIRE(bytes.has_value());
  CHECK((*files)[0].bytes == *bytes);

  QdqGraph overflows = small_ptq_model(127, 127);
  auto refused = ort_target("x86_64")->lower(overflows.model);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message() ==
        "onnxruntime: node 'conv' (Conv): weight range [127, 127] exceeds [-64, 64] of the u8s8 kernels on x86-64 CPUs "
        "without VNNI (and 1 more node): ONNX Runtime would fuse them into int8 kernels that overflow, and the "
        "deployed model would lose accuracy; quantize with reduce-range = true (or name this target in "
        "[quantization]: target = \"onnxruntime\"), or lower for a platform without the limit (x86_64-vnni) when the "
        "model runs only on CPUs with VNNI");
  CHECK(ort_target("x86_64-vnni")->lower(overflows.model).has_value());
}

TEST_CASE("onnxruntime target: a QuantizeLinear type the provider runs only at a later opset is refused") {
  QdqGraph q(13);
  Value* a = q.input("a", {1, 4}, 0.001, 0, DType::Int16);
  q.output(q.qdq(q.op("Sigmoid", "sig", {a}, {1, 4}), 0.0001, 0, DType::Int16));
  auto refused = ort_target("x86_64")->lower(q.model);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message() ==
        "onnxruntime: node 'a_QuantizeLinear': QuantizeLinear to int16 needs opset 21, the model imports 13 (and 3 more); "
        "quantize to types the platform lists in qdq-dtypes");
  QdqGraph r(21);
  Value* b = r.input("b", {1, 4}, 0.001, 0, DType::Int16);
  r.output(r.qdq(r.op("Sigmoid", "sig", {b}, {1, 4}), 0.0001, 0, DType::Int16));
  CHECK(ort_target("x86_64")->lower(r.model).has_value());
}

TEST_CASE("onnxruntime target: options name the platform; an empty one is x86_64, an unknown one is refused") {
  Options options;
  options.set("platform", std::string());
  options.set("platform-dir", std::string(QFLOW_ORT_PLATFORM_DIR));
  auto made = OrtTarget::create(options);
  REQUIRE_MESSAGE(made.has_value(), made.status().message());
  CHECK(dynamic_cast<const OrtTarget&>(**made).platform().name == "x86_64");
  options.set("platform", std::string("nash"));
  auto refused = OrtTarget::create(options);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message().find("onnxruntime platform 'nash' not found") == 0);
  const ComponentInfo info = OrtTarget::info();
  CHECK(info.name == "onnxruntime");
  CHECK(info.kind == ComponentKind::Target);
  REQUIRE(info.options.size() == 2);
  CHECK(info.options[0].name == "platform");
  CHECK(info.options[1].name == "platform-dir");
}

TEST_CASE("onnxruntime target: a pipeline naming it in [quantization] quantizes with its rule under the table") {
  ComponentRegistry registry;
  REQUIRE(registry.load_library(std::string(QFLOW_PLUGIN_DIR) + "/libqflow_target_onnxruntime.so").is_ok());
  auto effective = [&](const std::string& quantization, const std::vector<std::string>& sets = {}) {
    auto pipeline = parse_pipeline("[vars]\nplatform = \"\"\n" + quantization +
                                       "\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\noptions = { path = \"m.onnx\" }\n",
                                   "p.toml", sets);
    REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
    return pipeline_quantization(*pipeline, registry);
  };
  const std::string named = "[quantization]\ntarget = \"onnxruntime\"\ntarget-options = [\"platform=${platform}\"]\n";
  auto base = effective(named);
  REQUIRE_MESSAGE(base.has_value(), base.status().message());
  CHECK(base->resolve("conv", "Conv").reduce_range);
  // The table decides: its own key replaces the rule's, and the lowering then refuses.
  auto overridden = effective(named + "reduce-range = false\n");
  REQUIRE(overridden.has_value());
  CHECK_FALSE(overridden->resolve("conv", "Conv").reduce_range);
  auto vnni = effective(named, {"platform=x86_64-vnni"});
  REQUIRE(vnni.has_value());
  CHECK_FALSE(vnni->resolve("conv", "Conv").reduce_range);
  auto unknown = effective(named, {"platform=arm64"});
  REQUIRE_FALSE(unknown.has_value());
  const std::string message = unknown.status().message();
  CAPTURE(message);
  CHECK(message.rfind("p.toml:4:10: in [quantization]: target 'onnxruntime': ", 0) == 0);
  CHECK(message.find("onnxruntime platform 'arm64' not found") != std::string::npos);
  // Without a target the table is all there is.
  auto plain = effective("[quantization]\nper-channel = false\n");
  REQUIRE(plain.has_value());
  CHECK_FALSE(plain->resolve("conv", "Conv").reduce_range);
  CHECK_FALSE(plain->resolve("conv", "Conv").per_channel);
}

}  // namespace qflow
