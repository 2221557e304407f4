// ThreadPool: a fixed set of workers that kernels split loops across.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qflow {

class ThreadPool {
 public:
  // `threads` counts the calling thread: 1 means no workers, everything runs inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs body(begin, end) over a static partition of [0, n) into size() chunks, the
  // caller taking the first; returns when all are done. The partition depends only on n
  // and size(), so results that are reduced per chunk stay deterministic. Calls from
  // several threads are serialised; a call from inside a body runs inline.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_size_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace qflow
