// ThreadPool: static partitions, inline runs for small work, wake-ups after sleeping,
// nested and concurrent calls.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "framework/core/thread_pool.h"

namespace qflow {
namespace {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

// The chunks body saw, sorted by begin.
template <typename Call>
Chunks record(Call call) {
  std::mutex mutex;
  Chunks chunks;
  call([&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

// Chunks tile [0, n) without gaps or overlaps.
void check_tiling(const Chunks& chunks, int64_t n) {
  int64_t next = 0;
  for (const auto& [begin, end] : chunks) {
    CHECK(begin == next);
    CHECK(end > begin);
    next = end;
  }
  CHECK(next == n);
}

TEST_CASE("ThreadPool: every index is visited once, for any pool size and work estimate") {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
      for (int64_t cost : {int64_t{1}, int64_t{64}, ThreadPool::kMinParallelCost}) {
        std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
        pool.parallel_for(n, cost, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)].fetch_add(1);
        });
        CHECK(std::all_of(seen.begin(), seen.end(), [](const std::atomic<int>& s) { return s.load() == 1; }));
      }
    }
  }
}

TEST_CASE("ThreadPool: small work runs inline as one chunk on the calling thread") {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  bool on_caller = false;
  pool.parallel_for(100, 8, [&](int64_t begin, int64_t end) {
    ++calls;
    on_caller = std::this_thread::get_id() == caller;
    CHECK(begin == 0);
    CHECK(end == 100);
  });
  CHECK(calls == 1);
  CHECK(on_caller);
  // Just below the threshold for two chunks is still one chunk.
  const Chunks one = record([&](auto body) { pool.parallel_for(2, ThreadPool::kMinParallelCost - 1, body); });
  CHECK(one.size() == 1);
}

TEST_CASE("ThreadPool: the partition depends only on n, the work estimate and the pool size") {
  ThreadPool pool(4);
  const int64_t unit = ThreadPool::kMinParallelCost;
  // Work for four chunks: four even chunks, the remainder going to the first.
  const int64_t quarter = unit * 4 / 10 + 1;  // 10 units: just over 4 * kMinParallelCost
  const Chunks four = record([&](auto body) { pool.parallel_for(10, quarter, body); });
  CHECK(four == Chunks{{0, 3}, {3, 6}, {6, 8}, {8, 10}});
  // A large job: chunks of kMinParallelCost, up to kChunksPerThread per thread.
  const Chunks ten = record([&](auto body) { pool.parallel_for(40, unit / 4, body); });
  CHECK(ten.size() == 10);
  for (const auto& [begin, end] : ten) CHECK(end - begin == 4);
  const Chunks many = record([&](auto body) { pool.parallel_for(100, unit, body); });
  REQUIRE(many.size() == static_cast<size_t>(4 * ThreadPool::kChunksPerThread));
  for (size_t i = 0; i < many.size(); ++i) CHECK(many[i].second - many[i].first == (i < 100 % many.size() ? 7 : 6));
  check_tiling(many, 100);
  // Work for two and a half chunks: two chunks, not four thin ones.
  const Chunks two = record([&](auto body) { pool.parallel_for(10, unit / 4, body); });
  CHECK(two == Chunks{{0, 5}, {5, 10}});
  // Without an estimate every thread gets a chunk.
  const Chunks plain = record([&](auto body) { pool.parallel_for(6, body); });
  CHECK(plain == Chunks{{0, 2}, {2, 4}, {4, 5}, {5, 6}});
  // Repeated calls give the same chunks.
  for (int i = 0; i < 50; ++i) CHECK(record([&](auto body) { pool.parallel_for(10, quarter, body); }) == four);
  check_tiling(four, 10);
}

TEST_CASE("ThreadPool: jobs back to back and after the workers fell asleep all complete") {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  auto job = [&] {
    pool.parallel_for(3000, ThreadPool::kMinParallelCost, [&](int64_t begin, int64_t end) {
      total.fetch_add(end - begin);
    });
  };
  for (int i = 0; i < 2000; ++i) job();
  CHECK(total.load() == 2000 * 3000);
  for (int i = 0; i < 5; ++i) {
    // Long enough for the workers to stop spinning and wait on the condition variable.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    job();
  }
  CHECK(total.load() == 2005 * 3000);
}

TEST_CASE("ThreadPool: a call from inside a body runs inline; calls from two threads are serialised") {
  ThreadPool pool(2);
  std::atomic<int64_t> inner_total{0};
  pool.parallel_for(2, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Chunks chunks = record([&](auto body) { pool.parallel_for(1000, ThreadPool::kMinParallelCost, body); });
      CHECK(chunks == Chunks{{0, 1000}});
      inner_total.fetch_add(1000);
    }
  });
  CHECK(inner_total.load() == 2000);

  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int i = 0; i < 500; ++i)
      pool.parallel_for(64, ThreadPool::kMinParallelCost, [&](int64_t begin, int64_t end) { total.fetch_add(end - begin); });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  CHECK(total.load() == 2 * 500 * 64);
}

}  // namespace
}  // namespace qflow
