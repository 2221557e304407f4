// Output cosine: how closely a calibrated (activations-only QDQ) model follows the float model
// on the calibration samples.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/data/progress_bar.h"
#include "framework/data/input_feeds.h"
#include "framework/distributed/share_units.h"
#include "framework/quant/classifier_outputs.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

class Executor;

// The float model's outputs on every sample of a dataset, each sample's flattened in output order
// (flatten_sample_outputs), with what they were computed from.
struct FloatOutputs {
  std::string model_sha256;                // of the ONNX bytes that ran
  std::shared_ptr<const Dataset> dataset;  // the samples, in order
  std::vector<std::vector<float>> samples;
};

class OutputCosine {
 public:
  // `float_model` is the ONNX bytes of the float model; `config` (may be null) and
  // `dataset` must outlive the object. `threads` samples run at once. `known` (may be null):
  // the float model's outputs computed elsewhere, taken instead of running the samples
  // when they are of these bytes and this dataset. `world` (may be null; must outlive the
  // object): in a distributed world each rank runs its slice of the samples (my_slice) and
  // the per-sample cosines are shared, so every rank gets the one-process value; every rank
  // must then call evaluate with the same tables in the same order.
  static Expected<std::unique_ptr<OutputCosine>> create(std::string float_model, const Dataset& dataset,
                                                         const QuantConfig* config, int threads,
                                                         std::shared_ptr<const FloatOutputs> known = nullptr,
                                                         const World* world = nullptr);
  ~OutputCosine();

  // Builds the calibrated model for `table`, runs it on the first `samples` samples (0 or
  // more than the dataset has: all) and returns the mean over them of cos(float outputs,
  // quantized outputs), each side all graph outputs of the sample flattened and
  // concatenated in output order (a classifier's probabilities compared through its logits,
  // classifier_outputs.h). Per-sample values are combined in sample order in
  // double, so the result does not depend on the thread count. The float outputs are
  // computed on the first call (unless known, then for every sample) and kept.
  Expected<double> evaluate(const QuantTable& table, int64_t samples = 0) const;
  // Not owned; null: none. Each sweep over the samples restarts it as a phase ("float
  // outputs", "table 1", "table 2", ...) and advances it per sample (a terminal's line).
  void set_progress(ProgressBar* bar) { bar_ = bar; }

 private:
  OutputCosine(const Dataset& dataset, const QuantConfig* config, int threads, const World* world);
  // Runs this rank's samples of `slice`; `done` gets each one's outputs in sample order.
  Status run_samples(const Executor& executor, const ShardRange& slice,
                     const std::function<Status(int64_t, std::vector<Tensor>)>& done) const;
  Expected<double> mean_cosine(const QuantTable& table, const ShardRange& slice, std::vector<double>& cosines) const;

  const Dataset& dataset_;
  const QuantConfig* config_;
  int threads_;
  const World* world_;  // set only when the samples are split between ranks
  ShardRange slice_;  // this rank's share of all samples
  InputBinding binding_;
  std::shared_ptr<Model> float_model_;
  mutable std::mutex mutex_;
  mutable std::vector<std::vector<float>> float_outputs_;  // per sample, once computed
  mutable std::vector<char> float_known_;                 // 1 where float_outputs_ holds the sample
  // Classifier outputs are compared through their logits (classifier_outputs.h): the float
  // model's outputs of each sample are kept for them.
  ClassifierOutputs classifiers_;
  mutable std::vector<std::vector<Tensor>> float_runs_;
  ProgressBar* bar_ = nullptr;
  mutable int tables_ = 0;  // tables evaluated: the phases' numbers
};

// cos(a, b) accumulated in double in eight lanes (lane_sums.h); 1 when both are zero, 0 when
// one is, 0 when the sizes differ.
double cosine_similarity(const std::vector<float>& a, const std::vector<float>& b);

// cosine_similarity(a, the tensors `b` flattened and concatenated in order, as float), the
// same value to the last bit, without building the flat copy: the stages that score one
// model per candidate compare a whole output per sample and run.
double cosine_similarity(const std::vector<float>& a, const std::vector<const Tensor*>& b);

// One sample's outputs flattened and concatenated in output order, as float (other dtypes
// converted), the vectors cosine_similarity compares.
std::vector<float> flatten_sample_outputs(const std::vector<Tensor>& outputs);

}  // namespace qflow
