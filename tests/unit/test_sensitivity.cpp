// Unit tests for the per-node quantization sensitivity (framework/quant/sensitivity).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/data/npy.h"
#include "framework/quant/output_cosine.h"
#include "framework/quant/qdq_builder.h"
#include "framework/quant/sensitivity.h"
#include "framework/interpreter/executor.h"
#include "test_dataset_util.h"

#include "test_model_util.h"

namespace qflow {

namespace {

using test::d;
using test::float_type;
using test::params;
using test::wave;

Tensor w1_float() { return Tensor::from_vector<float>({8, 8}, wave(64, 0.53, 1.0)); }

// The MLP's test inputs: n samples [1, 8] of one wave.
std::vector<float> wave_samples(int64_t n) { return wave(static_cast<std::size_t>(n * 8), 0.91, 1.5); }

// wave_samples(n) written to x.npy in `dir` and opened as a dataset.
auto wave_dataset(test::TempDir& dir, int64_t n) {
  const std::string path = dir.file("x.npy");
  REQUIRE(write_npy_file(path, Tensor::from_vector<float>({n, 1, 8}, wave_samples(n))).is_ok());
  auto dataset = open_dataset(DataSpec{path});
  REQUIRE(dataset.has_value());
  return dataset;
}

// a's threshold clips it to a tenth of its range: mm1's activation is the bad one.
QuantTable clipped_table() {
  return {{"x", params(1.5)}, {"a", params(0.3)}, {"b", params(12.0)}, {"y", params(30.0)}};
}

// The MLP with clipped_table() and n wave samples on disk.
struct ClippedMlp {
  ClippedMlp(int64_t n, const char* dir_name) : samples(wave_samples(n)), dir(dir_name) {
    auto opened = wave_dataset(dir, n);
    dataset = std::move(*opened);
  }
  std::vector<float> samples;
  test::TempDir dir;
  Dataset dataset;
  QuantTable table = clipped_table();
  Model model = test::mlp_model(w1_float());
};

std::vector<float> run(const Model& model, const Tensor& x) {
  auto executor = Executor::create(model);
  REQUIRE_MESSAGE(executor.has_value(), executor.status().message());
  auto out = (*executor)->run({{"x", x}});
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  const Tensor& y = out->at("y");
  return {y.data<float>(), y.data<float>() + y.numel()};
}

SensitivityOptions ranking_options(int threads, int64_t limit, double when_below = 0.0, std::string method = "auto") {
  SensitivityOptions o;
  o.threads = threads;
  o.limit = limit;
  o.when_below = when_below;
  o.method = std::move(method);
  return o;
}

const SensitivityRow& row(const SensitivityResult& result, const std::string& node) {
  for (const SensitivityRow& r : result.rows)
    if (r.node == node) return r;
  FAIL("no row for " << node);
  return result.rows.front();
}

}  // namespace

TEST_CASE("sensitivity: a badly quantized node ranks first; cosines match independent runs") {
  const int64_t n = 6;
  const ClippedMlp mlp(n, "sensitivity");
  auto result = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 0));
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->samples == n);
  REQUIRE(result->rows.size() == 3);
  CHECK(result->rows[0].node == "mm1");
  CHECK(result->rows[0].activation_cosine < 0.9);
  for (std::size_t i = 1; i < result->rows.size(); ++i) CHECK(result->rows[i - 1].worst() <= result->rows[i].worst());

  const SensitivityRow& mm1 = row(*result, "mm1");
  CHECK(mm1.op_type == "MatMul");
  CHECK(mm1.has_weight);
  CHECK(mm1.has_activation);
  const SensitivityRow& add = row(*result, "add");
  CHECK_FALSE(add.has_weight);
  CHECK(add.has_activation);

  // Independently: mm1's weight quantized per output channel (the last axis) with
  // quantize_weight and put back as float; and mm1's output clipped and rounded by hand.
  auto quantized = quantize_weight(w1_float(), 1, DType::Int8);
  REQUIRE(quantized.has_value());
  const Model weight_only = test::mlp_model(dequantize_weight(*quantized));
  const float sa = static_cast<float>(0.3 / 127.0);
  double weight_sum = 0.0, act_sum = 0.0;
  for (int64_t s = 0; s < n; ++s) {
    const std::vector<float> xs(mlp.samples.begin() + s * 8, mlp.samples.begin() + (s + 1) * 8);
    const Tensor x = Tensor::from_vector<float>({1, 8}, xs);
    const std::vector<float> reference = run(mlp.model, x);
    weight_sum += cosine_similarity(reference, run(weight_only, x));
    // y = (qdq(x W1) + bias) W2, in the order the MatMul kernel sums (k ascending).
    const Tensor w1 = w1_float();
    const std::vector<float> bias = wave(8, 1.3, 0.2), w2 = wave(32, 0.77, 0.9);
    std::vector<float> bq(8), y(4, 0.0f);
    for (int j = 0; j < 8; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < 8; ++k) acc += xs[static_cast<std::size_t>(k)] * w1.data<float>()[k * 8 + j];
      const float q = std::clamp(std::nearbyint(acc / sa), -128.0f, 127.0f);
      bq[static_cast<std::size_t>(j)] = q * sa + bias[static_cast<std::size_t>(j)];
    }
    for (int j = 0; j < 4; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < 8; ++k) acc += bq[static_cast<std::size_t>(k)] * w2[static_cast<std::size_t>(k * 4 + j)];
      y[static_cast<std::size_t>(j)] = acc;
    }
    act_sum += cosine_similarity(reference, y);
  }
  CHECK(mm1.weight_cosine == doctest::Approx(weight_sum / n).epsilon(1e-12));
  CHECK(mm1.activation_cosine == doctest::Approx(act_sum / n).epsilon(1e-6));

  // The same for 2 threads, exactly; --top in the renderers.
  auto two = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(2, 0));
  REQUIRE(two.has_value());
  REQUIRE(two->rows.size() == result->rows.size());
  for (std::size_t i = 0; i < result->rows.size(); ++i) {
    CHECK(two->rows[i].node == result->rows[i].node);
    CHECK(two->rows[i].weight_cosine == result->rows[i].weight_cosine);
    CHECK(two->rows[i].activation_cosine == result->rows[i].activation_cosine);
  }
  CHECK(sensitivity_text(*two) == sensitivity_text(*result));
  const std::string top1 = sensitivity_text(*result, 1);
  CHECK(top1.find("mm1") != std::string::npos);
  CHECK(top1.find("mm2") == std::string::npos);
  auto json = sensitivity_json(*result);
  REQUIRE(json.has_value());
  CHECK(json->find("\"weight_cosine\": null") != std::string::npos);  // add has no weight
}

