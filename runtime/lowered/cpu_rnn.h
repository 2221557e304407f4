// The recurrent kernel of CPU segments (cpu.LSTM), kept apart from the table of cpu_ops.cpp
// that dispatches to it.
#pragma once

#include <vector>

#include "qflow/runtime/lowered_model.h"
#include "qflow/runtime/executor.h"

namespace qflow::lowered::detail {

// ONNX LSTM (opsets 7 and 14) on f32 tensors. `ins[i]` is null for an absent optional input,
// `outs[i]` for an absent output: Y, Y_h and Y_c are each optional.
Status run_lstm(const Op& op, const std::vector<const Value*>& ins, const std::vector<Value*>& outs);

}  // namespace qflow::lowered::detail
