// The observer stage over streamed samples: statistics are byte-identical for any thread
// count, any batch-size and (minmax merges order-independently) any sample order.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <filesystem>
#include <numeric>

#include "framework/core/file_io.h"
#include "framework/data/observe_sweep.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/stage_execution.h"
#include "framework/plugin/component_registry.h"
#include "test_dataset_util.h"

namespace qflow {

using test::TempDir;
using test::write_npy;

namespace {

constexpr int64_t kSamples = 100;  // several shards, the last one partial
constexpr int64_t kSampleSize = 28 * 28;

// The built-in observers library next to this build's libqflow_core (bin/../lib/qflow/plugins).
std::string observers_library() {
  char buffer[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  REQUIRE(n > 0);
  const std::filesystem::path exe(std::string(buffer, static_cast<std::size_t>(n)));
  return (exe.parent_path().parent_path() / "lib" / "qflow" / "plugins" / "libqflow_observers.so").string();
}

const ComponentRegistry& registry() {
  static ComponentRegistry instance;
  static const Status loaded = instance.load_library(observers_library());
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.message(), " (build the qflow_observers target)");
  return instance;
}

// Seeded values in [-2, 2): deterministic without depending on a library's generator.
std::vector<float> random_samples(int64_t samples) {
  std::vector<float> values(static_cast<std::size_t>(samples * kSampleSize));
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (float& v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1ull << 24) * 4.0 - 2.0);
  }
  return values;
}

Artifact model_artifact() {
  Expected<std::string> bytes = read_file(std::string(QFLOW_SOURCE_DIR) + "/models/sample/sample_cnn.onnx");
  REQUIRE(bytes.has_value());
  Artifact artifact;
  artifact.type = ArtifactType::Model;
  artifact.bytes = *bytes;
  return artifact;
}

PipelineStage observer_stage() {
  PipelineStage stage;
  stage.id = "observe";
  stage.kind = StageKind::Observer;
  stage.component = "minmax";
  stage.output_type = ArtifactType::Statistics;
  return stage;
}

Expected<StageResult> observe(const std::string& path, int threads, int64_t batch_size) {
  DataSpec spec;
  spec.path = path;
  spec.batch_size = batch_size;
  Expected<Dataset> dataset = open_dataset(spec);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  Artifact data;
  data.type = ArtifactType::Dataset;
  data.dataset = std::make_shared<const Dataset>(std::move(*dataset));
  const Artifact model = model_artifact();
  StageContext context;
  context.threads = threads;
  return execute_stage(observer_stage(), {{"model", &model}, {"dataset", &data}}, registry(), context);
}

std::string statistics_bytes(const std::string& path, int threads, int64_t batch_size) {
  Expected<StageResult> result = observe(path, threads, batch_size);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  return result->artifact.bytes;
}


