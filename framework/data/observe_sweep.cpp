// observe_dataset: shards claimed by worker threads, merged in shard order after each pass.
#include "framework/data/observe_sweep.h"

#include <algorithm>
#include <atomic>
#include <boost/endian/conversion.hpp>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "framework/distributed/shard_range.h"

namespace qflow {

namespace {

// Messages between ranks: a shard's (or the merged) observer states, an error, or a shard a
// rank left out after an earlier failure of its own.
constexpr char kStates = 'o';
constexpr char kError = 'e';
constexpr char kSkipped = 's';

void put_u64(std::string& out, uint64_t value) {
  boost::endian::native_to_little_inplace(value);
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

bool get_u64(std::string_view& in, uint64_t& value) {
  if (in.size() < sizeof value) return false;
  std::memcpy(&value, in.data(), sizeof value);
  boost::endian::little_to_native_inplace(value);
  in.remove_prefix(sizeof value);
  return true;
}

bool get_bytes(std::string_view& in, std::string_view& bytes) {
  uint64_t size = 0;
  if (!get_u64(in, size) || size > in.size()) return false;
  bytes = in.substr(0, size);
  in.remove_prefix(size);
  return true;
}

std::string states_message(const ObserverMap& observers) {
  std::string out(1, kStates);
  put_u64(out, observers.size());
  for (const auto& [name, observer] : observers) {
    const std::string state = observer->serialize();
    put_u64(out, name.size());
    out += name;
    put_u64(out, state.size());
    out += state;
  }
  return out;
}

std::string error_message(const Status& status) {
  std::string out(1, kError);
  out += static_cast<char>(status.code());
  out += status.message();
  return out;
}

class Sweep {
 public:
  Sweep(const Executor& executor, const InputBinding& binding, const Dataset& dataset, const ObserverFactory& make,
        const ObserveOptions& options)
      : executor_(executor), binding_(binding), dataset_(dataset), make_(make), progress_(options.progress),
        outputs_(options.outputs) {}

  Expected<std::shared_ptr<Observer>> make() {
    std::lock_guard<std::mutex> lock(make_mutex_);
    return make_();
  }

  // Samples [begin, end) in dataset order into `observers`, read batch-size at a time.
  Status run_shard(ObserverMap& observers, int64_t begin, int64_t end, int pass) {
    const int64_t batch = std::max<int64_t>(1, dataset_.spec.batch_size);
    std::vector<Feeds> samples;
    for (int64_t group = begin; group < end && !failed_.load(); group += batch) {
      const int64_t group_end = std::min(end, group + batch);
      samples.clear();
      QFLOW_RETURN_IF_ERROR(for_each_feed_in(dataset_, binding_, group, group_end, [&](int64_t, const Feeds& feeds) {
        samples.push_back(feeds);
        return Status::ok();
      }));
      for (std::size_t i = 0; i < samples.size(); ++i) {
        Status status = Status::ok();
        for (auto it = samples[i].begin(); status.is_ok() && it != samples[i].end(); ++it)
          status = observe(observers, it->first, it->second, pass);
        if (status.is_ok()) {
          auto outputs = executor_.run(samples[i], [&](const Value& value, const Tensor& tensor) {
            return observe(observers, value.name(), tensor, pass);
          });
          status = outputs.status();
          if (status.is_ok() && pass == 0 && outputs_) outputs_(group + static_cast<int64_t>(i), *outputs);
        }
        if (!status.is_ok()) return status.with_context(sample_location(dataset_, group + static_cast<int64_t>(i)));
      }
      if (progress_) progress_->advance(group_end - group);
    }
    return Status::ok();
  }

  // Observers restored from a states_message, made by the stage's factory.
  Expected<ObserverMap> restore(std::string_view in) {
    uint64_t count = 0;
    if (!get_u64(in, count)) return internal_error("a rank sent a truncated observer state");
    ObserverMap observers;
    for (uint64_t i = 0; i < count; ++i) {
      std::string_view name, state;
      if (!get_bytes(in, name) || !get_bytes(in, state)) return internal_error("a rank sent a truncated observer state");
      QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> observer, make());
      QFLOW_RETURN_IF_ERROR(observer->deserialize(state).with_context(
          "restoring the observer state of '" + std::string(name) + "' sent by another rank"));
      observers.emplace(std::string(name), std::move(observer));
    }
    return observers;
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
    Status status = it->second->observe(tensor);
    // The context string is built only on failure: this runs for every value of every sample.
    if (!status.is_ok()) return status.with_context("observing '" + name + "'");
    return status;
  }

  const Executor& executor_;
  const InputBinding& binding_;
  const Dataset& dataset_;
  const ObserverFactory& make_;
  ProgressBar* progress_;
  const std::function<void(int64_t, const std::map<std::string, Tensor>&)>& outputs_;
  std::mutex make_mutex_;  // factories may be plugin code that is not thread-safe
  std::atomic<bool> failed_{false};
};

// Folds finished shards into one state strictly in shard order, as soon as every earlier
// shard is in, so only shards finished out of order wait in memory (about one per thread),
// not one state per shard of the whole dataset.
class ShardMerger {
 public:
  explicit ShardMerger(int64_t shards) : waiting_(static_cast<std::size_t>(shards)) {}

