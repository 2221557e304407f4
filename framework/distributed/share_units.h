// Results computed a share at a time across the ranks of a distributed run: unit i of a vector
// of doubles (`width` values) is computed by rank owner(i), and every rank ends with all of
// them, bit for bit as their ranks computed them, so that sums over them in index order are
// those of one process (docs/distributed.md).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "framework/distributed/shard_range.h"
#include "framework/distributed/world.h"
#include "qflow/core/status.h"

namespace qflow {

// Every rank calls it with the units it owns filled in `values`, or failed in `failures` (one
// status per unit, ok otherwise; other ranks' entries are ignored). Afterwards every rank holds
// every unit, or every rank gets the first failure in unit order. `tag` keeps the exchanges of
// one run apart. Without a distributed world: the first failure, values untouched.
Status share_units(const World& world, int tag, std::size_t width, const std::function<int(std::size_t)>& owner,
                   std::vector<double>& values, std::vector<Status>& failures);

// The contiguous slice of `n` samples this rank computes: shard_range(n, rank, ranks), all of
// them without a distributed world.
inline ShardRange my_slice(const World* world, int64_t n) {
  if (!world || !world->distributed()) return {0, n};
  return shard_range(n, world->rank(), world->size());
}

// share_units over one value per sample, each rank owning its my_slice; `own` is this rank's
// failure (it counts as that of its slice's first sample; a rank without samples has none).
Status share_slices(const World& world, int tag, std::vector<double>& values, const Status& own);

// share_units over `width` values per sample (failures.size() samples), each rank owning its
// my_slice.
Status share_sample_rows(const World& world, int tag, std::size_t width, std::vector<double>& values,
                         std::vector<Status>& failures);

}  // namespace qflow
