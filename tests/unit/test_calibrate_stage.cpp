// Unit tests for the host side of calibrator stages: per-tensor specs, quantize = false
// filtering, the calibration table JSON, and the services (other calibrators, output cosine).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "framework/core/sha256.h"
#include "framework/data/input_feeds.h"
#include "framework/data/npy.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/stage_util.h"
#include "framework/plugin/component_registry.h"
#include "framework/quant/calibration_services.h"
#include "framework/quant/output_cosine.h"
#include "framework/quant/qdq_builder.h"
#include "framework/interpreter/executor.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

const std::string kModel = std::string(QFLOW_SOURCE_DIR) + "/models/sample/sample_cnn.onnx";
const std::string kData = std::string(QFLOW_SOURCE_DIR) + "/models/sample/input.npy";

TensorStatistics range(double lo, double hi) {
  TensorStatistics s;
  s.count = 10;
  s.min = lo;
  s.max = hi;
  return s;
}

// x -> Conv -> c -> Relu -> r (output).
std::string small_model() {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "small";
  Value* x = g.get_or_create_value("x");
  ValueType t;
  t.dtype = DType::Float32;
  t.shape = std::vector<Dim>{Dim{1, "", ""}, Dim{1, "", ""}, Dim{2, "", ""}, Dim{2, "", ""}};
  x->type = t;
  g.inputs.push_back(x);
  Value* w = g.get_or_create_value("w");
  g.set_initializer(w, Tensor::from_vector<float>({2, 1, 1, 1}, {1.0f, -0.5f}));
  Value* c = g.get_or_create_value("c");
  Value* r = g.get_or_create_value("r");
  g.add_node("Conv", {x, w}, {c}, "conv");
  g.add_node("Relu", {c}, {r}, "relu");
  t.shape = std::vector<Dim>{Dim{1, "", ""}, Dim{2, "", ""}, Dim{2, "", ""}, Dim{2, "", ""}};
  r->type = t;
  g.outputs.push_back(r);
  auto bytes = export_onnx_bytes(model);
  REQUIRE(bytes.has_value());
  return *bytes;
}

const ComponentRegistry& registry() {
  static ComponentRegistry* instance = [] {
    auto* r = new ComponentRegistry();
    const Status loaded = r->load_default_locations();
    REQUIRE_MESSAGE(loaded.is_ok(), loaded.message());
    return r;
  }();
  return *instance;
}

PipelineStage calibrator_stage(const std::string& component) {
  PipelineStage stage;
  stage.id = "calibrate";
  stage.kind = StageKind::Calibrator;
  stage.component = component;
  stage.output_type = ArtifactType::QParams;
  return stage;
}

// Per-tensor ranges of every float value of the sample model over the sample inputs.
QuantTable observed_table(const Model& model, const Dataset& dataset, DType dtype, double widen) {
  std::map<std::string, TensorStatistics> stats;
  auto note = [&](const std::string& name, const Tensor& t) {
    TensorStatistics& s = stats[name];
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = t.data<float>()[i];
      s.min = std::min(s.min, v);
      s.max = std::max(s.max, v);
      ++s.count;
    }
  };
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  const Value* input = model.graph->runtime_inputs().at(0);
  const Shape shape = feed_shape(*input, dataset.first().sample_shape);
  REQUIRE(for_each_sample(dataset, [&](int64_t, const std::vector<Tensor>& samples) -> Status {
            const Tensor& sample = samples.at(0);
            note(input->name(), sample);
            return (*executor)->run({{input->name(), sample.reshaped(shape)}}, [&](const Value& v, const Tensor& t) {
              if (t.dtype() == DType::Float32) note(v.name(), t);
              return Status::ok();
            }).status();
          }).is_ok());
  QuantSpec spec;
  spec.activation_dtype = dtype;
  QuantTable table;
  for (const auto& [name, s] : stats) {
    auto q = activation_params(spec, s, widen * std::max(std::fabs(s.min), std::fabs(s.max)), "test", name);
    REQUIRE(q.has_value());
    table[name] = *q;
  }
  return table;
}

}  // namespace