  // Returns the first merge failure, with the index of the shard whose merge failed.
  Status add(int64_t shard, ObserverMap state, int64_t& failed_shard) {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_[static_cast<std::size_t>(shard)] = std::move(state);
    while (next_ < static_cast<int64_t>(waiting_.size()) && waiting_[static_cast<std::size_t>(next_)]) {
      std::optional<ObserverMap>& ready = waiting_[static_cast<std::size_t>(next_)];
      if (next_ == 0) {
        merged_ = std::move(*ready);
      } else {
        for (auto& [name, observer] : *ready) {
          auto it = merged_.find(name);
          if (it == merged_.end()) {
            merged_.emplace(name, observer);
            continue;
          }
          Status status = it->second->merge(*observer).with_context("merging the observers of '" + name + "'");
          if (!status.is_ok()) {
            failed_shard = next_;
            return status;
          }
        }
      }
      ready.reset();
      ++next_;
    }
    return Status::ok();
  }

  ObserverMap take() { return std::move(merged_); }

 private:
  std::mutex mutex_;
  std::vector<std::optional<ObserverMap>> waiting_;
  int64_t next_ = 0;
  ObserverMap merged_;
};

}  // namespace

Expected<ObserverMap> observe_dataset(const Executor& executor, const InputBinding& binding, const Dataset& dataset,
                                      const ObserverFactory& make, const ObserveOptions& options) {
  if (dataset.count <= 0) return invalid_input("the dataset holds no samples");
  Sweep sweep(executor, binding, dataset, make, options);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> probe, sweep.make());
  const int passes = std::max(1, probe->passes());
  const int64_t shard_count = (dataset.count + kObserveShardSamples - 1) / kObserveShardSamples;
  const World one;
  const World& world = options.world ? *options.world : one;
  const ShardRange mine = shard_range(shard_count, world.rank(), world.size());
  const int64_t local_count = mine.end - mine.begin;
  const int workers = local_count == 0 ? 0 : static_cast<int>(std::clamp<int64_t>(options.threads, 1, local_count));

  ObserverMap merged;
  for (int pass = 0; pass < passes; ++pass) {
    // Pass k > 0: every shard starts from a copy of the state merged after pass k-1.
    std::map<std::string, std::string> start;
    for (const auto& [name, observer] : merged) start.emplace(name, observer->serialize());
    auto start_shard = [&](ObserverMap& shard) -> Status {
      for (const auto& [name, state] : start) {
        QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> copy, sweep.make());
        QFLOW_RETURN_IF_ERROR(copy->deserialize(state).with_context("copying the observer state of '" + name + "'"));
        QFLOW_RETURN_IF_ERROR(copy->begin_pass(pass));
        shard.emplace(name, std::move(copy));
      }
      return Status::ok();
    };

