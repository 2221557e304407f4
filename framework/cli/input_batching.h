// How the arrays bound to a model's inputs are split into runs (`qflow infer`): an array of
// the input's declared shape is fed as is, a stack of such arrays is run a batch at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow::cli {

// One input's array and how it is split.
struct InputBatching {
  bool batched = false;     // false: fed whole to every run
  int64_t samples = 0;      // rows of the first axis when batched
  int64_t fixed_chunk = 0;  // > 0: the model fixes the first dimension, runs take this many rows
};

// How `array` (read from `file`, named in messages) feeds `input`:
// - an input without a declared shape, or a scalar one, takes the array as is;
// - an array of the declared shape (rank and static dimensions equal) is fed as is; with a
//   symbolic first dimension and `split_symbolic` (a batch size was asked for) its rows are
//   samples split into runs instead;
// - an array whose first dimension is a multiple k > 1 of a static first dimension B (the
//   other dimensions matching) is a stack of k batches, run B rows at a time;
// anything else, or another dtype than the declared one, is an error naming both shapes.
Expected<InputBatching> plan_input_batching(const Value& input, const Tensor& array, const std::string& file,
                                            bool split_symbolic);

struct RunBatches {
  int64_t samples = 0;  // rows each batched input holds (0: no input is batched)
  int64_t chunk = 0;    // rows per run; 0: a single run with everything
};

// The runs for inputs planned by plan_input_batching (`files` names them in messages): every
// batched input must hold the same number of rows and fixed batch sizes must agree;
// `batch_size` (> 0) splits inputs that no fixed size governs.
Expected<RunBatches> plan_run_batches(const std::vector<InputBatching>& inputs, const std::vector<std::string>& files,
                                      int64_t batch_size);

// Rows [begin, begin + count) of the first axis, copied (the tensor itself for all rows).
Tensor slice_rows(const Tensor& t, int64_t begin, int64_t count);
// The parts joined along their first axis; `name` names the output in the error when their
// dtypes or other dimensions differ.
Expected<Tensor> concat_rows(const std::string& name, const std::vector<Tensor>& parts);

}  // namespace qflow::cli
