// CompareHandoff: comparisons one thread found ready, done by another. In the per-layer
// comparison the float run's thread also runs every isolated model, so it had most of a
// sample's work and the QDQ run's thread waited for it (PP-OCRv4 det: the float thread busy
// for 72% of the report's processor time on a 2-core Xeon with avx2 avx512f avx_vnni
// avx512_vnni). The float thread hands its pairs over; the QDQ thread compares them between
// its own nodes and, once its run is over, until the float run is.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

#include "qflow/core/status.h"

namespace qflow {

class CompareHandoff {
 public:
  using Compare = std::function<Status()>;
  // The queued comparisons hold their tensors: past this many bytes the producer compares
  // itself (without a budget the det report held 150 MB more).
  static constexpr std::size_t kBudgetBytes = std::size_t{64} << 20;

  // Queues `compare` (holding `bytes` of tensors), or returns false when that would pass
  // the budget and something is queued already.
  bool push(Compare compare, std::size_t bytes);
  // Runs what is queued, on the calling thread, until the queue is empty; returns the first
  // failure of any comparison run so far.
  Status drain();
  // Drains until finish() was called and nothing is left.
  Status drain_until_finished();
  // The producer will queue nothing more.
  void finish();

 private:
  struct Queued {
    Compare compare;
    std::size_t bytes = 0;
  };
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Queued> queue_;
  std::size_t bytes_ = 0;  // of the queued tensors
  bool finished_ = false;
  Status status_ = Status::ok();
};

}  // namespace qflow
