// Values computed a share at a time: rank r of N computes the indices shard_range(n, r, N)
// of a vector of n doubles (a contiguous slice, in index order), and every rank ends with
// all n, bit for bit as their ranks computed them, so that sums over them in index order
// are those of one process.
#pragma once

#include <vector>

#include "framework/distributed/shard_range.h"
#include "framework/distributed/world.h"
#include "qflow/core/status.h"

namespace qflow {

// The slice of `n` indices this rank computes (all of them without a distributed world).
inline ShardRange my_slice(const World* world, int64_t n) {
  if (!world || !world->distributed()) return {0, n};
  return shard_range(n, world->rank(), world->size());
}

// Every rank calls it with its slice of `values` filled (or `own` failed): afterwards every
// rank holds all values, or every rank gets the failure of the lowest rank that had one.
// `tag` keeps concurrent exchanges of one run apart.
Status share_slices(const World& world, int tag, std::vector<double>& values, const Status& own);

}  // namespace qflow
