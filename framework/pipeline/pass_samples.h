// The calibration samples of a pass stage's `dataset` input, offered to its passes through
// PassContext (qflow/plugin/pass.h).
#pragma once

#include "framework/data/dataset.h"
#include "framework/data/input_feeds.h"
#include "qflow/plugin/pass.h"

namespace qflow {

class DatasetPassSamples final : public PassSamples {
 public:
  // Binds the dataset's sources to the inputs of `graph`, the model the stage receives (the
  // errors of bind_inputs: a model input without samples, samples that do not fit).
  static Expected<DatasetPassSamples> bind(const Dataset& dataset, const Graph& graph);

  int64_t count() const override { return dataset_->count; }
  Expected<std::map<std::string, Tensor>> sample(int64_t index) const override;

 private:
  DatasetPassSamples(const Dataset& dataset, InputBinding binding) : dataset_(&dataset), binding_(std::move(binding)) {}
  const Dataset* dataset_;
  InputBinding binding_;
};

}  // namespace qflow
