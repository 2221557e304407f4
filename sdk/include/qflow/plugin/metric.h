// Metric: a user score of a model's outputs over evaluation samples (e.g. top-1 against
// labels). The precision search and the calibrator comparison use it beside output cosine.
#pragma once

#include <cstdint>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// The outputs of one sample, in the model's output order.
using SampleOutputs = std::vector<Tensor>;

struct MetricInput {
  // Sample i of the evaluated samples: `first_sample + i` in dataset order (a metric that
  // reads labels from a file uses it to find the label of each sample).
  int64_t first_sample = 0;
  const std::vector<SampleOutputs>* outputs = nullptr;    // the model under evaluation
  const std::vector<SampleOutputs>* reference = nullptr;  // the float model, same samples
};

class Metric {
 public:
  virtual ~Metric() = default;
  // One score for the whole set; higher is better (a metric whose natural form is an error
  // reports its negation).
  virtual Expected<double> evaluate(const MetricInput& input) const = 0;
};

}  // namespace qflow
