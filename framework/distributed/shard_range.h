// Which shards of a sweep a rank observes: contiguous ranges in dataset order.
#pragma once

#include <cstdint>

namespace qflow {

struct ShardRange {
  int64_t begin = 0;  // first shard
  int64_t end = 0;    // one past the last
};

// Rank r of `ranks` gets shards [r*S/ranks, (r+1)*S/ranks) of S: contiguous, in rank order,
// sizes differing by at most one, so concatenating the ranks' ranges gives 0..S in order.
inline ShardRange shard_range(int64_t shards, int rank, int ranks) {
  return {shards * rank / ranks, shards * (rank + 1) / ranks};
}

}  // namespace qflow
