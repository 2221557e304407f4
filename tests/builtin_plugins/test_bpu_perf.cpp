// Tests of the BPU performance estimate: hand-computed MACs, bytes and roofline cycles, totals, JSON determinism.
#include <doctest/doctest.h>

#include <numeric>

#include "plugins/backends/bpu/bpu_target.h"
#include "plugins/backends/bpu/perf_report.h"
#include "test_bpu_helpers.h"

namespace qflow {
namespace {

using namespace bpu_test;

// 4 MACs per cycle; 0.4 GB/s at 100 MHz moves 0.4e9 / 100e6 = 4 bytes per cycle. Gemm is
// not listed, so it runs on the CPU.
constexpr const char* kPlatform =
    "name = \"roof\"\n"
    "dtypes = { activation = [\"int8\", \"int16\"], weight = [\"int8\", \"int16\"] }\n"
    "cost = { macs-per-cycle = 4, frequency-mhz = 100, bandwidth-gbps = 0.4 }\n"
    "[ops]\nConv = {}\nRelu = {}\nFlatten = {}\n";

// x [N, 2, 4, 4] -> conv (W [4, 2, 3, 3]) [1, 4, 2, 2] -> relu -> flatten [1, 16] -> fc (Gemm, W [16, 10], B [10]) [1, 10]
Model conv_relu_gemm() {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  g.name = "roofline";
  Value* x = g.get_or_create_value("x");
  ValueType type;
  type.dtype = DType::Float32;
  type.shape = std::vector<Dim>{Dim{std::nullopt, "N", ""}, Dim{2, "", ""}, Dim{4, "", ""}, Dim{4, "", ""}};
  x->type = type;
  g.inputs = {x};
  Value* c = conv(g, "conv", x, {4, 2, 3, 3});
  set_shape(c, {1, 4, 2, 2});
  Value* r = unary(g, "Relu", "relu", c);
  set_shape(r, {1, 4, 2, 2});
  Value* f = unary(g, "Flatten", "flatten", r);
  set_shape(f, {1, 16});
  Value* w = g.get_or_create_value("fc_W");
  g.set_initializer(w, Tensor(DType::Float32, {16, 10}));
  Value* b = g.get_or_create_value("fc_B");
  g.set_initializer(b, Tensor(DType::Float32, {10}));
  Value* y = g.get_or_create_value("y");
  set_shape(y, {1, 10});
  g.add_node("Gemm", {f, w, b}, {y}, "fc");
  g.outputs = {y};
  return model;
}

QuantParams quant(DType dtype) {
  QuantParams q;
  q.dtype = dtype;
  q.scale = {0.5f};
  q.zero_point = {0};
  return q;
}

PerfEstimate estimate(const TempDir& dir, const Model& model, const QuantTable& qparams) {
  auto platform = load_bpu_platform(dir.path.string(), "roof");
  REQUIRE_MESSAGE(platform.has_value(), platform.status().message());
  const BpuBackend backend(platform.value());
  auto plan = backend.plan(model, qparams);
  REQUIRE_MESSAGE(plan.has_value(), plan.status().message());
  auto e = estimate_perf(*model.graph, plan.value(), platform.value(), qparams);
  REQUIRE_MESSAGE(e.has_value(), e.status().message());
  return e.value();
}

void check_layer(const LayerPerf& l, int64_t macs, int64_t weights, int64_t reads, int64_t writes) {
  CAPTURE(l.name);
  CHECK(l.macs == macs);
  CHECK(l.weight_bytes == weights);
  CHECK(l.activation_read_bytes == reads);
  CHECK(l.activation_write_bytes == writes);
}

// The totals are the sums of the layers: per subgraph, and for the BPU and the CPU.
void check_sums(const PerfEstimate& e) {
  PerfTotals bpu, cpu;
  for (const LayerPerf& l : e.layers) {
    PerfTotals& t = l.bpu ? bpu : cpu;
    t.macs += *l.macs;
    t.weight_bytes += *l.weight_bytes;
    t.activation_read_bytes += *l.activation_read_bytes;
    t.activation_write_bytes += *l.activation_write_bytes;
    if (l.bpu) t.cycles += *l.cycles;
  }
  for (const auto& [mine, theirs] : {std::pair{&bpu, &e.bpu}, std::pair{&cpu, &e.cpu}}) {
    CHECK(mine->macs == theirs->macs);
    CHECK(mine->weight_bytes == theirs->weight_bytes);
    CHECK(mine->activation_read_bytes == theirs->activation_read_bytes);
    CHECK(mine->activation_write_bytes == theirs->activation_write_bytes);
    CHECK(mine->cycles == doctest::Approx(theirs->cycles));
    CHECK(theirs->unknown_nodes == 0);
  }
  const double subgraph_cycles = std::accumulate(e.subgraphs.begin(), e.subgraphs.end(), 0.0,
                                                 [](double s, const SubgraphPerf& g) { return s + g.totals.cycles; });
  CHECK(subgraph_cycles == doctest::Approx(e.bpu.cycles));
}

TEST_CASE("bpu perf: float model, every BPU layer memory-bound") {
  TempDir dir("perf_float");
  dir.write("roof.toml", kPlatform);
  const PerfEstimate e = estimate(dir, conv_relu_gemm(), {});
  REQUIRE(e.layers.size() == 4);
  // conv: 4x2x2 outputs x 2x3x3 = 288 MACs; 72 weights, 32 inputs (N as 1), 16 outputs, all float32.
  check_layer(e.layers[0], 288, 72 * 4, 32 * 4, 16 * 4);
  CHECK(*e.layers[0].compute_cycles == doctest::Approx(72.0));  // 288 / 4
  CHECK(*e.layers[0].memory_cycles == doctest::Approx(120.0));  // 480 bytes / 4
  CHECK(*e.layers[0].cycles == doctest::Approx(120.0));
  check_layer(e.layers[1], 0, 0, 64, 64);
  CHECK(*e.layers[1].cycles == doctest::Approx(32.0));
  check_layer(e.layers[2], 0, 0, 64, 64);
  CHECK(*e.layers[2].cycles == doctest::Approx(32.0));
  // fc on the CPU: 10 outputs x 16 MACs; weights 160 + bias 10 floats; no cycles.
  CHECK_FALSE(e.layers[3].bpu);
  check_layer(e.layers[3], 160, 170 * 4, 16 * 4, 10 * 4);
  CHECK_FALSE(e.layers[3].cycles.has_value());
  REQUIRE(e.subgraphs.size() == 1);
  CHECK(e.subgraphs[0].totals.cycles == doctest::Approx(184.0));
  CHECK(e.bpu.cycles == doctest::Approx(184.0));
  CHECK(e.cpu.macs == 160);
  CHECK(e.symbolic_dimensions == std::vector<std::string>{"N"});
  CHECK_FALSE(e.quantized);
  check_sums(e);

  const std::string text = perf_report_text(e);
  CHECK(text.find("184.000 cycles = 1.840 us") != std::string::npos);
  CHECK(text.find("symbolic dimensions counted as 1: N") != std::string::npos);
  CHECK(text.find("memory") != std::string::npos);
}

TEST_CASE("bpu perf: the table's int8 and int16 make the conv compute-bound") {
  TempDir dir("perf_quant");
  dir.write("roof.toml", kPlatform);
  const QuantTable table = {{"x", quant(DType::Int8)},
                            {"conv_W", quant(DType::Int8)},
                            {"conv_out", quant(DType::Int8)},
                            {"relu_out", quant(DType::Int16)},
                            {"flatten_out", quant(DType::Int8)}};
  const PerfEstimate e = estimate(dir, conv_relu_gemm(), table);
  REQUIRE(e.layers.size() == 4);
  check_layer(e.layers[0], 288, 72, 32, 16);
  CHECK(*e.layers[0].compute_cycles == doctest::Approx(72.0));
  CHECK(*e.layers[0].memory_cycles == doctest::Approx(30.0));  // 120 bytes / 4
  CHECK(*e.layers[0].cycles == doctest::Approx(72.0));
  check_layer(e.layers[1], 0, 0, 16, 32);  // int8 in, int16 out
  CHECK(*e.layers[1].cycles == doctest::Approx(12.0));
  check_layer(e.layers[2], 0, 0, 32, 16);
  CHECK(*e.layers[2].cycles == doctest::Approx(12.0));
  // The CPU reads the dequantized float tensor.
  check_layer(e.layers[3], 160, 680, 64, 40);
  CHECK(e.bpu.cycles == doctest::Approx(96.0));
  CHECK(e.quantized);
  check_sums(e);

  const std::string json = perf_report_json(e);
  CHECK(json.find("\"bound\": \"compute\"") != std::string::npos);
  CHECK(json.find("\"us\": 0.960") != std::string::npos);
}

TEST_CASE("bpu perf: a layer of unknown size is left out of the totals and counted") {
  TempDir dir("perf_unknown");
  dir.write("roof.toml", kPlatform);
  Model model = conv_relu_gemm();
  model.graph->find_value("relu_out")->type.reset();
  const PerfEstimate e = estimate(dir, model, {});
  CHECK_FALSE(e.layers[1].activation_write_bytes.has_value());
  CHECK_FALSE(e.layers[1].cycles.has_value());
  CHECK(e.bpu.unknown_nodes == 2);  // relu writes and flatten reads relu_out
  CHECK(e.bpu.cycles == doctest::Approx(120.0));
  CHECK(perf_report_text(e).find("2 nodes of unknown size not counted") != std::string::npos);
}

TEST_CASE("bpu perf: JSON is sorted, deterministic and survives a parse round trip") {
  TempDir dir("perf_json");
  dir.write("roof.toml", kPlatform);
  const PerfEstimate e = estimate(dir, conv_relu_gemm(), {});
  const std::string json = perf_report_json(e);
  CHECK(json == perf_report_json(estimate(dir, conv_relu_gemm(), {})));
  auto parsed = parse_json(json, "model_perf.json");
  REQUIRE_MESSAGE(parsed.has_value(), parsed.status().message());
  CHECK(perf_json_dump(parsed.value()) == json);
  // Keys appear in sorted order in the bytes.
  CHECK(json.find("\"bpu\"") < json.find("\"cpu\""));
  CHECK(json.find("\"layers\"") < json.find("\"model\""));
  const Json& layers = parsed->at("layers");
  REQUIRE(layers.size() == 4);
  CHECK(layers[0].at("cycles").get<double>() == doctest::Approx(120.0));
  CHECK(layers[0].at("bound") == "memory");
  CHECK(layers[3].at("cycles").is_null());
  CHECK(layers[3].at("placement") == "cpu");
  CHECK(parsed->at("bpu").at("us").get<double>() == doctest::Approx(1.84));
  CHECK(json_member(parsed->at("cpu"), "cycles") == nullptr);
}

TEST_CASE("bpu perf: the bpu target's estimate section is the report as JSON and as text") {
  TempDir dir("perf_backend");
  dir.write("roof.toml", kPlatform);
  Options options;
  options.set("platform", std::string("roof"));
  options.set("platform-dir", dir.path.string());
  options.set("run-on-cpu", std::vector<std::string>{});
  options.set("run-on-bpu", std::vector<std::string>{});
  options.set("fuse-activations", true);
  const Model model = conv_relu_gemm();
  auto target = BpuTarget::create(options);
  REQUIRE_MESSAGE(target.has_value(), target.status().message());
  auto section = (*target)->estimate(model, {});
  REQUIRE_MESSAGE(section.has_value(), section.status().message());
  CHECK(section->json == perf_report_json(estimate(dir, model, {})));
  CHECK(section->text == perf_report_text(estimate(dir, model, {})));
}

}  // namespace
}  // namespace qflow
