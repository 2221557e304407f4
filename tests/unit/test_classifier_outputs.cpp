// Unit tests for classifier outputs in the output-cosine objective
// (framework/quant/classifier_outputs) and for the sensitivity and precision search that use it.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "framework/quant/classifier_outputs.h"
#include "framework/quant/precision_search.h"
#include "framework/quant/sensitivity.h"
#include "test_dataset_util.h"
#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;
using test::params;
using test::wave;

// The test MLP with its second weight times `gain`, its logits y [1, 4] fed to a Softmax whose
// probabilities p [1, 4] are the only output: large gains make every sample certain.
Model classifier(float gain) {
  Model model = test::mlp_model(Tensor::from_vector<float>({8, 8}, wave(64, 0.53, 1.0)));
  Graph& g = *model.graph;
  std::vector<float> w2 = wave(32, 0.77, 0.9);  // mlp_model's W2
  for (float& v : w2) v *= gain;
  g.set_initializer(g.find_value("W2"), Tensor::from_vector<float>({8, 4}, w2));
  Value* p = g.get_or_create_value("p");
  p->type = float_type({d(1), d(4)});
  g.add_node("Softmax", {g.find_value("y")}, {p}, "softmax");
  g.outputs = {p};
  return model;
}

// Softmax of two logits, in double.
std::vector<double> softmax2(double a, double b) {
  const double m = std::max(a, b), ea = std::exp(a - m), eb = std::exp(b - m);
  return {ea / (ea + eb), eb / (ea + eb)};
}

Tensor logits(float a, float b) { return Tensor::from_vector<float>({1, 2}, {a, b}); }

// A graph x [1, 2] -> Softmax -> p whose logits are the input: compared() on hand-made logits.
Model two_class() {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(2)});
  Value* h = g.get_or_create_value("h");
  h->type = float_type({d(1), d(2)});
  Value* p = g.get_or_create_value("p");
  p->type = float_type({d(1), d(2)});
  g.inputs.push_back(x);
  g.add_node("Relu", {x}, {h}, "relu");
  g.add_node("Softmax", {h}, {p}, "softmax");
  g.outputs.push_back(p);
  return model;
}

}  // namespace

TEST_CASE("classifier outputs: logits are moved to float's reference margin on both sides") {
  Model model = two_class();
  const ClassifierOutputs c = ClassifierOutputs::expose(model);
  REQUIRE_FALSE(c.empty());
  REQUIRE(model.graph->outputs.size() == 2);
  CHECK(model.graph->outputs[1]->name() == "h");

  const Tensor probabilities = Tensor::from_vector<float>({1, 2}, {1.0f, 0.0f});  // not read
  const Tensor f = logits(10.0f, 0.0f), q = logits(9.5f, 0.0f);
  const std::vector<float> ref = c.compared({&probabilities, &f}, {&probabilities, &f});
  const std::vector<float> quant = c.compared({&probabilities, &q}, {&probabilities, &f});
  // Float's margin 10 becomes ln 4 (0.8 / 0.2); the quantized margin keeps its error of 0.5.
  const std::vector<double> at_ref = softmax2(kClassifierReferenceMargin, 0.0);
  const std::vector<double> moved = softmax2(kClassifierReferenceMargin - 0.5, 0.0);
  REQUIRE(ref.size() == 2);
  REQUIRE(quant.size() == 2);
  CHECK(ref[0] == doctest::Approx(0.8).epsilon(1e-6));
  CHECK(ref[1] == doctest::Approx(at_ref[1]).epsilon(1e-6));
  CHECK(quant[0] == doctest::Approx(moved[0]).epsilon(1e-6));
  CHECK(quant[1] == doctest::Approx(moved[1]).epsilon(1e-6));

  // A sample float is less sure of than the reference stays where it is.
  const Tensor unsure = logits(0.0f, 0.7f), unsure_q = logits(0.0f, 0.2f);
  const std::vector<float> as_is = c.compared({&probabilities, &unsure_q}, {&probabilities, &unsure});
  CHECK(as_is[1] == doctest::Approx(softmax2(0.0, 0.2)[1]).epsilon(1e-6));

  // Logits that are not one finite distribution: the probabilities as they are.
  const Tensor wide = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  const Tensor infinite = logits(INFINITY, 0.0f);
  CHECK(c.compared({&probabilities, &wide}, {&probabilities, &wide}) == std::vector<float>{1.0f, 0.0f});
  CHECK(c.compared({&probabilities, &infinite}, {&probabilities, &f}) == std::vector<float>{1.0f, 0.0f});
}

