// The output ranking of the sensitivity analysis across the ranks of a distributed run
// (docs/distributed.md): candidate i is measured by rank i % N, then every rank gets every
// candidate's per-sample cosines, bit for bit as the rank that measured them computed them,
// so the sums in sample order, the ranking and everything after it are those of one process.
#pragma once

#include <cstddef>
#include <vector>

#include "framework/distributed/world.h"
#include "qflow/core/status.h"

namespace qflow {

// Whether this rank measures candidate `index` (always, without a distributed world).
inline bool measures_candidate(const World* world, std::size_t index) {
  return !world || !world->distributed() || index % static_cast<std::size_t>(world->size()) == static_cast<std::size_t>(world->rank());
}

// Per candidate, what its measuring rank found: the per-sample cosines of its weight and of
// its activations, or the error that stopped it.
struct CandidateCosines {
  std::vector<std::vector<double>>& weight;
  std::vector<std::vector<double>>& activation;
  std::vector<Status>& status;
};

// After each rank has measured its candidates: fills every other rank's candidates in
// `cosines` on every rank. Returns the first failure in candidate order on every rank, or ok.
// Every rank of the world must call it, with the same candidate and sample counts.
Status share_candidate_cosines(const World& world, CandidateCosines cosines);

}  // namespace qflow
