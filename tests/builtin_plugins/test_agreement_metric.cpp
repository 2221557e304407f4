// Tests of the argmax-agreement and ctc-agreement metrics on hand-written outputs.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "plugins/metrics/agreement_metric.h"

namespace qflow {
namespace {

using Decoder = AgreementMetric::Decoder;

std::unique_ptr<Metric> make(Decoder decoder, int64_t blank = 0) {
  Options options;
  options.set("output", int64_t{0});
  options.set("blank", blank);
  auto metric = AgreementMetric::create(decoder, options);
  REQUIRE(metric);
  return std::move(metric).value();
}

// [1, T, C] scores whose argmax at step t is classes[t].
Tensor steps(const std::vector<int64_t>& classes, int64_t c) {
  std::vector<float> v(classes.size() * static_cast<std::size_t>(c), 0.0f);
  for (std::size_t t = 0; t < classes.size(); ++t) v[t * static_cast<std::size_t>(c) + static_cast<std::size_t>(classes[t])] = 1.0f;
  return Tensor::from_vector<float>({1, static_cast<int64_t>(classes.size()), c}, v);
}

double score(const Metric& metric, const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  std::vector<SampleOutputs> outputs, reference;
  for (const Tensor& t : got) outputs.push_back({t});
  for (const Tensor& t : want) reference.push_back({t});
  MetricInput input;
  input.outputs = &outputs;
  input.reference = &reference;
  auto value = metric.evaluate(input);
  REQUIRE(value);
  return *value;
}

TEST_CASE("ctc-agreement: greedy decoding collapses repeats and drops the blank") {
  auto metric = make(Decoder::Ctc);
  const auto& ctc = static_cast<const AgreementMetric&>(*metric);
  CHECK(ctc.decode(steps({0, 3, 3, 0, 3, 2, 2, 0}, 4)) == std::vector<int64_t>{3, 3, 2});
  CHECK(ctc.decode(steps({0, 0, 0}, 4)).empty());
  // Different frame alignments of the same text agree; a changed or lost character does not.
  const Tensor a = steps({1, 1, 0, 2, 0, 0}, 4), b = steps({0, 1, 0, 0, 2, 2}, 4);
  const Tensor dropped = steps({1, 1, 1, 1, 0, 0}, 4), changed = steps({1, 0, 3, 0, 0, 0}, 4);
  CHECK(score(*metric, {b, dropped, changed, a}, {a, a, a, a}) == 0.5);
  // Another blank class.
  auto other = make(Decoder::Ctc, 3);
  CHECK(static_cast<const AgreementMetric&>(*other).decode(steps({0, 3, 0, 0, 1}, 4)) == std::vector<int64_t>{0, 0, 1});
}

TEST_CASE("argmax-agreement: every row's argmax must match; ties go to the first class") {
  auto metric = make(Decoder::Argmax);
  const Tensor x = Tensor::from_vector<float>({1, 3}, {0.1f, 0.7f, 0.2f});
  const Tensor y = Tensor::from_vector<float>({1, 3}, {0.1f, 0.2f, 0.7f});
  const Tensor tie = Tensor::from_vector<float>({1, 3}, {0.5f, 0.5f, 0.0f});
  const Tensor first = Tensor::from_vector<float>({1, 3}, {0.9f, 0.0f, 0.0f});
  CHECK(score(*metric, {x, y, tie}, {x, x, first}) == doctest::Approx(2.0 / 3.0));
  // A [2, 2] map: both rows count.
  const Tensor map = Tensor::from_vector<float>({2, 2}, {1, 0, 0, 1});
  const Tensor one_row_off = Tensor::from_vector<float>({2, 2}, {1, 0, 1, 0});
  CHECK(score(*metric, {map, one_row_off}, {map, map}) == 0.5);
}

TEST_CASE("agreement metrics: errors name the metric") {
  Options bad;
  bad.set("output", int64_t{-1});
  auto refused = AgreementMetric::create(Decoder::Ctc, bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().message() == "ctc-agreement: option 'output' is -1, must be >= 0");
  auto metric = make(Decoder::Argmax);
  std::vector<SampleOutputs> outputs = {{Tensor::from_vector<float>({1, 2}, {1, 0})}};
  std::vector<SampleOutputs> reference = {{Tensor::from_vector<float>({1, 3}, {1, 0, 0})}};
  MetricInput input;
  input.outputs = &outputs;
  input.reference = &reference;
  auto value = metric->evaluate(input);
  REQUIRE_FALSE(value);
  CHECK(value.status().message() == "argmax-agreement: output 0 of sample 0 differs in shape from the float model's");
}

}  // namespace
}  // namespace qflow
