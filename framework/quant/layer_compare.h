// Per-layer comparison of a QDQ model with its float model: for every quantized activation,
// how far the dequantized values are from the float ones, with the error accumulated from
// the model input and with only the producing node quantized (docs/accuracy-debugging.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/data/progress_bar.h"
#include "framework/distributed/world.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// Sums over all compared elements of all samples, in double; merged in sample order.
struct ErrorSums {
  double dot = 0.0;        // sum x * q
  double float_sq = 0.0;   // sum x^2
  double quant_sq = 0.0;   // sum q^2
  double error_sq = 0.0;   // sum (x - q)^2
  double max_abs = 0.0;    // max |x - q|
  int64_t count = 0;       // elements compared

  // Adds the element-wise comparison of float values `x` and quantized values `q`.
  void add(const float* x, const float* q, int64_t n);
  void merge(const ErrorSums& other);
};

struct ErrorMetrics {
  double cosine = 1.0;         // sum xq / sqrt(sum x^2 * sum q^2); 1 when both are 0, 0 when one is
  double mse = 0.0;            // sum (x - q)^2 / count
  double max_abs_error = 0.0;  // max |x - q|
  double sqnr_db = 0.0;        // 10 log10(sum x^2 / sum (x - q)^2); +inf when x == q everywhere
};
ErrorMetrics error_metrics(const ErrorSums& sums);

struct LayerRow {
  std::string tensor;   // the activation's name in the float model
  std::string node;     // its producer in the float model ("" for a graph input)
  std::string op_type;  // "" for a graph input
  int64_t elements = 0;  // per sample
  ErrorMetrics accumulated;  // float model vs QDQ model, both from the sample
  bool has_isolated = false;  // false when the node could not be run alone (e.g. subgraphs)
  ErrorMetrics isolated;     // only the producing node quantized, fed float inputs
};

struct LayerComparison {
  int64_t samples = 0;
  std::vector<LayerRow> rows;            // worst first: lowest accumulated cosine, then name
  std::vector<std::string> unmatched;    // quantized tensors the float model does not have
};

// Compares every quantized activation of `qdq_model` (a QuantizeLinear -> DequantizeLinear
// pair on a non-constant tensor) with the same tensor of `float_model` over the first
// `limit` samples of `dataset` (all when limit <= 0), `threads` samples at a time. Results
// do not depend on the thread count. The dataset feeds every input of both models.
// `progress` (not owned; may be null) advances by one per sample this process compares.
// `world` (not owned; may be null): in a distributed world each rank compares its slice of
// the samples (my_slice) and the per-sample sums are shared, so every rank returns the
// one-process result (every rank must call it).
Expected<LayerComparison> compare_layers(const Model& float_model, const Model& qdq_model, const Dataset& dataset,
                                         int threads, int64_t limit, ProgressBar* progress = nullptr,
                                         const World* world = nullptr);

// "inf" / "-inf" / "nan" or the value with `precision` decimals.
std::string format_db(double db, int precision = 2);

// compare_per_layer.txt: a fixed-width table, one row per tensor, worst first.
std::string layer_comparison_text(const LayerComparison& result);
// compare_per_layer.json: the same rows; an infinite SQNR is written as the string "inf".
Expected<std::string> layer_comparison_json(const LayerComparison& result);

}  // namespace qflow
