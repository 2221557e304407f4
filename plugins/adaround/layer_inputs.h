// The layers AdaRound rounds and the statistics of their float inputs on calibration samples,
// collected by running the float model with the SDK interpreter (qflow/interpreter.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/pass.h"
#include "soft_rounding.h"

namespace qflow::adaround {

// A Conv (2-D), Gemm or MatMul whose weight (input 1) is a float32 initializer that only it
// reads, viewed as LayerProblem::weight: row r = output channel r.
struct Layer {
  Node* node = nullptr;
  int64_t channel_axis = 0;  // of the weight tensor, as the QDQ builder quantizes it
  int64_t groups = 1;
  // Conv geometry
  std::vector<int64_t> kernel, strides, pads, dilations;
  std::vector<Matrix> grams;  // per group, mean of x x^T over the input vectors
  int64_t vectors = 0;        // input vectors summed into grams
};

// The layers of `graph` in topological order (Conv with auto_pad other than NOTSET / VALID,
// transA Gemms and MatMuls of a non-2-D weight are left out).
Expected<std::vector<Layer>> find_layers(const Graph& graph);

// Runs `model` on samples [0, count) of `samples` in order, node by node, and fills every
// layer's grams from its float input.
Status collect_grams(const Model& model, const PassSamples& samples, int64_t count, std::vector<Layer>& layers);

// The weight of `layer` as a [out channels, K] matrix, and back.
Matrix weight_matrix(const Graph& graph, const Layer& layer);
Tensor weight_tensor(const Graph& graph, const Layer& layer, const Matrix& weight);

}  // namespace qflow::adaround
