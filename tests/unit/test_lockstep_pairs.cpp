// Unit tests for LockstepPairs: the float and QDQ runs of one sample meeting tensor by tensor.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "framework/quant/lockstep_pairs.h"

namespace qflow {

namespace {
Tensor filled(float value) { return Tensor::from_vector<float>({4}, {value, value, value, value}); }
}  // namespace

TEST_CASE("lockstep pairs: the second deposit of a pair gets the first") {
  LockstepPairs pairs;
  CHECK_FALSE(pairs.deposit(LockstepPairs::Float, 3, filled(1.0f)));
  auto partner = pairs.deposit(LockstepPairs::Qdq, 3, filled(2.0f));
  REQUIRE(partner);
  CHECK(partner->data<float>()[0] == 1.0f);
  CHECK_FALSE(pairs.unmatched_qdq_row());
  CHECK_FALSE(pairs.deposit(LockstepPairs::Qdq, 5, filled(2.0f)));
  CHECK(pairs.unmatched_qdq_row() == std::size_t{5});
}

TEST_CASE("lockstep pairs: a run ahead pauses within the budget and both finish whatever the order") {
  // Budget of one tensor: the float side produces pairs in order, the QDQ side in reverse
  // blocks of four, so each side keeps running ahead of the other and pausing. Neither may
  // deadlock, and every pair must meet exactly once.
  constexpr std::size_t kPairs = 64;
  LockstepPairs pairs(filled(0).nbytes());
  std::atomic<int> met{0};
  auto side = [&](LockstepPairs::Side self, std::vector<std::size_t> order) {
    for (std::size_t index : order) {
      if (auto partner = pairs.deposit(self, index, filled(static_cast<float>(index)))) {
        CHECK(partner->data<float>()[0] == static_cast<float>(index));
        ++met;
      }
      CHECK(pairs.wait_for_room(self).is_ok());
    }
    pairs.finish(self, true);
  };
  std::vector<std::size_t> in_order, reversed_blocks;
  for (std::size_t i = 0; i < kPairs; ++i) in_order.push_back(i);
  for (std::size_t block = 0; block < kPairs; block += 4)
    for (std::size_t i = 4; i-- > 0;) reversed_blocks.push_back(block + i);
  std::thread qdq([&] { side(LockstepPairs::Qdq, reversed_blocks); });
  side(LockstepPairs::Float, in_order);
  qdq.join();
  CHECK(met == static_cast<int>(kPairs));
  CHECK_FALSE(pairs.unmatched_qdq_row());
  CHECK_FALSE(pairs.first_failed());
}

TEST_CASE("lockstep pairs: a failed run stops its partner instead of leaving it paused") {
  LockstepPairs pairs(1);
  CHECK_FALSE(pairs.deposit(LockstepPairs::Float, 0, filled(1.0f)));
  std::thread qdq([&] { pairs.finish(LockstepPairs::Qdq, false); });
  const Status waited = pairs.wait_for_room(LockstepPairs::Float);
  qdq.join();
  CHECK_FALSE(waited.is_ok());
  CHECK(pairs.first_failed() == LockstepPairs::Qdq);
}

}  // namespace qflow