TEST_CASE("sensitivity: outputs a node does not reach keep their float values") {
  // Three independent branches, each a graph output: c, b, a = x * 1.
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  g.name = "branches";
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(4)});
  g.inputs.push_back(x);
  Value* one = g.get_or_create_value("one");
  g.set_initializer(one, Tensor::scalar<float>(1.0f));
  Value* a = g.get_or_create_value("a");
  Value* b = g.get_or_create_value("b");
  Value* c = g.get_or_create_value("c");
  for (Value* v : {a, b, c}) v->type = float_type({d(1), d(4)});
  g.add_node("Mul", {x, one}, {c}, "n_c");
  g.add_node("Mul", {x, one}, {b}, "n_b");
  g.add_node("Mul", {x, one}, {a}, "n_a");
  g.outputs = {c, b, a};
  const std::vector<float> samples = {0.5f, -1.0f, 0.25f, 2.0f, 0.1f, 0.3f, -0.7f, 1.1f};
  test::TempDir dir("sensitivity_branches");
  const std::string path = dir.file("x.npy");
  REQUIRE(write_npy_file(path, Tensor::from_vector<float>({2, 1, 4}, samples)).is_ok());
  auto dataset = open_dataset(DataSpec{path});
  REQUIRE(dataset.has_value());
  const float sb = 1.0f / 128.0f, sa = 0.25f;
  auto table_entry = [](float scale) {
    QuantParams q;
    q.dtype = DType::Int8;
    q.scale = {scale};
    q.zero_point = {0};
    q.threshold = scale * 127.0;
    return q;
  };
  const QuantTable table = {{"a", table_entry(sa)}, {"b", table_entry(sb)}, {"c", table_entry(sa)}};
  auto result = analyze_sensitivity(model, table, nullptr, *dataset, ranking_options(2, 0));
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  REQUIRE(result->rows.size() == 3);
  CHECK(result->rows[0].node == "n_b");  // b is clipped to +-127/128
  auto qdq = [](float v, float s) {
    return static_cast<float>(std::clamp(static_cast<double>(std::nearbyint(v / s)), -128.0, 127.0)) * s;
  };
  // Output order c, b, a; only the tested node's output is quantized.
  auto expected = [&](int position, float scale) {
    double sum = 0.0;
    for (int s = 0; s < 2; ++s) {
      std::vector<float> reference, quantized;
      for (int o = 0; o < 3; ++o)
        for (int i = 0; i < 4; ++i) {
          const float v = samples[static_cast<std::size_t>(s * 4 + i)];
          reference.push_back(v);
          quantized.push_back(o == position ? qdq(v, scale) : v);
        }
      sum += cosine_similarity(reference, quantized);
    }
    return sum / 2.0;
  };
  CHECK(row(*result, "n_c").activation_cosine == doctest::Approx(expected(0, sa)).epsilon(1e-12));
  CHECK(row(*result, "n_b").activation_cosine == doctest::Approx(expected(1, sb)).epsilon(1e-12));
  CHECK(row(*result, "n_a").activation_cosine == doctest::Approx(expected(2, sa)).epsilon(1e-12));
  CHECK_FALSE(row(*result, "n_a").has_weight);
}

