// Unit tests for the distributed world: a plain process is a world of one, and the shard
// ranges of N ranks are contiguous, in rank order, and cover every shard exactly once.
#include <doctest/doctest.h>

#include <cstdint>

#include "framework/distributed/shard_range.h"
#include "framework/distributed/world.h"

namespace qflow {
namespace {

TEST_CASE("a process not launched by mpirun is a world of one") {
  const World& world = World::get();
  CHECK(world.rank() == 0);
  CHECK(world.size() == 1);
  CHECK(world.is_root());
  CHECK_FALSE(world.distributed());
  world.abort(2);  // a world of one has nobody to stop: returns
}

TEST_CASE("shard ranges are contiguous and in rank order") {
  for (int64_t shards : {0, 1, 3, 7, 32, 1001})
    for (int ranks : {1, 2, 3, 4, 8}) {
      int64_t expected_begin = 0;
      for (int rank = 0; rank < ranks; ++rank) {
        const ShardRange range = shard_range(shards, rank, ranks);
        CHECK(range.begin == expected_begin);
        CHECK(range.end >= range.begin);
        CHECK(range.end - range.begin <= shards / ranks + 1);
        expected_begin = range.end;
      }
      CHECK(expected_begin == shards);
    }
  // 200 samples are 7 shards of 32: four ranks take 1, 2, 2 and 2 of them.
  CHECK(shard_range(7, 0, 4).end == 1);
  CHECK(shard_range(7, 3, 4).begin == 5);
}

}  // namespace
}  // namespace qflow