TEST_CASE("calibrate stage: each tensor takes its producer's spec, inputs the model's") {
  auto model = import_onnx_bytes(small_model(), "small");
  REQUIRE(model.has_value());
  QuantConfig config;
  config.model.symmetric = false;
  config.op_types["Conv"].activation_dtype = DType::Int16;
  config.nodes["relu"].quantize = false;
  const std::map<std::string, TensorStatistics> stats = {
      {"x", range(-1, 1)}, {"c", range(-2, 2)}, {"r", range(0, 2)}, {"ghost", range(0, 1)}};
  const auto specs = tensor_specs(&*model, stats, &config);
  REQUIRE(specs.size() == 4);
  CHECK(specs.at("x").activation_dtype == DType::Int8);
  CHECK_FALSE(specs.at("x").symmetric);
  CHECK(specs.at("c").activation_dtype == DType::Int16);
  CHECK_FALSE(specs.at("c").symmetric);
  CHECK_FALSE(specs.at("r").quantize);
  CHECK(specs.at("ghost").quantize);  // not in the model: the whole model's settings
  const auto without_model = tensor_specs(nullptr, stats, &config);
  CHECK(without_model.at("c").activation_dtype == DType::Int8);
  CHECK(tensor_specs(&*model, stats, nullptr).at("c").activation_dtype == DType::Int8);
}

TEST_CASE("calibrate stage: tensors left float are not calibrated; the table lists min and max") {
  REQUIRE(registry().find(ComponentKind::Calibrator, "max") != nullptr);
  Artifact model;
  model.bytes = small_model();
  Artifact statistics;
  statistics.type = ArtifactType::Statistics;
  statistics.statistics = std::make_shared<const std::map<std::string, TensorStatistics>>(
      std::map<std::string, TensorStatistics>{{"x", range(-1, 0.5)}, {"c", range(-2, 1.5)}, {"r", range(0, 1.5)}});
  QuantConfig config;
  config.nodes["relu"].quantize = false;
  StageContext context;
  context.quantization = &config;
  auto result = run_calibrator(calibrator_stage("max"), {{"model", &model}, {"statistics", &statistics}}, registry(), context);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  const QuantTable& table = *result->artifact.qparams;
  CHECK(table.size() == 2);
  CHECK(table.count("x") == 1);
  CHECK(table.count("c") == 1);
  CHECK(table.count("r") == 0);
  CHECK(table.at("c").scale[0] == static_cast<float>(2.0 / 127.0));
  CHECK_FALSE(result->calibration.has_value());  // max reports nothing

  const std::string& json = result->artifact.bytes;
  CHECK(json.find("\"r\"") == std::string::npos);
  const std::size_t c = json.find("\"c\": {");
  REQUIRE(c != std::string::npos);
  std::size_t last = c;
  for (const char* key : {"\"axis\"", "\"dtype\"", "\"max\": 1.5", "\"method\"", "\"min\": -2", "\"scale\"", "\"threshold\"",
                          "\"zero_point\""}) {
    CAPTURE(key);
    const std::size_t at = json.find(key, c);
    REQUIRE(at != std::string::npos);
    CHECK(at > last);
    last = at;
  }

  // Without a [quantization] table every observed tensor is calibrated.
  auto all = run_calibrator(calibrator_stage("max"), {{"model", &model}, {"statistics", &statistics}}, registry(), {});
  REQUIRE(all.has_value());
  CHECK(all->artifact.qparams->size() == 3);

  // A tensor the model does not have is an error naming it.
  Artifact stray = statistics;
  stray.statistics = std::make_shared<const std::map<std::string, TensorStatistics>>(
      std::map<std::string, TensorStatistics>{{"x", range(-1, 1)}, {"elsewhere", range(-1, 1)}});
  auto refused = run_calibrator(calibrator_stage("max"), {{"model", &model}, {"statistics", &stray}}, registry(), {});
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message() ==
        "stage 'calibrate': calibrator 'max' returned tensor 'elsewhere', which is not in the model");
}

