// Unit tests for port families (compare-calibrators' qparams.<label> inputs) and the metric
// options the resolver checks against a metric's declaration.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "framework/pipeline/component_options.h"
#include "framework/pipeline/pipeline.h"

namespace qflow {

namespace {

ComponentCatalog catalog() {
  std::vector<ComponentInfo> components;
  components.push_back({ComponentKind::Observer, "minmax", "ranges", {}});
  components.push_back({ComponentKind::Calibrator, "max", "max scale", {}});
  components.push_back({ComponentKind::Calibrator, "kl", "kl", {}});
  components.push_back({ComponentKind::Metric, "top1", "top-1",
                        {{"labels", OptionType::String, std::string(), "labels"},
                         {"output", OptionType::Int, int64_t{0}, "output"}}});
  return ComponentCatalog(std::move(components));
}

// Import, data, observe and two calibrators; `compare` is the compare stage's body.
std::string pipeline_text(const std::string& compare) {
  return R"([[stage]]
id = "import"
use = "import-onnx"
options = { path = "m.onnx" }

[[stage]]
id = "data"
use = "load-data"
options = { path = "d.npy" }

[[stage]]
id = "observe"
use = "minmax"
inputs = { model = "import", dataset = "data" }

[[stage]]
id = "a"
use = "max"
inputs = { statistics = "observe" }
output = "a.json"

[[stage]]
id = "b"
use = "kl"
inputs = { statistics = "observe" }
output = "b.json"

[[stage]]
id = "compare"
use = "compare-calibrators"
)" + compare;
}

std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  Expected<Pipeline> pipeline = parse_pipeline(text, "p.toml", sets);
  if (!pipeline) return pipeline.status().message();
  return resolve_pipeline(*pipeline, catalog(), sets).message();
}

}  // namespace

TEST_CASE("port family: dotted keys become qparams.<label> inputs with their producers as dependencies") {
  Expected<Pipeline> pipeline = parse_pipeline(
      pipeline_text("inputs = { model = \"import\", dataset = \"data\", qparams.max = \"a.qparams\", qparams.kl = \"b\" }\n"),
      "p.toml");
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  REQUIRE_MESSAGE(resolve_pipeline(*pipeline, catalog()).is_ok(), resolve_pipeline(*pipeline, catalog()).message());
  const PipelineStage& compare = pipeline->stages.back();
  CHECK(compare.kind == StageKind::CompareCalibrators);
  CHECK(compare.output == "calibrators_compare.json");
  REQUIRE(compare.inputs.count("qparams.max") == 1);
  CHECK(compare.inputs.at("qparams.max").stage == "a");
  CHECK(compare.inputs.at("qparams.kl").port == "qparams");
  CHECK(compare.dependencies == std::vector<std::size_t>{0, 1, 3, 4});
  // The canonical form quotes the dotted port and parses back to the same pipeline.
  const std::string text = format_pipeline(*pipeline);
  CHECK(text.find("\"qparams.kl\" = \"b.qparams\"") != std::string::npos);
  Expected<Pipeline> again = parse_pipeline(text, "p.toml");
  REQUIRE(again.has_value());
  REQUIRE(resolve_pipeline(*again, catalog()).is_ok());
  CHECK(format_pipeline(*again) == text);
}

TEST_CASE("port family: members are type-checked; a family with no member, a bare family name and a bad label fail") {
  CHECK(error_of(pipeline_text("inputs = { model = \"import\", dataset = \"data\", qparams.x = \"observe\" }\n")) ==
        "p.toml:31:60: input 'qparams.x' of stage 'compare' expects qparams, 'observe.statistics' is statistics");
  CHECK(error_of(pipeline_text("inputs = { model = \"import\", dataset = \"data\" }\n")) ==
        "p.toml:29:6: stage 'compare': missing input 'qparams.<label>' (compare-calibrators needs dataset, model and at "
        "least one qparams.<label>)");
  CHECK(error_of(pipeline_text("inputs = { model = \"import\", dataset = \"data\", qparams = \"a\" }\n")) ==
        "p.toml:31:58: stage 'compare': compare-calibrators has no input 'qparams' (inputs: dataset, model, "
        "qparams.<label>)");
  CHECK(error_of(pipeline_text("inputs = { model = \"import\", dataset = \"data\", \"qparams.a b\" = \"a\" }\n")).find(
            "has no input 'qparams.a b'") != std::string::npos);
}

TEST_CASE("compare-calibrators: the metric and its options are checked before anything runs") {
  const std::string ok = pipeline_text("inputs = { model = \"import\", dataset = \"data\", qparams.max = \"a\" }\n");
  CHECK(error_of(ok, {"compare.metric=top1", "compare.metric-options=labels=l.npy,output=0"}).empty());
  CHECK(error_of(ok, {"compare.metric=top2"}) == "stage 'compare': unknown metric 'top2' (metrics: top1)");
  CHECK(error_of(ok, {"compare.metric=top1", "compare.metric-options=label=l.npy"}) ==
        "stage 'compare': metric-options: option 'label' is not declared by metric 'top1'; did you mean 'labels'?");
  CHECK(error_of(ok, {"compare.metric=top1", "compare.metric-options=output=first"}).find(
            "metric-options: option 'output' of metric 'top1'") != std::string::npos);
  CHECK(error_of(ok, {"compare.metric-options=labels=l.npy"}) ==
        "stage 'compare': option 'metric-options' is given without a 'metric'");
}

TEST_CASE("metric options: key=value strings take the declared types") {
  const ComponentInfo info{ComponentKind::Metric, "top1", "", {{"labels", OptionType::String, std::string(), ""},
                                                               {"output", OptionType::Int, int64_t{0}, ""}}};
  Expected<Options> options = parse_component_options(info, {"labels=a=b.npy", "output=2"}, "metric-options");
  REQUIRE(options.has_value());
  CHECK(options->get_string("labels") == "a=b.npy");
  CHECK(options->get_int("output") == 2);
  CHECK(parse_component_options(info, {"labels"}, "metric-options").status().message() == "metric-options: 'labels' is not \"key=value\"");
  CHECK(parse_component_options(info, {"output=1", "output=2"}, "metric-options").status().message() ==
        "metric-options: option 'output' given twice");
}

}  // namespace qflow
