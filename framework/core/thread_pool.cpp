// ThreadPool implementation: one job at a time, static partition, generation counter.
#include "framework/core/thread_pool.h"

#include <algorithm>

namespace qflow {

ThreadPool::ThreadPool(int threads) {
  const int workers = std::max(1, threads) - 1;
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this, i] { worker_loop(i + 1); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

namespace {
thread_local bool inside_job = false;

void chunk_bounds(int64_t n, int chunks, int index, int64_t& begin, int64_t& end) {
  const int64_t base = n / chunks, extra = n % chunks;
  begin = index * base + std::min<int64_t>(index, extra);
  end = begin + base + (index < extra ? 1 : 0);
}
}  // namespace

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || inside_job) {
    body(0, n);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  inside_job = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &body;
    job_size_ = n;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  int64_t begin = 0, end = 0;
  chunk_bounds(n, size(), 0, begin, end);
  if (begin < end) body(begin, end);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  inside_job = false;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job = nullptr;
    int64_t n = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      n = job_size_;
    }
    int64_t begin = 0, end = 0;
    chunk_bounds(n, size(), index, begin, end);
    inside_job = true;
    if (begin < end) (*job)(begin, end);
    inside_job = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace qflow
