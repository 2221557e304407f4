// Every rank of a distributed run must run the same qflow and the same plugins, or their
// results (and the exchanges of serialized states) would not agree.
#pragma once

#include <string>

#include "framework/distributed/world.h"
#include "qflow/core/status.h"

namespace qflow {

// Rank 0 compares every rank's `identity` (one entry per line, as build_identity writes it)
// with its own; every rank returns the same result: ok, or an error naming the first rank
// that differs and the first entry where it does. A world of one returns ok at once.
Status check_same_build(const World& world, const std::string& identity);

}  // namespace qflow