TEST_CASE("sensitivity: quantize = false nodes are not tested; unknown tensors are errors") {
  test::TempDir dir("sensitivity_config");
  auto dataset = wave_dataset(dir, 2);
  const Model model = test::mlp_model(w1_float());
  QuantConfig config;
  config.nodes["mm2"].quantize = false;
  const QuantTable table = {{"x", params(1.5)}, {"a", params(3.0)}, {"b", params(12.0)}, {"y", params(30.0)}};
  auto result = analyze_sensitivity(model, table, &config, *dataset, ranking_options(1, 1));
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->samples == 1);
  REQUIRE(result->rows.size() == 2);
  for (const SensitivityRow& r : result->rows) CHECK(r.node != "mm2");

  auto bad = analyze_sensitivity(model, {{"nope", params(1.0)}}, nullptr, *dataset, ranking_options(1, 0));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().message().find("'nope'") != std::string::npos);
}

TEST_CASE("sensitivity: with when-below, nodes are ranked only when the PTQ model misses the bound") {
  const int64_t n = 4;
  const ClippedMlp mlp(n, "sensitivity_when_below");

  // The whole PTQ model's output cosine, computed here from a QDQ model run sample by sample.
  Model ptq = test::mlp_model(w1_float());
  QdqOptions options;
  options.weights = true;
  REQUIRE(build_qdq_model(ptq, mlp.table, nullptr, options).is_ok());
  double sum = 0.0;
  for (int64_t s = 0; s < n; ++s) {
    const Tensor x = Tensor::from_vector<float>({1, 8}, std::vector<float>(mlp.samples.begin() + s * 8, mlp.samples.begin() + (s + 1) * 8));
    sum += cosine_similarity(run(mlp.model, x), run(ptq, x));
  }
  const double cosine = sum / n;
  REQUIRE(cosine < 0.99);  // the clipped `a` keeps it well below float

  auto ranked = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(2, 0, cosine + 1e-3));
  REQUIRE_MESSAGE(ranked.has_value(), ranked.status().message());
  CHECK(ranked->measured);
  REQUIRE(ranked->ptq_cosine.has_value());
  CHECK(*ranked->ptq_cosine == doctest::Approx(cosine).epsilon(1e-9));
  CHECK(ranked->rows.size() == 3);

  auto skipped = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(2, 0, cosine - 1e-3));
  REQUIRE(skipped.has_value());
  CHECK_FALSE(skipped->measured);
  CHECK(skipped->rows.empty());
  CHECK(skipped->when_below == cosine - 1e-3);
  auto json = sensitivity_json(*skipped);
  REQUIRE(json.has_value());
  CHECK(json->find("\"measured\": false") != std::string::npos);
  CHECK(json->find("\"ptq_cosine\": ") != std::string::npos);
  CHECK(sensitivity_text(*skipped).find("nodes not ranked") != std::string::npos);

  // Without a bound, nothing is measured up front.
  auto plain = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 0));
  REQUIRE(plain.has_value());
  CHECK(plain->measured);
  CHECK_FALSE(plain->ptq_cosine.has_value());
}