TEST_CASE("calibrate stage: services make other calibrators with checked options") {
  auto dataset = open_dataset(DataSpec{kData});
  REQUIRE(dataset.has_value());
  auto imported = import_onnx_file(kModel);
  REQUIRE(imported.has_value());
  auto model_bytes = export_onnx_bytes(*imported);
  REQUIRE(model_bytes.has_value());
  auto evaluator = OutputCosine::create(*model_bytes, *dataset, nullptr, 1);
  REQUIRE(evaluator.has_value());
  HostCalibrationServices services(registry(), std::move(*evaluator));
  auto made = services.make_calibrator("max", Options{});
  REQUIRE_MESSAGE(made.has_value(), made.status().message());
  Options bad;
  bad.set("bogus", true);
  auto refused = services.make_calibrator("max", bad);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message().find("bogus") != std::string::npos);
  CHECK_FALSE(services.make_calibrator("no-such-calibrator", Options{}).has_value());

  // A model the dataset cannot feed only fails output_cosine, and says why.
  HostCalibrationServices broken(registry(), OutputCosine::create(std::string(), *dataset, nullptr, 1));
  CHECK(broken.make_calibrator("max", Options{}).has_value());
  auto no_cosine = broken.output_cosine(QuantTable{}, 0);
  REQUIRE_FALSE(no_cosine.has_value());
  CHECK(no_cosine.status().message().find("output cosine") != std::string::npos);
}

TEST_CASE("calibrate stage: output cosine is ~1 for fine scales, lower for coarse ones, thread-independent") {
  auto dataset = open_dataset(DataSpec{kData});
  REQUIRE(dataset.has_value());
  REQUIRE(dataset->count == 4);
  auto imported = import_onnx_file(kModel);
  REQUIRE(imported.has_value());
  auto bytes = export_onnx_bytes(*imported);
  REQUIRE(bytes.has_value());
  auto one = OutputCosine::create(*bytes, *dataset, nullptr, 1);
  auto three = OutputCosine::create(*bytes, *dataset, nullptr, 3);
  REQUIRE(one.has_value());
  REQUIRE(three.has_value());

  const QuantTable fine = observed_table(*imported, *dataset, DType::Int16, 1.0);
  const QuantTable int8 = observed_table(*imported, *dataset, DType::Int8, 1.0);
  const QuantTable coarse = observed_table(*imported, *dataset, DType::Int8, 16.0);
  auto c_fine = (*one)->evaluate(fine);
  auto c_int8 = (*one)->evaluate(int8);
  auto c_coarse = (*one)->evaluate(coarse);
  REQUIRE_MESSAGE(c_fine.has_value(), c_fine.status().message());
  REQUIRE_MESSAGE(c_int8.has_value(), c_int8.status().message());
  REQUIRE_MESSAGE(c_coarse.has_value(), c_coarse.status().message());
  MESSAGE("output cosine: int16 " << *c_fine << ", int8 " << *c_int8 << ", int8 x16 threshold " << *c_coarse);
  CHECK(*c_fine == doctest::Approx(1.0).epsilon(1e-4));
  CHECK(*c_fine <= 1.0 + 1e-12);
  CHECK(*c_int8 < *c_fine);
  CHECK(*c_coarse < *c_int8);

  // Same numbers from three threads, and from a second call (cached float outputs).
  auto t_int8 = (*three)->evaluate(int8);
  auto t_coarse = (*three)->evaluate(coarse);
  REQUIRE(t_int8.has_value());
  REQUIRE(t_coarse.has_value());
  CHECK(*t_int8 == *c_int8);
  CHECK(*t_coarse == *c_coarse);
  CHECK(*(*one)->evaluate(int8) == *c_int8);

  // The first N samples: what an evaluator made on those N alone gives; N >= 4 is all.
  DataSpec first_two{kData};
  first_two.limit = 2;
  auto two_samples = open_dataset(first_two);
  REQUIRE(two_samples.has_value());
  auto on_two = OutputCosine::create(*bytes, *two_samples, nullptr, 1);
  REQUIRE(on_two.has_value());
  const auto limited = (*three)->evaluate(coarse, 2);
  REQUIRE(limited.has_value());
  CHECK(*limited == *(*on_two)->evaluate(coarse));
  CHECK(*limited != *c_coarse);
  CHECK(*(*three)->evaluate(coarse, 4) == *c_coarse);
  CHECK(*(*three)->evaluate(coarse, 9) == *c_coarse);
}

}  // namespace qflow

