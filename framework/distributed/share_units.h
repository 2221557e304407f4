// Results computed a share at a time across the ranks of a distributed run: unit i of a vector
// of doubles (`width` values) is computed by rank owner(i), and every rank ends with all of
// them, bit for bit as their ranks computed them, so that sums over them in index order are
// those of one process (docs/distributed.md).
#pragma once

#include <cstddef>
#include <cstdint>
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

// One rank's sweep over its slice (my_slice) of `count` samples whose per-sample results (rows
// of `width` doubles) are then shared with share_units, each rank owning its slice. It keeps
// this rank's first failure at the sample it belongs to, so that every rank ends with the
// first failure in sample order, as one process would report it. Samples are measured in
// order; after a failure the rank measures no more.
class SliceSweep {
 public:
  SliceSweep(const World* world, int64_t count);
  bool distributed() const { return world_ != nullptr; }
  const ShardRange& slice() const { return slice_; }
  // This rank's first failure (ok so far): what a sweep's callback returns to stop reading.
  const Status& status() const { return own_; }
  void measured(int64_t index) { next_ = index + 1; }
  void failed(int64_t index, Status failure);
  // Ends the sweep. `swept`: what reading the samples returned (a read failure belongs to the
  // first sample not measured). In a distributed world shares `rows` (`width` values per
  // sample, this rank's slice filled) and returns the first failure in sample order; in one
  // process returns its failure, or `swept`, rows untouched.
  Status finish(const Status& swept, int tag, std::size_t width, std::vector<double>& rows);

 private:
  const World* world_;  // null unless the world is distributed
  ShardRange slice_;
  int64_t next_;
  Status own_ = Status::ok();
  std::vector<Status> failures_;  // per sample, distributed only
};

}  // namespace qflow
