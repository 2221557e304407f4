// CompareHandoff: a byte-bounded queue of comparisons and the thread that drains it.
#include "framework/quant/compare_handoff.h"

#include <utility>

namespace qflow {

bool CompareHandoff::push(Compare compare, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes_ + bytes > kBudgetBytes && !queue_.empty()) return false;
  queue_.push_back({std::move(compare), bytes});
  bytes_ += bytes;
  ready_.notify_one();
  return true;
}

Status CompareHandoff::drain() {
  for (;;) {
    Queued next;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty()) return status_;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    Status s = next.compare();
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_ -= next.bytes;
    if (!s.is_ok() && status_.is_ok()) status_ = std::move(s);
  }
}

Status CompareHandoff::drain_until_finished() {
  for (;;) {
    QFLOW_RETURN_IF_ERROR(drain());
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return finished_ || !queue_.empty(); });
    if (finished_ && queue_.empty()) return status_;
  }
}

void CompareHandoff::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
  ready_.notify_one();
}

}  // namespace qflow