namespace qflow {

// The observer stage hands its runs' outputs on (Artifact::outputs); the output cosine takes
// them in place of its own float runs only when they are of its model bytes and dataset.
TEST_CASE("calibrate stage: output cosine takes the observed float outputs of its own model and samples only") {
  auto opened = open_dataset(DataSpec{kData});
  REQUIRE(opened.has_value());
  const auto dataset = std::make_shared<const Dataset>(std::move(*opened));
  auto classifier = import_onnx_file(kModel);
  REQUIRE(classifier.has_value());
  // The sample's logits as its output: a classifier's probabilities are compared through
  // logits that outputs handed on do not hold (checked at the end).
  Model logits_model = classifier->copy();
  {
    Graph& g = *logits_model.graph;
    Node* softmax = g.outputs[0]->producer();
    REQUIRE(softmax->op_type() == "Softmax");
    g.outputs = {softmax->inputs()[0]};
    g.remove_node(softmax);
    g.prune_unused_values();
  }
  auto bytes = export_onnx_bytes(logits_model);
  REQUIRE(bytes.has_value());
  const QuantTable int8 = observed_table(logits_model, *dataset, DType::Int8, 1.0);
  auto plain = OutputCosine::create(*bytes, *dataset, nullptr, 1);
  REQUIRE(plain.has_value());
  auto expected = (*plain)->evaluate(int8);
  REQUIRE(expected.has_value());

  // The float outputs as an observer's run gives them: with a value hook, node by node.
  auto model = import_onnx_bytes(*bytes, "float model");
  REQUIRE(model.has_value());
  auto executor = Executor::create(*model);
  REQUIRE(executor.has_value());
  auto binding = bind_inputs(*model->graph, *dataset);
  REQUIRE(binding.has_value());
  auto observed = std::make_shared<FloatOutputs>();
  observed->dataset = dataset;
  observed->model_sha256 = sha256_hex(*bytes);
  REQUIRE(for_each_feed_in(*dataset, *binding, 0, dataset->count, [&](int64_t, const Feeds& feeds) -> Status {
            auto outputs = (*executor)->run(feeds, [](const Value&, const Tensor&) { return Status::ok(); });
            if (!outputs) return outputs.status();
            std::vector<Tensor> ordered;
            for (const Value* out : model->graph->outputs) ordered.push_back(outputs->at(out->name()));
            observed->samples.push_back(flatten_sample_outputs(ordered));
            return Status::ok();
          }).is_ok());
  auto reused = OutputCosine::create(*bytes, *dataset, nullptr, 1, observed);
  REQUIRE(reused.has_value());
  CHECK(*(*reused)->evaluate(int8) == *expected);

  // Outputs that are not the float model's change the score when taken, and are not taken
  // for other model bytes or another dataset.
  auto wrong = std::make_shared<FloatOutputs>(*observed);
  for (std::vector<float>& sample : wrong->samples)
    for (float& v : sample) v = -v;
  auto taken = OutputCosine::create(*bytes, *dataset, nullptr, 1, wrong);
  REQUIRE(taken.has_value());
  CHECK(*(*taken)->evaluate(int8) != *expected);
  auto other_model = std::make_shared<FloatOutputs>(*wrong);
  other_model->model_sha256 = sha256_hex("other bytes");
  auto other_dataset = std::make_shared<FloatOutputs>(*wrong);
  other_dataset->dataset = std::make_shared<const Dataset>(*dataset);
  for (const auto& known : {other_model, other_dataset}) {
    auto ignored = OutputCosine::create(*bytes, *dataset, nullptr, 1, known);
    REQUIRE(ignored.has_value());
    CHECK(*(*ignored)->evaluate(int8) == *expected);
  }

  // The classifier's own outputs, even of its bytes and dataset, are not taken.
  auto classifier_bytes = export_onnx_bytes(*classifier);
  REQUIRE(classifier_bytes.has_value());
  const QuantTable classifier_int8 = observed_table(*classifier, *dataset, DType::Int8, 1.0);
  auto classifier_plain = OutputCosine::create(*classifier_bytes, *dataset, nullptr, 1);
  REQUIRE(classifier_plain.has_value());
  auto classifier_expected = (*classifier_plain)->evaluate(classifier_int8);
  REQUIRE(classifier_expected.has_value());
  auto negated = std::make_shared<FloatOutputs>();
  negated->dataset = dataset;
  negated->model_sha256 = sha256_hex(*classifier_bytes);
  negated->samples.assign(static_cast<std::size_t>(dataset->count), std::vector<float>(10, -1.0f));
  auto not_taken = OutputCosine::create(*classifier_bytes, *dataset, nullptr, 1, negated);
  REQUIRE(not_taken.has_value());
  CHECK(*(*not_taken)->evaluate(classifier_int8) == *classifier_expected);
}

}  // namespace qflow
