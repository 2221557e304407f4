// The report renderer and its parsers: escaping of model names, the targets' check and
// estimate sections, the verify result, thresholds, and byte-identical output for equal input.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "framework/report/report.h"

using namespace qflow;
using namespace qflow::report;

namespace {

// The bpu target's check and estimate sections, cut down (docs/targets.md).
const char* kCheckJson = R"({"format": "qflow-bpu-check", "target": "bpu", "accelerator": "bpu", "fallback": "cpu",
    "model": "m", "platform": "nash", "nodes": [
      {"index": 0, "name": "conv<a>", "op_type": "Conv", "placement": "bpu", "subgraph": 0, "reason": ""},
      {"index": 1, "name": "/top/Sin", "op_type": "Sin", "placement": "cpu", "subgraph": null,
       "reason": "op type Sin has no BPU form"}],
    "subgraphs": [{"id": 0, "nodes": [0]}]})";

const char* kPerfJson = R"({"format": "qflow-bpu-perf", "target": "bpu", "accelerator": "bpu", "fallback": "cpu",
    "model": "m", "platform": {"name": "nash"},
    "layers": [
      {"index": 0, "name": "conv<a>", "op_type": "Conv", "placement": "bpu", "subgraph": 0, "macs": 100,
       "cycles": 1.5, "bound": "memory"},
      {"index": 1, "name": "/top/Sin", "op_type": "Sin", "placement": "cpu", "subgraph": null, "macs": 0,
       "cycles": null, "bound": null}],
    "subgraphs": [{"id": 0, "nodes": 1, "macs": 100, "cycles": 1.5, "us": 0.002}],
    "bpu": {"nodes": 1, "macs": 100, "cycles": 1.5, "us": 0.002},
    "cpu": {"nodes": 1, "macs": 0}})";

ReportInput sample_input() {
  ReportInput input;
  input.title = "t <b>&";
  input.stages.push_back({"import", "import-onnx", "import-onnx", "m_original_float_model.onnx", 1234, 0.5});
  input.placement = *parse_check(kCheckJson);
  input.perf = *parse_perf(kPerfJson);
  input.verify = *parse_verify(R"({"samples": 4, "bit_identical": true, "roles": ["bc", "hbm"],
      "outputs": [{"name": "y\"<", "elements": 10,
      "bc_cosine_mean": 0.99, "bc_cosine_min": 0.98, "bc_max_abs_error": 0.1, "hbm_cosine_mean": 0.99,
      "hbm_cosine_min": 0.98, "hbm_max_abs_error": 0.1, "exact_matches": 40, "compared": 40}]})");
  input.sensitivity = *parse_sensitivity(R"({"samples": 4, "nodes": 2, "ranking": [
      {"node": "c<1>", "op_type": "Conv", "weight_cosine": 0.9912345, "activation_cosine": 0.998},
      {"node": "r", "op_type": "Relu", "weight_cosine": null, "activation_cosine": 0.9995}], "skipped": []})");
  LayerComparison comparison;
  comparison.samples = 4;
  LayerRow row;
  row.tensor = "x<script>alert(1)</script>";
  row.op_type = "Conv";
  row.accumulated.cosine = 0.95;
  row.accumulated.sqnr_db = 12.0;
  comparison.rows.push_back(row);
  input.comparison = comparison;
  Histogram h;
  h.tensor = row.tensor;
  h.range = 4.0;
  h.counts = {10, 5, 0, 1};
  h.max = 4.0;
  h.thresholds.push_back({"kl (chosen)", 2.5, true});
  input.histograms.push_back(h);
  return input;
}

}  // namespace

TEST_CASE("html_escape escapes markup and quotes") {
  CHECK(html_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
}

TEST_CASE("parse_check reads the placement names, the nodes, the subgraphs and the summary") {
  Expected<Placement> p = parse_check(kCheckJson);
  REQUIRE(p);
  CHECK(p->accelerator == "BPU");
  CHECK(p->fallback == "CPU");
  REQUIRE(p->nodes.size() == 2);
  CHECK(p->nodes[0].node == "conv<a>");
  CHECK(p->nodes[0].placement == "BPU");
  CHECK(p->nodes[0].subgraph == "0");
  CHECK(p->nodes[1].placement == "CPU");
  CHECK(p->nodes[1].subgraph == "");
  CHECK(p->nodes[1].reason == "op type Sin has no BPU form");
  CHECK(p->subgraphs == std::vector<std::string>{"0: 1 nodes"});
  REQUIRE(p->summary.size() == 2);
  CHECK(p->summary[0].second == "2 (BPU 1, CPU 1)");
  CHECK_FALSE(parse_check("index  node  op type"));                        // the text form is not read
  CHECK_FALSE(parse_check(R"({"accelerator": "bpu"})"));                    // no nodes
  CHECK_FALSE(parse_check(R"({"nodes": []})"));                             // no accelerator
}

TEST_CASE("parse_check labels another target's paths with its own names") {
  Expected<Placement> p = parse_check(R"({"target": "onnxruntime", "accelerator": "int8", "fallback": "float",
      "nodes": [{"index": 0, "name": "a", "op_type": "Conv", "placement": "int8", "reason": ""},
                {"index": 1, "name": "b", "op_type": "Softmax", "placement": "float", "reason": "no int8 kernel"}]})");
  REQUIRE(p);
  CHECK(p->summary[0].second == "2 (INT8 1, FLOAT 1)");
  ReportInput input;
  input.placement = *p;
  const std::string md = render_markdown(input);
  CHECK(md.find("| nodes on INT8 / FLOAT | 1 / 1 |") != std::string::npos);
  CHECK(md.find("BPU") == std::string::npos);
  const std::string html = render_html(input);
  CHECK(html.find("Nodes off the INT8") != std::string::npos);
  CHECK(html.find("BPU") == std::string::npos);
}

