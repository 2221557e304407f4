// Verification of a target's deployable files: the PTQ model (the float simulation of
// quantization) and every file the target runs on the host (Target::load), on the same
// samples, compared per output: each file against the PTQ model, and every file after the
// first bit for bit against the first (a simulator and the device runtime must agree).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/data/progress_bar.h"
#include "framework/distributed/world.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/target.h"

namespace qflow {

// One deployable file: its role and how to load it (once per thread that runs samples).
struct RunnableFile {
  std::string role;
  std::function<Expected<std::unique_ptr<DeployedModel>>()> load;
};

// One file against the PTQ model on one output: mean and minimum per-sample cosine, largest
// absolute difference over all samples.
struct FileCheck {
  double cosine_mean = 0.0;
  double cosine_min = 1.0;
  double max_abs_error = 0.0;
  int64_t differing = 0;  // elements (over all samples) not bit for bit the first file's; 0 for the first
};

struct DeployedOutputCheck {
  std::string name;
  int64_t elements = 0;          // per sample
  std::vector<FileCheck> files;  // in the order of DeployedVerification::roles
};

struct DeployedVerification {
  int64_t samples = 0;
  std::vector<std::string> roles;         // the files compared, in order
  std::vector<std::string> descriptions;  // what runs each (DeployedModel::description)
  std::vector<DeployedOutputCheck> outputs;  // model output order
  bool bit_identical() const;                // every file agrees with the first everywhere
};

// Runs every sample of `dataset` (the first `limit` when limit > 0) through the PTQ model and
// each file; the dataset feeds every input of the PTQ model, and the files read inputs of
// those names (as float32) and give outputs of the PTQ model's names and sizes. `progress`
// (not owned; may be null) advances by one per sample this process verifies. `world` (not
// owned; may be null): in a distributed world each rank verifies its slice of the samples
// (my_slice) and the per-sample results are shared, so every rank returns the one-process
// result (every rank must call it).
Expected<DeployedVerification> verify_deployed(const Model& ptq_model, const std::vector<RunnableFile>& files,
                                               const Dataset& dataset, int threads, int64_t limit,
                                               ProgressBar* progress = nullptr, const World* world = nullptr);

std::string verification_text(const DeployedVerification& result);
// "samples", "bit_identical", "roles" and per output "name", "elements", "exact_matches",
// "compared" and "<role>_cosine_mean", "<role>_cosine_min", "<role>_max_abs_error".
Expected<std::string> verification_json(const DeployedVerification& result);
// "verify: the <description> differs from the <description>": the first file that disagrees.
std::string difference_message(const DeployedVerification& result);

}  // namespace qflow
