// The per-op table of `qflow bench --profile`: where a sample's time goes, by operator.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "qflow/core/json_writer.h"

namespace qflow::cli {

// One operator (or one fused chain, "Conv+BatchNormalization+HardSwish") and the nodes that
// ran as it: their time per sample, in milliseconds.
struct OpProfileRow {
  std::string op;
  int64_t nodes = 0;
  double ms = 0.0;
};

// The rows sorted by time, largest first (ties by name, so the order is stable).
void sort_op_profile(std::vector<OpProfileRow>& rows);

// A text table on `out`: op, nodes, ms per sample, share of `sample_ms`, and a last line with
// the time of the sample spent outside the listed ops (scheduling, allocation, copies).
void print_op_profile(std::ostream& out, const std::vector<OpProfileRow>& rows, double sample_ms);

// The same as JSON: {"sample_ms": ..., "outside_ms": ..., "ops": [{"op", "nodes", "ms", "share"}]}.
void write_op_profile(JsonWriter& json, const std::vector<OpProfileRow>& rows, double sample_ms);

}  // namespace qflow::cli