// Two passes: the range of |x| first, then an 8-bin histogram over that fixed range. It
// follows the SDK's protocol: in pass 1 the shards share the merged pass-0 state, so merge()
// adds only the histograms.
class TwoPassObserver final : public Observer {
 public:
  int passes() const override { return 2; }
  Status begin_pass(int pass) override {
    pass_ = pass;
    return Status::ok();
  }
  Status observe(const Tensor& values) override {
    for (float x : values.span<float>()) {
      const double a = std::fabs(static_cast<double>(x));
      if (pass_ == 0) {
        range_ = std::max(range_, a);
        ++count_;
      } else {
        if (!(range_ > 0.0)) return invalid_input("pass 1 started without the pass-0 range");
        ++histogram_[static_cast<std::size_t>(std::min(7.0, std::floor(a / range_ * 8.0)))];
      }
    }
    return Status::ok();
  }
  Status merge(const Observer& other) override {
    const auto& o = static_cast<const TwoPassObserver&>(other);
    if (o.pass_ != pass_) return invalid_input("merging observers of different passes");
    if (pass_ == 0) {
      range_ = std::max(range_, o.range_);
      count_ += o.count_;
    } else {
      if (o.range_ != range_ || o.count_ != count_) return invalid_input("pass-1 copies do not share the pass-0 state");
      for (std::size_t i = 0; i < histogram_.size(); ++i) histogram_[i] += o.histogram_[i];
    }
    return Status::ok();
  }
  std::string serialize() const override {
    char range[64];
    std::snprintf(range, sizeof range, "%a", range_);
    std::string out = std::to_string(pass_) + " " + range + " " + std::to_string(count_);
    for (int64_t h : histogram_) {
      out += ' ';
      out += std::to_string(h);
    }
    return out;
  }
  Status deserialize(std::string_view bytes) override {
    std::istringstream in{std::string(bytes)};
    std::string range;
    in >> pass_ >> range >> count_;
    range_ = std::strtod(range.c_str(), nullptr);
    for (int64_t& h : histogram_) in >> h;
    return in.fail() ? invalid_input("bad state") : Status::ok();
  }
  TensorStatistics statistics() const override {
    TensorStatistics s;
    s.count = count_;
    s.histogram_range = range_;
    for (int64_t h : histogram_) s.histogram.push_back(static_cast<double>(h));
    return s;
  }

 private:
  int pass_ = 0;
  double range_ = 0.0;
  int64_t count_ = 0;
  std::array<int64_t, 8> histogram_{};
};

// Every observer's serialized state, by tensor name, after a two-pass sweep.
std::map<std::string, std::string> two_pass_states(const std::string& path, int threads, int64_t batch_size,
                                                   std::map<std::string, TensorStatistics>* statistics = nullptr,
                                                   std::string* progress_text = nullptr) {
  Expected<Model> model = import_onnx_file(std::string(QFLOW_SOURCE_DIR) + "/models/sample/sample_cnn.onnx");
  REQUIRE(model.has_value());
  Expected<std::unique_ptr<Executor>> executor = Executor::create(*model);
  REQUIRE(executor.has_value());
  DataSpec spec;
  spec.path = path;
  spec.batch_size = batch_size;
  Expected<Dataset> dataset = open_dataset(spec);
  REQUIRE(dataset.has_value());
  Expected<InputBinding> binding = bind_inputs(*model->graph, *dataset);
  REQUIRE_MESSAGE(binding.has_value(), binding.status().message());
  std::string sink;
  ProgressBar progress("sweep", dataset->count * 2, [&](std::string_view text) { sink += text; });
  ObserveOptions options;
  options.threads = threads;
  options.progress = &progress;
  const ObserverFactory make = [] { return Expected<std::shared_ptr<Observer>>(std::make_shared<TwoPassObserver>()); };
  Expected<ObserverMap> observed =
      observe_dataset(**executor, *binding, *dataset, make, options);
  progress.finish();
  REQUIRE_MESSAGE(observed.has_value(), observed.status().message());
  std::map<std::string, std::string> states;
  for (const auto& [name, observer] : *observed) {
    states[name] = observer->serialize();
    if (statistics) (*statistics)[name] = observer->statistics();
  }
  if (progress_text) *progress_text = sink;
  return states;
}
}  // namespace