TEST_CASE("parse_perf keeps timed nodes, the subgraphs and the totals under the placement names") {
  Expected<Perf> p = parse_perf(kPerfJson);
  REQUIRE(p);
  CHECK(p->accelerator == "BPU");
  REQUIRE(p->slowest.size() == 1);
  CHECK(p->slowest[0].node == "conv<a>");
  CHECK(p->slowest[0].cycles == doctest::Approx(1.5));
  CHECK(p->slowest[0].bound == "memory");
  REQUIRE(p->totals.size() == 2);
  CHECK(p->totals[0].first == "BPU");
  CHECK(p->totals[0].second == "MACs 100, 1.500 cycles = 0.002 us");
  CHECK(p->totals[1].first == "CPU");
  CHECK(p->subgraphs.size() == 1);
  CHECK_FALSE(parse_perf(R"({"accelerator": "bpu"})"));  // no layers
}

TEST_CASE("parse_verify reads each file's figures under its role") {
  Expected<Verify> v = parse_verify(R"({"samples": 2, "bit_identical": false, "roles": ["sim", "dev"],
      "outputs": [{"name": "y", "elements": 3, "sim_cosine_mean": 0.5, "sim_cosine_min": 0.25,
                   "sim_max_abs_error": 2, "dev_cosine_mean": 0.75, "dev_cosine_min": 0.125,
                   "dev_max_abs_error": 4, "exact_matches": 5, "compared": 6}]})");
  REQUIRE(v);
  CHECK(v->roles == std::vector<std::string>{"sim", "dev"});
  REQUIRE(v->outputs.size() == 1);
  REQUIRE(v->outputs[0].files.size() == 2);
  CHECK(v->outputs[0].files[0].cosine_min == doctest::Approx(0.25));
  CHECK(v->outputs[0].files[1].max_abs_error == doctest::Approx(4.0));
  CHECK(v->outputs[0].exact_matches == 5);
  ReportInput input;
  input.verify = *v;
  const std::string md = render_markdown(input);
  CHECK(md.find("| dev bit-identical to sim | no |") != std::string::npos);
  CHECK(md.find("| y | 3 | 0.500000 | 0.250000 | 2 | 0.750000 | 0.125000 | 4 | 5 / 6 |") != std::string::npos);
  CHECK_FALSE(parse_verify(R"({"samples": 2, "outputs": []})"));  // no roles
}

TEST_CASE("parse_precision names the classifier outputs the cosine compared through their logits") {
  Expected<Precision> p = parse_precision(R"({"target": {"kind": "cosine", "classifier_outputs": ["prob"],
      "threshold": 0.999}, "samples": 16, "before": 0.75, "after": 0.9995, "quantized_tensors": 10,
      "raised_tensors": 4, "changes": []})");
  REQUIRE(p);
  CHECK(p->classifier_outputs == std::vector<std::string>{"prob"});
  ReportInput input;
  input.precision = *p;
  CHECK(render_markdown(input).find("cosine (classifier output prob compared through the logits) 0.750000") !=
        std::string::npos);
  Expected<Precision> plain = parse_precision(R"({"target": {"kind": "cosine", "threshold": 0.999}, "changes": []})");
  REQUIRE(plain);
  CHECK(plain->classifier_outputs.empty());
}

TEST_CASE("histogram_percentile interpolates inside the bin") {
  CHECK(histogram_percentile({10, 10}, 2.0, 50.0) == doctest::Approx(1.0));
  CHECK(histogram_percentile({10, 10}, 2.0, 75.0) == doctest::Approx(1.5));
  CHECK(histogram_percentile({10, 0}, 2.0, 100.0) == doctest::Approx(1.0));
  CHECK(histogram_percentile({}, 2.0, 50.0) == 0.0);
}

TEST_CASE("render_html escapes every name, needs nothing outside the file and is deterministic") {
  const ReportInput input = sample_input();
  const std::string html = render_html(input);
  CHECK(html == render_html(input));
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("x&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(html.find("conv&lt;a&gt;") != std::string::npos);
  CHECK(html.find("<title>t &lt;b&gt;&amp;</title>") != std::string::npos);
  CHECK(html.find("y&quot;&lt;") != std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  for (const char* id : {"summary", "stages", "placement", "layers", "histograms", "sensitivity", "verify", "perf"})
    CHECK(html.find("<section id=\"" + std::string(id) + "\">") != std::string::npos);
  // The sensitivity ranking: most sensitive first, names escaped, a missing weight cosine as '-'.
  const std::size_t conv = html.find("<code>c&lt;1&gt;</code>");
  REQUIRE(conv != std::string::npos);
  CHECK(conv < html.find("<code>r</code>"));
  CHECK(html.find("0.991235", conv) != std::string::npos);
}

TEST_CASE("render_markdown has the same sections as tables, with table characters escaped") {
  ReportInput input = sample_input();
  input.comparison->rows[0].tensor = "a|b";
  const std::string md = render_markdown(input);
  CHECK(md == render_markdown(input));
  for (const char* heading : {"## Summary", "## Stages", "## Placement", "## Per-layer error", "## Histograms",
                              "## Sensitivity", "## Verify",
                              "## Performance estimate"})
    CHECK(md.find(heading) != std::string::npos);
  CHECK(md.find("a\\|b") != std::string::npos);
  CHECK(md.find("| import | import-onnx |") != std::string::npos);
}
