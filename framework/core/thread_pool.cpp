// ThreadPool implementation: one job at a time, a static partition whose chunks the caller
// and the workers claim with a compare-and-swap on (generation, next chunk); workers and the
// waiting caller spin briefly before sleeping so back-to-back jobs of one model run do not
// pay a futex wake each, and a worker that wakes late finds its chunk already done.
#include "framework/core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace qflow {

namespace {
thread_local bool inside_job = false;

// How long a thread polls before sleeping on a condition variable: long enough to catch
// the next kernel of a run when it follows at once, short enough that a poller is rarely
// preempted mid-poll. On a busy machine a preempted poller answers later than a woken
// sleeper would: polling for 20-50 us, or yielding while polling, made PP-OCR cls several
// times slower at 2 threads on an oversubscribed 2-core host.
constexpr auto kSpin = std::chrono::microseconds(5);

void chunk_bounds(int64_t n, int chunks, int index, int64_t& begin, int64_t& end) {
  if (index >= chunks) {
    begin = end = n;
    return;
  }
  const int64_t base = n / chunks, extra = n % chunks;
  begin = index * base + std::min<int64_t>(index, extra);
  end = begin + base + (index < extra ? 1 : 0);
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls `ready` for up to kSpin without system calls; true when it became true.
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 16 == 0 && std::chrono::steady_clock::now() >= deadline) return ready();
  }
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int workers = std::max(1, threads) - 1;
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  run_chunks(n, size(), body);
}

void ThreadPool::parallel_for(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  // Saturating n * cost: chunk counts only matter up to size() * kChunksPerThread.
  const int64_t cost = std::max<int64_t>(1, cost_per_unit);
  const int64_t total = n > INT64_MAX / cost ? INT64_MAX : n * cost;
  const int64_t chunks = std::clamp<int64_t>(total / kMinParallelCost, 1, size() * kChunksPerThread);
  run_chunks(n, static_cast<int>(chunks), body);
}

void ThreadPool::run_chunks(int64_t n, int chunks, const std::function<void(int64_t, int64_t)>& body) {
  chunks = static_cast<int>(std::min<int64_t>(chunks, n));
  if (workers_.empty() || chunks <= 1 || inside_job) {
    body(0, n);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  inside_job = true;
  uint32_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_.store(&body, std::memory_order_relaxed);
    job_size_.store(n, std::memory_order_relaxed);
    job_chunks_.store(chunks, std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    generation = static_cast<uint32_t>(claim_.load(std::memory_order_relaxed) >> 32) + 1;
    claim_.store(uint64_t{generation} << 32, std::memory_order_release);
  }
  wake_.notify_all();  // no system call when every worker is still spinning
  work_on(generation);
  auto finished = [this, chunks] { return finished_.load(std::memory_order_acquire) == chunks; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, finished);
  }
  inside_job = false;
}

void ThreadPool::work_on(uint32_t generation) {
  uint64_t seen = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(seen >> 32) != generation) return;
    const int chunks = job_chunks_.load(std::memory_order_relaxed);
    const int chunk = static_cast<int>(seen & 0xffffffffu);
    if (chunk >= chunks) return;
    // Fails, reloading `seen`, when another thread claimed first or a new job began.
    if (!claim_.compare_exchange_weak(seen, seen + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Claimed: the job cannot change before this chunk is counted as finished.
    int64_t begin = 0, end = 0;
    chunk_bounds(job_size_.load(std::memory_order_relaxed), chunks, chunk, begin, end);
    if (begin < end) (*job_.load(std::memory_order_relaxed))(begin, end);
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      // Taking the mutex orders this notify after a sleeping caller's last check.
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
    seen = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  auto generation = [this] { return static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32); };
  auto woken = [&] { return stopping_.load(std::memory_order_acquire) || generation() != seen; };
  inside_job = true;  // a body that calls parallel_for again runs it inline
  for (;;) {
    if (!spin_until(woken)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, woken);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation();
    work_on(seen);
  }
}

}  // namespace qflow
