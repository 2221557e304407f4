// The calibration samples of a pass stage's `dataset` input, offered to its passes through
// PassContext (qflow/plugin/pass.h).
#pragma once

#include "framework/data/dataset.h"
#include "framework/data/input_feeds.h"
#include "qflow/plugin/pass.h"

namespace qflow {

class DatasetPassSamples final : public PassSamples {
 public:
  // Samples of `dataset` fed to `model`, the model the stage's passes transform in place.
  // Each sample is bound to the model's inputs as they are when a pass asks, so a pass sees
  // feeds that fit the graph it runs on even when an earlier pass of the list changed the
  // inputs (float16 inputs made float32, a fixed shape). Both must outlive this object.
  DatasetPassSamples(const Dataset& dataset, const Model& model) : dataset_(&dataset), model_(&model) {}

  int64_t count() const override { return dataset_->count; }
  // The errors of bind_inputs (a model input without samples, samples that do not fit) or an
  // index out of range.
  Expected<std::map<std::string, Tensor>> sample(int64_t index) const override;

 private:
  const Dataset* dataset_;
  const Model* model_;
};

}  // namespace qflow
