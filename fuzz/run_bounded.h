// Runs a validated lowered model on all-zero inputs when it is small enough, so the fuzz
// targets reach the executor without a hostile shape turning one input into minutes of work.
#pragma once

#include "qflow/runtime/lowered_model.h"

namespace qflow::fuzz {

// At most this many elements over all tensors of a model that is run: with weights counted
// too, the costliest op (a matmul or conv) does at most this squared multiply-adds.
inline constexpr int64_t kMaxRunTensorElements = 4096;

// Creates the executor (which validates again) and runs it; errors are ignored, crashes are
// what the fuzzer looks for.
void run_on_zeros(const lowered::Model& model);

}  // namespace qflow::fuzz