TEST_CASE("sensitivity: the local method measures each node's own outputs in one float run") {
  const int64_t n = 5;
  const ClippedMlp mlp(n, "sensitivity_local");
  auto local = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 0, 0.0, "local"));
  REQUIRE_MESSAGE(local.has_value(), local.status().message());
  CHECK(local->method == "local");
  REQUIRE(local->rows.size() == 3);
  CHECK(local->rows[0].node == "mm1");  // the clipped activation is the worst here too

  // By hand: mm1's output a = x W1 against a quantized with a's parameters (0.3 / 127),
  // and against x times W1 quantized per column and put back as float.
  auto quantized = quantize_weight(w1_float(), 1, DType::Int8);
  REQUIRE(quantized.has_value());
  const Tensor w1 = w1_float(), w1q = dequantize_weight(*quantized);
  const double sa = 0.3 / 127.0;
  double act_sum = 0.0, weight_sum = 0.0;
  for (int64_t s = 0; s < n; ++s) {
    std::vector<float> a(8), aq(8), aw(8);
    for (int j = 0; j < 8; ++j) {
      float acc = 0.0f, accq = 0.0f;
      for (int k = 0; k < 8; ++k) {
        acc += mlp.samples[static_cast<std::size_t>(s * 8 + k)] * w1.data<float>()[k * 8 + j];
        accq += mlp.samples[static_cast<std::size_t>(s * 8 + k)] * w1q.data<float>()[k * 8 + j];
      }
      a[static_cast<std::size_t>(j)] = acc;
      aw[static_cast<std::size_t>(j)] = accq;
      aq[static_cast<std::size_t>(j)] = static_cast<float>(std::clamp(std::nearbyint(acc / sa), -128.0, 127.0) * sa);
    }
    act_sum += cosine_similarity(a, aq);
    weight_sum += cosine_similarity(a, aw);
  }
  const SensitivityRow& mm1 = row(*local, "mm1");
  CHECK(mm1.activation_cosine == doctest::Approx(act_sum / n).epsilon(1e-6));
  CHECK(mm1.weight_cosine == doctest::Approx(weight_sum / n).epsilon(1e-6));
  CHECK(mm1.weight_cosine < 1.0);
  CHECK_FALSE(row(*local, "add").has_weight);

  // Thread count does not matter; the text says which ranking it is.
  auto two = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(2, 0, 0.0, "local"));
  REQUIRE(two.has_value());
  CHECK(sensitivity_text(*two) == sensitivity_text(*local));
  CHECK(sensitivity_text(*local).find("local ranking") != std::string::npos);
  auto json = sensitivity_json(*local);
  REQUIRE(json.has_value());
  CHECK(json->find("\"method\": \"local\"") != std::string::npos);

  // auto picks the output ranking for a model this small; an unknown method is refused.
  auto automatic = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 0));
  REQUIRE(automatic.has_value());
  CHECK(automatic->method == "output");
  CHECK(automatic->output_gmacs > 0.0);
  CHECK(automatic->output_gmacs < 1e-3);
  auto bad = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 0, 0.0, "global"));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().message().find("'global'") != std::string::npos);
}

TEST_CASE("sensitivity: ranking-gmacs bounds the output ranking's samples, never below four") {
  const int64_t n = 10;
  const ClippedMlp mlp(n, "sensitivity_ranking_gmacs");
  auto all = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 0));
  REQUIRE_MESSAGE(all.has_value(), all.status().message());
  REQUIRE(all->samples == n);
  const double per_sample = all->output_gmacs / static_cast<double>(n);
  REQUIRE(per_sample > 0.0);

  // The ranking on the first k samples is the ranking of a run limited to k samples.
  const auto bounded = [&](double gmacs) {
    SensitivityOptions o = ranking_options(2, 0, 0.0);
    o.ranking_gmacs = gmacs;
    auto result = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, o);
    REQUIRE_MESSAGE(result.has_value(), result.status().message());
    return *result;
  };
  const SensitivityResult six = bounded(per_sample * 6.5);
  CHECK(six.samples == 6);
  CHECK(six.output_gmacs == doctest::Approx(per_sample * 6));
  auto limited = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 6));
  REQUIRE(limited.has_value());
  CHECK(sensitivity_text(six) == sensitivity_text(*limited));
  CHECK(sensitivity_text(six) != sensitivity_text(*all));

  CHECK(bounded(per_sample * 0.5).samples == kMinRankingSamples);  // a budget below one sample
  CHECK(bounded(per_sample * 100).samples == n);                    // more than the data holds

  // A when-below measurement still uses every sample; the local ranking too.
  SensitivityOptions bound = ranking_options(1, 0, 0.999999);
  bound.ranking_gmacs = per_sample;
  auto measured = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, bound);
  REQUIRE(measured.has_value());
  auto whole = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, ranking_options(1, 0, 0.999999));
  REQUIRE(whole.has_value());
  REQUIRE(measured->ptq_cosine.has_value());
  CHECK(*measured->ptq_cosine == *whole->ptq_cosine);
  CHECK(measured->samples == kMinRankingSamples);
  SensitivityOptions local = ranking_options(1, 0, 0.0, "local");
  local.ranking_gmacs = per_sample;
  auto local_result = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, local);
  REQUIRE(local_result.has_value());
  CHECK(local_result->samples == n);

  SensitivityOptions negative = ranking_options(1, 0);
  negative.ranking_gmacs = -1.0;
  auto refused = analyze_sensitivity(mlp.model, mlp.table, nullptr, mlp.dataset, negative);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message().find("ranking-gmacs") != std::string::npos);
}

}  // namespace qflow
