// `qflow hbm perf`: the board-evaluation figures of a .hbm on this machine's runtime (latency
// percentiles, throughput over N threads with one context each, time per segment, peak memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

struct HbmPerfOptions {
  std::string path;
  int64_t threads = 1;
  int64_t iterations = 100;  // measured runs per thread
  int64_t warmup = 5;        // unmeasured runs per thread before
  std::vector<std::string> inputs;  // [NAME=]X.npy, float32 of the input's shape
  std::string json_path;            // "" none, "-" stdout (instead of the text)
};

Status hbm_perf(const HbmPerfOptions& options);

}  // namespace qflow
