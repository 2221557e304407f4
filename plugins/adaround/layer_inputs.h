// The layers AdaRound rounds and the statistics of their float inputs on calibration samples,
// collected by running the float model with the SDK interpreter (qflow/interpreter.h).
#pragma once

#include <cstdint>
#include <functional>
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
  std::vector<Matrix> grams;  // per group, mean of x~ x~^T over the input vectors
  std::vector<Matrix> cross;  // per group, mean of x~ x^T (round_in_sequence only)
  int64_t vectors = 0;        // input vectors summed into grams
};

// The layers of `graph` in topological order (Conv with auto_pad other than NOTSET / VALID,
// transA Gemms and MatMuls of a non-2-D weight are left out).
Expected<std::vector<Layer>> find_layers(const Graph& graph);

// Runs `model` on samples [0, count) of `samples` in order, node by node, and fills every
// layer's grams from its float input.
Status collect_grams(const Model& model, const PassSamples& samples, int64_t count, std::vector<Layer>& layers);

// Rounds the layers in topological order, each on the inputs it reads once the layers before
// it are rounded (asymmetric reconstruction, Nagel et al. 2020 section 4): the float model and
// the rounded one run side by side, node by node, on samples [0, count) held in memory; at each
// layer its grams (x~ x~^T of the rounded model's input) and cross terms (x~ x^T with the float
// model's) are formed, then `round` sets the layer's new weight in the graph, which the rounded
// model's later nodes read. Memory: the live values of `count` samples, twice where they differ.
Status round_in_sequence(Model& model, const PassSamples& samples, int64_t count, std::vector<Layer>& layers,
                         const std::function<Status(Layer&)>& round);

// The weight of `layer` as a [out channels, K] matrix, and back.
Matrix weight_matrix(const Graph& graph, const Layer& layer);
Tensor weight_tensor(const Graph& graph, const Layer& layer, const Matrix& weight);

}  // namespace qflow::adaround