    // Rank 0 merges every shard (its own as they finish, the others' as they arrive);
    // another rank keeps each of its shards' messages for rank 0.
    ShardMerger merger(world.is_root() ? shard_count : 0);
    std::vector<std::string> outbox(world.is_root() ? 0 : static_cast<std::size_t>(local_count),
                                    std::string(1, kSkipped));
    std::vector<Status> results(static_cast<std::size_t>(shard_count));
    std::atomic<int64_t> next{mine.begin};
    auto work = [&] {
      for (int64_t s = next++; s < mine.end && !sweep.failed(); s = next++) {
        const int64_t begin = s * kObserveShardSamples;
        const int64_t end = std::min(dataset.count, begin + kObserveShardSamples);
        ObserverMap shard;
        Status status = start_shard(shard);
        if (status.is_ok()) status = sweep.run_shard(shard, begin, end, pass);
        int64_t failed_shard = s;
        if (status.is_ok()) {
          if (world.is_root())
            status = merger.add(s, std::move(shard), failed_shard);
          else
            outbox[static_cast<std::size_t>(s - mine.begin)] = states_message(shard);
        }
        if (!status.is_ok()) {
          if (!world.is_root()) outbox[static_cast<std::size_t>(s - mine.begin)] = error_message(status);
          results[static_cast<std::size_t>(failed_shard)] = std::move(status);
          sweep.fail();
        }
      }
    };
    {
      std::vector<std::thread> threads;
      for (int t = 1; t < workers; ++t) threads.emplace_back(work);
      if (workers > 0) work();
      for (std::thread& thread : threads) thread.join();
    }
    if (!world.distributed()) {
      // The first failure in shard order, whichever thread met it first.
      for (const Status& status : results)
        if (!status.is_ok()) return status;
      merged = merger.take();
      continue;
    }

    // Only this thread talks to other ranks; the tag keeps the passes apart.
    std::string answer;
    if (world.is_root()) {
      bool failed = std::any_of(results.begin(), results.end(), [](const Status& s) { return !s.is_ok(); });
      for (int rank = 1; rank < world.size(); ++rank) {
        const ShardRange theirs = shard_range(shard_count, rank, world.size());
        for (int64_t s = theirs.begin; s < theirs.end; ++s) {
          const std::string message = world.receive(rank, pass);
          std::string_view body = std::string_view(message).substr(message.empty() ? 0 : 1);
          Status status = Status::ok();
          if (!message.empty() && message[0] == kError && !body.empty()) {
            status = Status(static_cast<StatusCode>(body[0]), std::string(body.substr(1)));
          } else if (failed) {
            // After the first failure in shard order the rest is only drained.
          } else if (!message.empty() && message[0] == kStates) {
            // Every earlier shard is merged by now, so a merge failure is this shard's.
            Expected<ObserverMap> restored = sweep.restore(body);
            int64_t failed_shard = s;
            status = restored ? merger.add(s, std::move(*restored), failed_shard) : restored.status();
          } else {
            // A shard skipped without an earlier error would leave a hole in the merge.
            status = internal_error("rank " + std::to_string(rank) + " sent no observer state for shard " +
                                    std::to_string(s));
          }
          if (!status.is_ok()) {
            results[static_cast<std::size_t>(s)] = std::move(status);
            failed = true;
          }
        }
      }
      answer = states_message(merger.take());
      for (const Status& status : results)
        if (!status.is_ok()) {
          answer = error_message(status);
          break;
        }
    } else {
      for (const std::string& message : outbox) world.send(0, pass, message);
    }
    world.broadcast_from_root(answer);
    if (answer.size() >= 2 && answer[0] == kError)
      return Status(static_cast<StatusCode>(answer[1]), answer.substr(2));
    if (answer.empty() || answer[0] != kStates) return internal_error("rank 0 sent no merged observer state");
    QFLOW_ASSIGN_OR_RETURN(merged, sweep.restore(std::string_view(answer).substr(1)));
  }
  return merged;
}

}  // namespace qflow
