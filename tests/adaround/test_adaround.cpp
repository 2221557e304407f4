// AdaRound on the Fashion-MNIST fixture: lower layer reconstruction error than round-to-nearest,
// byte-identical runs, and weights the QDQ builder's round-to-nearest reproduces exactly.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "adaround_pass.h"
#include "framework/data/dataset.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/pass_samples.h"
#include "framework/quant/qdq_builder.h"
#include "layer_inputs.h"

using namespace qflow;

namespace {

const std::string kDir = std::string(QFLOW_SOURCE_DIR) + "/models/fashion_mnist/";

Model fixture() {
  auto model = import_onnx_file(kDir + "fashion_mnist.onnx");
  REQUIRE_MESSAGE(model.has_value(), model.status().message());
  return std::move(*model);
}

Dataset calibration(int64_t limit) {
  DataSpec spec;
  spec.path = kDir + "calib_200.npy";
  spec.limit = limit;
  auto dataset = open_dataset(spec);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  return std::move(*dataset);
}

Options adaround_options(int64_t iterations, int64_t samples, double min_vectors = 0.0) {
  Options options;
  for (const OptionSpec& spec : AdaRound::info().options) options.set(spec.name, spec.default_value);
  options.set("iterations", iterations);
  options.set("samples", samples);
  options.set("min-vectors", min_vectors);
  return options;
}

// Runs the pass on a copy of `model` under 4-bit weights, every layer rounded however few its
// input vectors; returns the rewritten model and the pass's counters.
Model rounded(const Model& model, const Dataset& dataset, int64_t iterations, int64_t samples,
              double min_vectors = 0.0, std::map<std::string, int64_t>* counters = nullptr) {
  Model copy = model.copy();
  const DatasetPassSamples fed(dataset, copy);
  QuantConfig config;
  config.model.weight_bits = 4;
  PassContext context;
  context.samples = &fed;
  context.quantization = &config;
  auto pass = AdaRound::create(adaround_options(iterations, samples, min_vectors));
  REQUIRE(pass.has_value());
  auto result = (*pass)->run(copy, context);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->counters.at("layers-rounded") > 0);
  CHECK(result->counters.at("weights-rounded-away") > 0);
  if (counters) *counters = result->counters;
  return copy;
}

// The layer's rounding problem on the 4-bit per-channel grid, without its input statistics.
adaround::LayerProblem four_bit_problem(const Graph& graph, const adaround::Layer& layer) {
  adaround::LayerProblem problem;
  problem.weight = adaround::weight_matrix(graph, layer);
  problem.qmax = 7.0;
  for (Eigen::Index r = 0; r < problem.weight.rows(); ++r) {
    problem.scale.push_back(static_cast<float>(problem.weight.row(r).cwiseAbs().maxCoeff() / 7.0));
    problem.group_of.push_back(r / (problem.weight.rows() / layer.groups));
  }
  return problem;
}

}  // namespace

TEST_CASE("adaround: lower reconstruction error than round-to-nearest on every fixture layer at 4 bits") {
  const Model model = fixture();
  const Dataset dataset = calibration(32);
  const DatasetPassSamples samples(dataset, model);
  auto layers = adaround::find_layers(*model.graph);
  REQUIRE(layers.has_value());
  REQUIRE(layers->size() >= 2);
  REQUIRE(adaround::collect_grams(model, samples, 32, *layers).is_ok());
  adaround::SoftRoundingOptions options;
  options.iterations = 200;
  for (const adaround::Layer& layer : *layers) {
    adaround::LayerProblem problem = four_bit_problem(*model.graph, layer);
    problem.grams = layer.grams;
    const double nearest = adaround::reconstruction_error(problem, adaround::nearest_integers(problem));
    const double learned = adaround::reconstruction_error(problem, adaround::learned_integers(problem, options));
    INFO(layer.node->op_type() << " '" << layer.node->name() << "': nearest " << nearest << ", adaround " << learned);
    CHECK(learned < nearest);
  }
}

