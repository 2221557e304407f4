// Verification of a lowered model: the PTQ model (float simulation of quantization), the .bc
// simulator and the .hbm runtime on the same samples, compared per output.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/lowered/model.h"

namespace qflow {

struct LoweredOutputCheck {
  std::string name;
  int64_t elements = 0;        // per sample
  // .bc simulator against the PTQ model: mean and minimum per-sample cosine, largest
  // absolute difference over all samples.
  double bc_cosine_mean = 0.0;
  double bc_cosine_min = 0.0;
  double bc_max_abs_error = 0.0;
  // The same for the .hbm runtime.
  double hbm_cosine_mean = 0.0;
  double hbm_cosine_min = 0.0;
  double hbm_max_abs_error = 0.0;
  // Elements (over all samples) where the .hbm runtime gives exactly the .bc value.
  int64_t exact_matches = 0;
  int64_t compared = 0;
};

struct LoweredVerification {
  int64_t samples = 0;
  std::vector<LoweredOutputCheck> outputs;  // model output order
  bool bit_identical() const;               // every element of every output matched
};

// Runs every sample of `dataset` (the first `limit` when limit > 0) through the three.
// The dataset feeds every input of the PTQ model, and the .bc reads inputs of those names
// (converted to float); the models have the same outputs (names, element counts).
Expected<LoweredVerification> verify_lowered(const Model& ptq_model, const lowered::Model& bc_model,
                                             std::span<const uint8_t> hbm_bytes, const Dataset& dataset, int threads,
                                             int64_t limit);

std::string verification_text(const LoweredVerification& result);
Expected<std::string> verification_json(const LoweredVerification& result);

}  // namespace qflow
