// Helpers shared by the dataset tests: a temporary folder per test and .npy fixtures.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/data/npy.h"
#include "framework/data/dataset.h"

namespace qflow::test {

// A fresh folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("qflow_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_npy(const std::string& path, Shape shape, const std::vector<float>& values) {
  REQUIRE(write_npy_file(path, Tensor::from_vector<float>(std::move(shape), values)).is_ok());
}

// Value k of sample i in test batches: distinct for every (i, k).
inline float batch_value(int64_t i, int64_t k) { return static_cast<float>(i) * 100.0f + static_cast<float>(k) * 0.5f; }

inline std::vector<float> batch_values(int64_t samples, int64_t per_sample, int64_t first = 0) {
  std::vector<float> values;
  for (int64_t i = 0; i < samples; ++i)
    for (int64_t k = 0; k < per_sample; ++k) values.push_back(batch_value(first + i, k));
  return values;
}

inline DataSpec spec_for(const std::string& path) {
  DataSpec spec;
  spec.path = path;
  return spec;
}

// Every sample in dataset order as flat float vectors (float32 datasets).
inline std::vector<std::vector<float>> all_samples(const Dataset& dataset, int64_t begin, int64_t end) {
  std::vector<std::vector<float>> out;
  const Status status = for_each_sample_in(dataset, begin, end, [&](int64_t index, const std::vector<Tensor>& samples) {
    REQUIRE(samples.size() == 1);
    const Tensor& sample = samples[0];
    CHECK(index == begin + static_cast<int64_t>(out.size()));
    CHECK(sample.shape() == dataset.first().sample_shape);
    out.emplace_back(sample.span<float>().begin(), sample.span<float>().end());
    return Status::ok();
  });
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  return out;
}

inline std::vector<std::vector<float>> all_samples(const Dataset& dataset) { return all_samples(dataset, 0, dataset.count); }

}  // namespace qflow::test