TEST_CASE("adaround: rounded inputs carry the earlier layers' rounding, and fitting on them lowers the float-output error") {
  Model model = fixture();
  const Dataset dataset = calibration(32);
  const DatasetPassSamples samples(dataset, model);
  auto layers = adaround::find_layers(*model.graph);
  REQUIRE(layers.has_value());
  REQUIRE(layers->size() >= 2);
  adaround::SoftRoundingOptions options;
  options.iterations = 200;
  std::vector<std::string> checked;
  double gain = 0.0;  // summed error of the float-input fit minus the rounded-input fit's
  const auto round = [&](adaround::Layer& layer) -> Status {
    adaround::LayerProblem problem = four_bit_problem(*model.graph, layer);
    problem.grams = layer.grams;
    problem.cross = layer.cross;
    REQUIRE(problem.cross.size() == problem.grams.size());
    const bool first = checked.empty();
    checked.push_back(layer.node->name());
    double largest_gap = 0.0;
    for (std::size_t g = 0; g < problem.grams.size(); ++g)
      largest_gap = std::max(largest_gap, (problem.cross[g] - problem.grams[g]).cwiseAbs().maxCoeff());
    INFO(layer.node->name() << ": largest |cross - gram| " << largest_gap);
    // The first layer reads the model input, the same in both models; later ones read what the
    // rounded layers before them computed.
    if (first) CHECK(largest_gap == 0.0);
    else CHECK(largest_gap > 0.0);
    // The rounding fitted on these inputs against the one fitted on float inputs (cross taken
    // as the gram), under the error that counts: the rounded model's against the float output.
    // Both are found by the same heuristic descent, so the comparison is over all layers.
    adaround::LayerProblem float_fit = problem;
    float_fit.cross.clear();
    const adaround::Matrix learned = adaround::learned_integers(problem, options);
    const double fitted = adaround::reconstruction_error(problem, learned);
    const double on_float = adaround::reconstruction_error(problem, adaround::learned_integers(float_fit, options));
    const double nearest = adaround::reconstruction_error(problem, adaround::nearest_integers(problem));
    INFO("error: rounded-input fit " << fitted << ", float-input fit " << on_float << ", nearest " << nearest);
    CHECK(fitted < nearest);
    gain += on_float - fitted;
    adaround::Matrix snapped(learned.rows(), learned.cols());
    for (Eigen::Index r = 0; r < learned.rows(); ++r) snapped.row(r) = learned.row(r) * problem.scale[static_cast<std::size_t>(r)];
    model.graph->set_initializer(layer.node->input(1), adaround::weight_tensor(*model.graph, layer, snapped));
    return Status::ok();
  };
  REQUIRE(adaround::round_in_sequence(model, samples, 32, *layers, round).is_ok());
  CHECK(checked.size() == layers->size());
  INFO("summed error reduction of fitting on rounded inputs: " << gain);
  CHECK(gain > 0.0);
}

TEST_CASE("adaround: two runs are byte-identical and the QDQ builder reproduces the learned grid") {
  const Model model = fixture();
  const Dataset dataset = calibration(16);
  const Model first = rounded(model, dataset, 50, 16);
  const Model second = rounded(model, dataset, 50, 16);
  auto layers = adaround::find_layers(*first.graph);
  REQUIRE(layers.has_value());
  for (const adaround::Layer& layer : *layers) {
    const Tensor& a = *first.graph->initializer(layer.node->input(1));
    const Tensor& b = *second.graph->initializer(second.graph->find_value(layer.node->input(1)->name()));
    REQUIRE(a.numel() == b.numel());
    CHECK(std::memcmp(a.data<float>(), b.data<float>(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0);
    // The builder's round-to-nearest on the rounded weight gives back exactly w' = s * q.
    auto q = quantize_weight(a, layer.channel_axis, DType::Int8, false, 4);
    REQUIRE(q.has_value());
    const Tensor back = dequantize_weight(*q);
    CHECK(std::memcmp(back.data<float>(), a.data<float>(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0);
    // And the weights moved: they are not the float model's any more.
    const Tensor& original = *model.graph->initializer(model.graph->find_value(layer.node->input(1)->name()));
    CHECK(std::memcmp(original.data<float>(), a.data<float>(), static_cast<std::size_t>(a.numel()) * sizeof(float)) != 0);
  }
}

TEST_CASE("adaround: a layer with fewer input vectors than min-vectors per weight keeps round-to-nearest") {
  const Model model = fixture();
  const Dataset dataset = calibration(16);
  std::map<std::string, int64_t> counters;
  // 16 samples: the classifier head (Gemm, 48 weights per output) sees 16 vectors, under
  // 4 x 48; every Conv sees 16 x its output positions, far more than its K.
  const Model result = rounded(model, dataset, 20, 16, 4.0, &counters);
  CHECK(counters.at("layers-underdetermined") == 1);
  auto layers = adaround::find_layers(*result.graph);
  REQUIRE(layers.has_value());
  int64_t unchanged = 0;
  for (const adaround::Layer& layer : *layers) {
    const Tensor& after = *result.graph->initializer(layer.node->input(1));
    const Tensor& before = *model.graph->initializer(model.graph->find_value(layer.node->input(1)->name()));
    const bool same =
        std::memcmp(before.data<float>(), after.data<float>(), static_cast<std::size_t>(after.numel()) * sizeof(float)) == 0;
    INFO(layer.node->op_type() << " '" << layer.node->name() << "'");
    CHECK(same == (layer.node->op_type() == "Gemm"));
    unchanged += same ? 1 : 0;
  }
  CHECK(unchanged == 1);
  CHECK(counters.at("layers-rounded") == static_cast<int64_t>(layers->size()) - 1);
}

TEST_CASE("adaround: without samples the pass refuses to run") {
  Model model = fixture();
  auto pass = AdaRound::create(adaround_options(10, 4));
  REQUIRE(pass.has_value());
  auto result = (*pass)->run(model);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.status().message() == "adaround reads calibration samples: give its stage a dataset input");
}
