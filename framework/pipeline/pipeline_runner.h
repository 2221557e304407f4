// Pipeline runner: executes a resolved pipeline's stages over a worker pool and writes the manifest.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "framework/distributed/world.h"
#include "framework/pipeline/pipeline.h"
#include "qflow/core/status.h"

namespace qflow {

class ComponentRegistry;

struct RunOptions {
  std::string out_dir = "qflow-out";
  // Stages that may run at once, and threads a stage may use for its own sample sweeps.
  // Results never depend on it.
  int threads = 1;
  // Called once per completed stage, serialised, with a one-line summary (pass stages:
  // node counts, counters and the pass's time), then with the graph text when printed;
  // long stages also report how far they got ("stage ID: ...").
  std::function<void(const std::string& line)> progress;
  // Called, serialised, with each warning a completed stage reported (also in the manifest).
  std::function<void(const std::string& line)> warning;
  // Pass stages by id, and passes by name (a one-pass stage's or one in a list), whose
  // resulting graph goes to `progress` (see graph_text). A name matching nothing is an error
  // before anything runs.
  std::vector<std::string> print_after;
  // Check the model after every pass (Graph::validate, libonnx's checker); a failure fails
  // that stage with the problem and names the pass.
  bool verify_each = false;
  // Write every stage's artifact, not only those the pipeline names (StageResult of
  // PipelineStage::writes_output), and the model after each pass of a pass list.
  bool save_intermediate = false;
  // A stage running longer than this many seconds stops the run (0: no limit); a stage's
  // `timeout` key in the pipeline file overrides it for that stage.
  double stage_timeout = 0.0;
  // The run stops when the process's resident memory exceeds this many bytes (0: no limit).
  int64_t max_memory = 0;
  // The ranks of a distributed run (docs/distributed.md); null: this process alone. Every
  // rank runs every stage, one stage at a time in the same order (observer stages exchange
  // states, so all ranks must reach them together); only rank 0 writes files, and its
  // manifest records the rank count.
  const World* world = nullptr;
  // Called by the watchdog that enforces the two limits, after it wrote the manifest naming
  // the failed stage. A stage thread in the middle of a computation cannot be interrupted
  // safely, so this ends the process and must not return; when empty, std::_Exit(2).
  std::function<void(const Status& status)> stop_process;
};

// Runs every stage in dependency order, writing each artifact atomically into out_dir.
// manifest.json is rewritten atomically before the first stage (empty) and after each
// stage completes, so at any moment it lists only complete artifacts. The first failure
// (in file order, when several fail at once) stops the run with a message naming the
// stage; completed artifacts stay, the manifest lists exactly those and names the failed
// stage. Temporary files a killed earlier run left in out_dir are removed first. In a
// distributed world, ranks other than 0 create, remove and write nothing.
Status run_pipeline(const Pipeline& pipeline, const ComponentRegistry& registry, const RunOptions& options);

}  // namespace qflow
