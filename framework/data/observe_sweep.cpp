// observe_dataset: shards claimed by worker threads, merged in shard order after each pass.
#include "framework/data/observe_sweep.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace qflow {

namespace {

class Sweep {
 public:
  Sweep(const Executor& executor, const Value& input, const Shape& shape, const Dataset& dataset,
        const ObserverFactory& make, ProgressBar* progress)
      : executor_(executor), input_(input), shape_(shape), dataset_(dataset), make_(make), progress_(progress) {}

  Expected<std::shared_ptr<Observer>> make() {
    std::lock_guard<std::mutex> lock(make_mutex_);
    return make_();
  }

  // Samples [begin, end) in dataset order into `observers`, read batch-size at a time.
  Status run_shard(ObserverMap& observers, int64_t begin, int64_t end, int pass) {
    const int64_t batch = std::max<int64_t>(1, dataset_.spec.batch_size);
    std::vector<Tensor> samples;
    for (int64_t group = begin; group < end && !failed_.load(); group += batch) {
      const int64_t group_end = std::min(end, group + batch);
      samples.clear();
      QFLOW_RETURN_IF_ERROR(for_each_sample_in(dataset_, group, group_end, [&](int64_t, const Tensor& sample) {
        samples.push_back(sample);
        return Status::ok();
      }));
      for (std::size_t i = 0; i < samples.size(); ++i) {
        const Tensor fed = samples[i].reshaped(shape_);
        Status status = observe(observers, input_.name(), fed, pass);
        if (status.is_ok()) {
          auto outputs = executor_.run({{input_.name(), fed}}, [&](const Value& value, const Tensor& tensor) {
            return observe(observers, value.name(), tensor, pass);
          });
          status = outputs.status();
        }
        if (!status.is_ok()) return status.with_context(sample_location(dataset_, group + static_cast<int64_t>(i)));
      }
      if (progress_) progress_->advance(group_end - group);
    }
    return Status::ok();
  }

  void fail() { failed_ = true; }
  bool failed() const { return failed_.load(); }

 private:
  Status observe(ObserverMap& observers, const std::string& name, const Tensor& tensor, int pass) {
    if (tensor.dtype() != DType::Float32) return Status::ok();
    auto it = observers.find(name);
    if (it == observers.end()) {
      if (pass > 0) return Status::ok();
      QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> created, make());
      QFLOW_RETURN_IF_ERROR(created->begin_pass(0));
      it = observers.emplace(name, std::move(created)).first;
    }
    return it->second->observe(tensor).with_context("observing '" + name + "'");
  }

  const Executor& executor_;
  const Value& input_;
  const Shape& shape_;
  const Dataset& dataset_;
  const ObserverFactory& make_;
  ProgressBar* progress_;
  std::mutex make_mutex_;  // factories may be plugin code that is not thread-safe
  std::atomic<bool> failed_{false};
};

// Merges shard states in shard order into the first shard's.
Expected<ObserverMap> merge_shards(std::vector<ObserverMap>& shards) {
  ObserverMap merged = std::move(shards[0]);
  for (std::size_t s = 1; s < shards.size(); ++s) {
    for (auto& [name, observer] : shards[s]) {
      auto it = merged.find(name);
      if (it == merged.end()) merged.emplace(name, observer);
      else QFLOW_RETURN_IF_ERROR(it->second->merge(*observer).with_context("merging the observers of '" + name + "'"));
    }
  }
  return merged;
}

}  // namespace

Expected<ObserverMap> observe_dataset(const Executor& executor, const Value& input, const Shape& fed_shape,
                                      const Dataset& dataset, const ObserverFactory& make, const ObserveOptions& options) {
  if (dataset.count <= 0) return invalid_input("the dataset holds no samples");
  Sweep sweep(executor, input, fed_shape, dataset, make, options.progress);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> probe, sweep.make());
  const int passes = std::max(1, probe->passes());
  const int64_t shard_count = (dataset.count + kObserveShardSamples - 1) / kObserveShardSamples;
  const int workers = static_cast<int>(std::clamp<int64_t>(options.threads, 1, shard_count));

  ObserverMap merged;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<ObserverMap> shards(static_cast<std::size_t>(shard_count));
    if (pass > 0) {
      for (const auto& [name, observer] : merged) {
        const std::string state = observer->serialize();
        for (ObserverMap& shard : shards) {
          QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> copy, sweep.make());
          QFLOW_RETURN_IF_ERROR(copy->deserialize(state).with_context("copying the observer state of '" + name + "'"));
          QFLOW_RETURN_IF_ERROR(copy->begin_pass(pass));
          shard.emplace(name, std::move(copy));
        }
      }
    }
    std::vector<Status> results(static_cast<std::size_t>(shard_count));
    std::atomic<int64_t> next{0};
    auto work = [&] {
      for (int64_t s = next++; s < shard_count && !sweep.failed(); s = next++) {
        const int64_t begin = s * kObserveShardSamples;
        const int64_t end = std::min(dataset.count, begin + kObserveShardSamples);
        Status status = sweep.run_shard(shards[static_cast<std::size_t>(s)], begin, end, pass);
        if (!status.is_ok()) {
          results[static_cast<std::size_t>(s)] = std::move(status);
          sweep.fail();
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < workers; ++t) threads.emplace_back(work);
    work();
    for (std::thread& thread : threads) thread.join();
    for (const Status& status : results)
      if (!status.is_ok()) return status;
    QFLOW_ASSIGN_OR_RETURN(merged, merge_shards(shards));
  }
  return merged;
}

}  // namespace qflow
