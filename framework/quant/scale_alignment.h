// Scale alignment: the calibration table adjusted so that ops which cannot requantize on an
// NPU (Concat, pass-through ops) see one set of parameters on their inputs and outputs.
#pragma once

#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// Ops whose output takes the parameters of their input 0 (values are only moved or
// max-selected, so the input's grid represents the output exactly).
bool is_pass_through_op(const std::string& op_type);

// Returns `table` with the alignment rules of docs/quantization.md applied:
//  1. Concat: every input and the output of a Concat (transitively, when a Concat feeds
//     another) share one set of parameters: the entry with the largest threshold when all
//     are symmetric (zero point 0), else the union of the ranges they represent. A Concat
//     input consumed elsewhere still takes the shared parameters. Members must share a dtype.
//  2. Pass-through ops (Relu, MaxPool, Reshape, Transpose, Flatten, Squeeze, Unsqueeze,
//     Identity): in topological order, the output takes the input's parameters, so chains
//     propagate; Concat members keep the shared parameters.
// Only tensors present in `table` are touched. `config` (may be null) decides power-of-two
// rounding of a union range.
Expected<QuantTable> align_scales(const Graph& graph, const QuantTable& table, const QuantConfig* config);

// The tensors of `table` that share parameters with `tensor` through rule 1 (Concat), itself
// included, sorted by name; just `tensor` when no Concat groups it.
Expected<std::vector<std::string>> concat_group(const Graph& graph, const QuantTable& table, const std::string& tensor);

}  // namespace qflow
