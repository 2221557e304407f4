// The observer stage over streamed samples: statistics are byte-identical for any thread
// count, any batch-size and (minmax merges order-independently) any sample order.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <numeric>

#include "framework/core/file_io.h"
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
