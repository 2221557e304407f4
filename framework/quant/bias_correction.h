// Empirical bias correction: the mean output error weight quantization causes, per channel.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// For every Conv and Gemm whose weight the PTQ model quantizes (and whose bias can be
// shifted, see bias_correction_applies), the mean over the calibration samples and all
// positions of (y_q - y) per output channel, where y is the node's float output and y_q the
// same node computed on the same float input with its weight quantized and dequantized.
// The float model runs once per sample in dataset order with a duplicate of each such node
// beside the original; sums are accumulated in double in that order. `config` may be null.
Expected<std::map<std::string, std::vector<double>>> measure_bias_shift(const Model& float_model,
                                                                         const QuantConfig* config,
                                                                         const Dataset& dataset);

}  // namespace qflow
