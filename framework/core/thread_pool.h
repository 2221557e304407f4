// ThreadPool: a fixed set of workers that kernels split loops across.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qflow {

class ThreadPool {
 public:
  // Work below this many cost units runs on the calling thread: handing a chunk to a
  // worker and waiting for it costs about as much as computing it (a cost unit is about
  // one arithmetic operation or one element copied). Measured at 2 threads on 2 cores: at
  // 32768 the small convs of the Fashion-MNIST sample and PP-OCR cls were split, which made
  // them slower than at 1 thread (0.095 -> 0.146 ms, 0.83 -> 1.00 ms); at 262144 the
  // Fashion-MNIST 1x1 convs (about 600000 units) still took 0.041 ms split against 0.024
  // whole. From 262144 to 1048576 (medians, three rounds alternating): Fashion-MNIST
  // 0.114/0.107/0.105 -> 0.097/0.103/0.106 ms, cls 1.07/0.97/1.04 -> 0.88/0.93/0.96 ms,
  // rec and det unchanged; at 4194304 rec lost 5% (Xeon with avx2 avx512f avx_vnni avx512_vnni).
  static constexpr int64_t kMinParallelCost = 1048576;
  // A job is cut into chunks of at least kMinParallelCost, up to kChunksPerThread per
  // thread, so that a thread the machine holds up for a while does not hold up a large job:
  // the others claim its share. With one chunk per thread, PP-OCR det at 2 threads on a
  // loaded 2-core host ran at 1.14x its 1-thread speed where ONNX Runtime ran at 1.37x.
  static constexpr int64_t kChunksPerThread = 4;

  // `threads` counts the calling thread: 1 means no workers, everything runs inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs body(begin, end) over a static partition of [0, n); returns when all chunks are
  // done. The caller and the workers claim chunks as they come, so a worker still asleep
  // never delays the job: the caller runs what nobody claimed. There are
  // n * cost_per_unit / kMinParallelCost chunks, at most kChunksPerThread per thread, and one
  // (run inline) below 2 * kMinParallelCost. The partition depends only on n, cost_per_unit and size(), so
  // results that are reduced per chunk stay deterministic. Calls from several threads are
  // serialised; a call from inside a body runs inline.
  void parallel_for(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& body);
  // Every unit is substantial work (a sample, a model run): always split.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body);

 private:
  void run_chunks(int64_t n, int chunks, const std::function<void(int64_t, int64_t)>& body);
  // Runs chunks of job `generation` until none is left unclaimed.
  void work_on(uint32_t generation);
  void worker_loop();
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;      // guards the sleeps on wake_ and done_
  std::condition_variable wake_;
  std::condition_variable done_;
  // The current job, stable from the store that publishes its generation until its last
  // chunk is done.
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_{nullptr};
  std::atomic<int64_t> job_size_{0};
  std::atomic<int> job_chunks_{0};
  // The job's generation (high 32 bits) and its next unclaimed chunk (low 32 bits): a claim
  // is a compare-and-swap on both, so a thread that looked at an older job claims nothing.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> finished_{0};  // chunks of the current job done
  std::atomic<bool> stopping_{false};
};

}  // namespace qflow