TEST_CASE("classifier outputs: sequences, logits outputs and other outputs are compared as they are") {
  SUBCASE("a [1, 3, 2] softmax holds several distributions per sample") {
    Model model = two_class();
    for (Value* v : {model.graph->find_value("x"), model.graph->find_value("h"), model.graph->find_value("p")})
      v->type = float_type({d(1), d(3), d(2)});
    CHECK(ClassifierOutputs::expose(model).empty());
    CHECK(model.graph->outputs.size() == 1);
  }
  SUBCASE("below opset 13 the softmax runs over every axis from its own: [1, 3, 2] is one distribution") {
    Model model = two_class();
    model.opset_imports = {{"", 11}};
    for (Value* v : {model.graph->find_value("x"), model.graph->find_value("h"), model.graph->find_value("p")})
      v->type = float_type({d(1), d(3), d(2)});
    const ClassifierOutputs c = ClassifierOutputs::expose(model);
    REQUIRE_FALSE(c.empty());
    const Tensor f = Tensor::from_vector<float>({1, 3, 2}, {9, 0, 0, 0, 0, 0});
    const Tensor probabilities = Tensor::from_vector<float>({1, 3, 2}, {1, 0, 0, 0, 0, 0});
    const std::vector<float> flat = c.compared({&probabilities, &f}, {&probabilities, &f});
    REQUIRE(flat.size() == 6);
    // Margin 9 over five runners-up at 0 moved to ln 4: 4 / (4 + 5).
    CHECK(flat[0] == doctest::Approx(4.0 / 9.0).epsilon(1e-6));
    CHECK(flat[5] == doctest::Approx(1.0 / 9.0).epsilon(1e-6));
  }
  SUBCASE("an output of unknown shape") {
    Model model = two_class();
    model.graph->find_value("p")->type.reset();
    CHECK(ClassifierOutputs::expose(model).empty());
  }
  SUBCASE("a symbolic batch is one sample") {
    Model model = two_class();
    model.graph->find_value("p")->type = float_type({test::sym("N"), d(2)});
    CHECK_FALSE(ClassifierOutputs::expose(model).empty());
  }
  SUBCASE("logits already an output are not added twice; other outputs keep their values") {
    Model model = two_class();
    model.graph->outputs.insert(model.graph->outputs.begin(), model.graph->find_value("h"));
    const ClassifierOutputs c = ClassifierOutputs::expose(model);
    REQUIRE_FALSE(c.empty());
    CHECK(model.graph->outputs.size() == 2);
    const Tensor f = logits(10.0f, 0.0f), probabilities = logits(1.0f, 0.0f);
    const std::vector<float> flat = c.compared({&f, &probabilities}, {&f, &probabilities});
    REQUIRE(flat.size() == 4);
    CHECK(flat[0] == 10.0f);
    CHECK(flat[1] == 0.0f);
    CHECK(flat[2] == doctest::Approx(0.8).epsilon(1e-6));
  }
}

TEST_CASE("classifier outputs: a search on certain samples sees the logit error the probabilities hide") {
  test::TempDir dir{"classifier"};
  const int64_t n = 8;
  const std::string path = dir.file("x.npy");
  test::write_npy(path, {n, 1, 8}, wave(static_cast<std::size_t>(n * 8), 0.91, 1.5));
  auto dataset = open_dataset(DataSpec{path});
  REQUIRE(dataset.has_value());
  // W2 x 200: margins of 9 to 73 logit units, probabilities 1 and 0 whatever int8 does to
  // the logits (units of error).
  const Model model = classifier(200.0f);
  const QuantTable table = {{"x", params(1.5)}, {"a", params(2.0)}, {"b", params(2.2)}, {"y", params(150.0)},
                            {"p", params(1.0)}};

  SensitivityOptions sensitivity_options;
  sensitivity_options.when_below = 0.999;
  auto ranking = analyze_sensitivity(model, table, nullptr, *dataset, sensitivity_options);
  REQUIRE_MESSAGE(ranking.has_value(), ranking.status().message());
  REQUIRE(ranking->ptq_cosine);
  CHECK(*ranking->ptq_cosine < 0.99);
  CHECK(ranking->measured);
  REQUIRE_FALSE(ranking->rows.empty());

  PrecisionSearchOptions options;
  options.target_cosine = 0.999;
  options.sensitivity = &*ranking;
  auto result = search_precision(model, table, nullptr, *dataset, options);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->before < 0.99);
  CHECK(result->after >= 0.999);
  CHECK_FALSE(result->changes.empty());
  CHECK(result->classifier_outputs == std::vector<std::string>{"p"});
  auto json = precision_json(*result);
  REQUIRE(json.has_value());
  CHECK(json->find("\"classifier_outputs\": [\"p\"]") != std::string::npos);
  CHECK(precision_overrides_file(*result).find("# classifier output 'p' compared through its logits") !=
        std::string::npos);
  // The model the search scored is not what it hands on: the overrides name nodes only.
  CHECK(model.graph->outputs.size() == 1);
}

}  // namespace qflow