TEST_CASE("dataset observe: statistics are identical for any threads, batch-size and sample order") {
  TempDir dir("dataset_observe");
  const std::vector<float> values = random_samples(kSamples);
  const std::string ordered = dir.file("ordered.npy");
  write_npy(ordered, {kSamples, 1, 28, 28}, values);

  // The same samples in a fixed shuffled order.
  std::vector<int64_t> order(kSamples);
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = 12345;
  for (int64_t i = kSamples - 1; i > 0; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((state >> 33) % static_cast<uint64_t>(i + 1))]);
  }
  std::vector<float> shuffled_values;
  for (int64_t i : order)
    shuffled_values.insert(shuffled_values.end(), values.begin() + i * kSampleSize, values.begin() + (i + 1) * kSampleSize);
  REQUIRE(shuffled_values != values);
  const std::string shuffled = dir.file("shuffled.npy");
  write_npy(shuffled, {kSamples, 1, 28, 28}, shuffled_values);

  Expected<StageResult> reference = observe(ordered, 1, 1);
  REQUIRE_MESSAGE(reference.has_value(), reference.status().message());
  const std::string& bytes = reference->artifact.bytes;
  CHECK(bytes.find("\"component\": \"minmax\",\n  \"samples\": 100,") != std::string::npos);
  // Every shard was merged: the input's statistics cover all samples.
  REQUIRE(reference->artifact.statistics);
  const TensorStatistics& input = reference->artifact.statistics->at("input");
  CHECK(input.count == kSamples * kSampleSize);
  CHECK(input.min == static_cast<double>(*std::min_element(values.begin(), values.end())));
  CHECK(input.max == static_cast<double>(*std::max_element(values.begin(), values.end())));
  CHECK(reference->artifact.statistics->at("prob").count == kSamples * 10);

  CHECK(statistics_bytes(ordered, 2, 1) == bytes);
  CHECK(statistics_bytes(ordered, 3, 16) == bytes);
  CHECK(statistics_bytes(ordered, 1, 16) == bytes);
  CHECK(statistics_bytes(ordered, 2, 7) == bytes);
  CHECK(statistics_bytes(shuffled, 2, 16) == bytes);
  CHECK(statistics_bytes(shuffled, 1, 1) == bytes);
}

TEST_CASE("dataset observe: two-pass observers start pass 1 from the merged pass-0 state in every shard") {
  TempDir dir("dataset_observe_two_pass");
  const std::vector<float> values = random_samples(kSamples);
  const std::string path = dir.file("samples.npy");
  write_npy(path, {kSamples, 1, 28, 28}, values);

  std::map<std::string, TensorStatistics> statistics;
  std::string progress;
  const auto reference = two_pass_states(path, 1, 1, &statistics, &progress);
  REQUIRE(statistics.count("input") == 1);
  const TensorStatistics& input = statistics.at("input");
  // Pass 0 counted once, not once per shard copy; the histogram covers every value once.
  CHECK(input.count == kSamples * kSampleSize);
  double range = 0.0;
  for (float v : values) range = std::max(range, std::fabs(static_cast<double>(v)));
  CHECK(input.histogram_range == range);
  std::array<double, 8> expected{};
  for (float v : values)
    expected[static_cast<std::size_t>(std::min(7.0, std::floor(std::fabs(static_cast<double>(v)) / range * 8.0)))] += 1.0;
  CHECK(input.histogram == std::vector<double>(expected.begin(), expected.end()));
  CHECK(progress.find("sweep  200/200 samples") != std::string::npos);

  CHECK(two_pass_states(path, 2, 1) == reference);
  CHECK(two_pass_states(path, 3, 16) == reference);
  CHECK(two_pass_states(path, 2, 5) == reference);
}

TEST_CASE("dataset observe: the shipped sample data gives the same statistics on 1 and 2 threads") {
  const std::string path = std::string(QFLOW_SOURCE_DIR) + "/models/sample/input.npy";
  const std::string one = statistics_bytes(path, 1, 1);
  CHECK(one.find("\"samples\": 4,") != std::string::npos);
  CHECK(statistics_bytes(path, 2, 16) == one);
}

TEST_CASE("dataset observe: samples that do not fit the model input are refused before running") {
  TempDir dir("dataset_observe_shape");
  const std::string path = dir.file("wrong.npy");
  write_npy(path, {2, 3, 4, 4}, std::vector<float>(2 * 3 * 4 * 4, 0.5f));
  Expected<StageResult> result = observe(path, 1, 1);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.status().message() ==
        "stage 'observe': samples are float [3, 4, 4], model input 'input' takes float [N, 1, 28, 28]");
}

}  // namespace qflow
