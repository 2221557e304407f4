// Passes that read calibration samples: validation of their stage's dataset input, and the
// samples a pass stage hands its passes (framework/pipeline/pass_samples.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/pass_samples.h"
#include "framework/pipeline/pipeline.h"

namespace qflow {

namespace {

ComponentCatalog catalog() {
  std::vector<ComponentInfo> components;
  ComponentInfo reads;
  reads.kind = ComponentKind::Pass;
  reads.name = "learn-rounding";
  reads.summary = "reads samples";
  reads.needs_samples = true;
  components.push_back(reads);
  components.push_back({ComponentKind::Pass, "dead-code-elimination", "dce", {}});
  return ComponentCatalog(std::move(components));
}

std::string pipeline_text(const std::string& use, const std::string& inputs) {
  return R"([[stage]]
id = "import"
use = "import-onnx"
options = { path = "m.onnx" }

[[stage]]
id = "data"
use = "load-data"
options = { path = "d.npy" }

[[stage]]
id = "round"
)" + use + "\ninputs = " + inputs + "\n";
}

std::string resolve_error(const std::string& text) {
  Expected<Pipeline> pipeline = parse_pipeline(text, "p.toml");
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  return resolve_pipeline(*pipeline, catalog()).message();
}

}  // namespace

TEST_CASE("pass samples: a pass that reads samples needs a dataset input on its stage") {
  const std::string expected =
      "p.toml:13:7: stage 'round': pass 'learn-rounding' reads calibration samples, and the stage has no 'dataset' "
      "input (inputs = { model = ..., dataset = \"<load-data stage>.dataset\" })";
  CHECK(resolve_error(pipeline_text("use = \"learn-rounding\"", "{ model = \"import.model\" }")) == expected);
  CHECK(resolve_error(pipeline_text("use = \"passes\"\noptions = { passes = \"dead-code-elimination,learn-rounding\" }",
                                    "{ model = \"import.model\" }")) ==
        "p.toml:13:7: stage 'round': pass 'learn-rounding' reads calibration samples, and the stage has no 'dataset' "
        "input (inputs = { model = ..., dataset = \"<load-data stage>.dataset\" })");
  CHECK(resolve_error(pipeline_text("use = \"learn-rounding\"", "{ model = \"import.model\", dataset = \"data.dataset\" }")).empty());
  // Passes that read nothing run without samples, as before.
  CHECK(resolve_error(pipeline_text("use = \"dead-code-elimination\"", "{ model = \"import.model\" }")).empty());
}

namespace {

const std::string kFashionDir = std::string(QFLOW_SOURCE_DIR) + "/models/fashion_mnist/";

Expected<Model> fashion_model() {
  auto model = import_onnx_file(kFashionDir + "fashion_mnist.onnx");
  REQUIRE_MESSAGE(model.has_value(), model.status().message());
  return model;
}

// The first `limit` calibration samples of the Fashion-MNIST fixture.
Dataset fashion_samples(int64_t limit) {
  DataSpec spec;
  spec.path = kFashionDir + "calib_200.npy";
  spec.limit = limit;
  auto dataset = open_dataset(spec);
  REQUIRE(dataset.has_value());
  return std::move(*dataset);
}

}  // namespace

TEST_CASE("pass samples: samples are the model's feeds, one at a time, in dataset order") {
  auto model = fashion_model();
  const Dataset dataset = fashion_samples(3);
  const DatasetPassSamples samples_of_model(dataset, *model);
  const DatasetPassSamples* samples = &samples_of_model;
  CHECK(samples->count() == 3);
  const std::string input = model->graph->runtime_inputs().front()->name();
  auto first = samples->sample(0);
  auto last = samples->sample(2);
  REQUIRE(first.has_value());
  REQUIRE(last.has_value());
  REQUIRE(first->count(input) == 1);
  CHECK(first->at(input).dim(0) == 1);  // fed with the model's batch axis
  CHECK(first->at(input).numel() == 28 * 28);
  std::vector<float> a(first->at(input).data<float>(), first->at(input).data<float>() + 784);
  std::vector<float> b(last->at(input).data<float>(), last->at(input).data<float>() + 784);
  CHECK(a != b);
  CHECK(samples->sample(3).status().message() == "sample 3 is out of range (3 samples)");
}

TEST_CASE("pass samples: feeds follow the inputs of the model as a pass finds it") {
  auto model = fashion_model();
  const Dataset dataset = fashion_samples(2);
  const DatasetPassSamples samples(dataset, *model);
  // An earlier pass of the list renames the only input: the next pass's samples feed the new name.
  Graph& graph = *model->graph;
  Value* input = graph.runtime_inputs().front();
  const std::string before = input->name();
  Value* renamed = graph.get_or_create_value("renamed_input");
  renamed->type = input->type;
  graph.replace_all_uses(input, renamed);
  std::replace(graph.inputs.begin(), graph.inputs.end(), input, renamed);
  auto first = samples.sample(0);
  REQUIRE_MESSAGE(first.has_value(), first.status().message());
  CHECK(first->count("renamed_input") == 1);
  CHECK(first->count(before) == 0);
}

}  // namespace qflow
