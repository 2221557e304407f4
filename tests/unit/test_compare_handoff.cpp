// Unit tests for CompareHandoff (framework/quant/compare_handoff.h).
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "framework/quant/compare_handoff.h"

namespace qflow {

TEST_CASE("CompareHandoff: the consumer runs every comparison, in order, until the producer finishes") {
  CompareHandoff handoff;
  std::vector<int> done;
  Status consumed = internal_error("not run");
  std::thread consumer([&] { consumed = handoff.drain_until_finished(); });
  for (int i = 0; i < 100; ++i)
    CHECK(handoff.push([&done, i] {
      done.push_back(i);
      return Status::ok();
    }, 16));
  handoff.finish();
  consumer.join();
  CHECK(consumed.is_ok());
  REQUIRE(done.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(done[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("CompareHandoff: the first failure is kept; the rest still run") {
  CompareHandoff handoff;
  int ran = 0;
  auto counted = [&ran](Status status) {
    return [&ran, status] {
      ++ran;
      return status;
    };
  };
  handoff.push(counted(invalid_input("first")), 1);
  handoff.push(counted(invalid_input("second")), 1);
  handoff.push(counted(Status::ok()), 1);
  handoff.finish();
  const Status status = handoff.drain_until_finished();
  CHECK(ran == 3);
  CHECK(status.message() == "first");
  CHECK(handoff.drain().message() == "first");  // what a later drain reports too
}

TEST_CASE("CompareHandoff: past the byte budget the producer keeps its comparison") {
  CompareHandoff handoff;
  const std::size_t half = CompareHandoff::kBudgetBytes / 2;
  auto ok = [] { return Status::ok(); };
  CHECK(handoff.push(ok, half));
  CHECK(handoff.push(ok, half));
  CHECK_FALSE(handoff.push(ok, 1));
  CHECK(handoff.drain().is_ok());
  CHECK(handoff.push(ok, 1));
  // One comparison larger than the budget is queued when nothing else is.
  CHECK(handoff.drain().is_ok());
  CHECK(handoff.push(ok, 3 * CompareHandoff::kBudgetBytes));
}

}  // namespace qflow
