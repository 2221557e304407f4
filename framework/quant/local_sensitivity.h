// Local sensitivity: how much quantizing one node changes that node's own output, measured in
// one float run per sample for all nodes at once. The ranking a large model can afford when
// the output-cosine ranking (one partial model run per node) would take hours.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/data/progress_bar.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

class Executor;

struct LocalProbe {
  const Node* node = nullptr;      // a node of the executor's model
  std::optional<Tensor> weight;    // its input 1 quantized and dequantized, when it has a quantized weight
  QuantTable activations;          // its output activations' parameters
};

struct LocalCosines {
  double weight = 1.0;      // cos(output, output computed with the quantized weight)
  double activation = 1.0;  // cos(outputs, outputs quantized and dequantized)
};

// Runs `float_exec` (single-threaded runs, `pool` over samples) on every sample and returns,
// per probe, the mean over samples of its two cosines, summed in sample order (independent
// of the thread count). A weight probe whose node reads a value the run does not expose
// keeps cosine 1. `progress` (not owned; may be null) advances by one per sample run.
Expected<std::vector<LocalCosines>> local_cosines(const Executor& float_exec, const std::vector<LocalProbe>& probes,
                                                  const std::vector<Feeds>& samples, ThreadPool& pool,
                                                  ProgressBar* progress = nullptr);

}  // namespace qflow
