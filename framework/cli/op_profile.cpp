// The per-op table of `qflow bench --profile` (see op_profile.h).
#include "framework/cli/op_profile.h"

#include <algorithm>
#include <cstdio>

namespace qflow::cli {

namespace {

double total_ms(const std::vector<OpProfileRow>& rows) {
  double sum = 0.0;
  for (const OpProfileRow& row : rows) sum += row.ms;
  return sum;
}

double share(double ms, double sample_ms) { return sample_ms > 0.0 ? ms / sample_ms : 0.0; }

}  // namespace

void sort_op_profile(std::vector<OpProfileRow>& rows) {
  std::sort(rows.begin(), rows.end(), [](const OpProfileRow& a, const OpProfileRow& b) {
    return a.ms != b.ms ? a.ms > b.ms : a.op < b.op;
  });
}

void print_op_profile(std::ostream& out, const std::vector<OpProfileRow>& rows, double sample_ms) {
  std::size_t width = 7;
  for (const OpProfileRow& row : rows) width = std::max(width, row.op.size());
  char line[64];
  out << std::string(width - 2, ' ') << "op   nodes   ms/sample   share\n";
  for (const OpProfileRow& row : rows) {
    std::snprintf(line, sizeof line, "  %5lld  %10.3f  %5.1f%%\n", static_cast<long long>(row.nodes), row.ms,
                  100.0 * share(row.ms, sample_ms));
    out << std::string(width - row.op.size(), ' ') << row.op << line;
  }
  const double outside = sample_ms - total_ms(rows);
  std::snprintf(line, sizeof line, "  %5s  %10.3f  %5.1f%%\n", "", outside, 100.0 * share(outside, sample_ms));
  out << std::string(width - 7, ' ') << "outside" << line;
}

void write_op_profile(JsonWriter& json, const std::vector<OpProfileRow>& rows, double sample_ms) {
  json.begin_object()
      .field("sample_ms", sample_ms)
      .field("outside_ms", sample_ms - total_ms(rows));
  json.key("ops").begin_array();
  for (const OpProfileRow& row : rows)
    json.begin_object(true)
        .field("op", row.op)
        .field("nodes", row.nodes)
        .field("ms", row.ms)
        .field("share", share(row.ms, sample_ms))
        .end_object();
  json.end_array().end_object();
}

}  // namespace qflow::cli
