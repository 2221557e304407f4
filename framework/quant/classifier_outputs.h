// Classifier outputs in the output-cosine objective (sensitivity, precision search, auto).
//
// A graph output made by a Softmax over one distribution per sample (a [1, C] classifier)
// is all but blind to quantization on confident samples: logits off by whole units still give
// probabilities of 1 and 0, a cosine of 1. Inputs near the decision boundary see the same
// logit error as a large change of probabilities (PP-OCR's text-direction classifier: every
// calibration line certain, output cosine 0.99999999997, while a held-out line float gives
// 0.99 went to 0.83). So such an output is compared as the sample would look at a reference
// confidence: the logit of float's top class is lowered by the same amount on both sides,
// until float's margin over its runner-up is ln 4 (0.8 against the runner-up's 0.2); samples
// already less certain stay as they are. Every logit difference the quantized model gets
// wrong stays wrong by the same amount; only the operating point moves, to where the softmax
// shows it. docs/accuracy-debugging.md, "Classifier outputs", has why ln 4.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Float's margin of its top class over the runner-up at which a classifier output is compared.
inline constexpr double kClassifierReferenceMargin = 1.3862943611198906;  // ln 4

class ClassifierOutputs {
 public:
  // Finds the classifier outputs of `model` and appends each one's logits (the Softmax's
  // input) to its graph outputs, after the model's own: a model built from it (QDQ copies,
  // suffix cuts) computes them as well. A model without one is left as it is (empty()).
  static ClassifierOutputs expose(Model& model);

  bool empty() const { return entries_.empty(); }
  // The names of the classifier outputs, in output order (results name what was compared).
  const std::vector<std::string>& names() const { return names_; }

  // One sample's values as the objective compares them: the model's own outputs (the first
  // `outputs` of `run`) flattened and concatenated in order, as float, each classifier output
  // replaced by the softmax of its logits moved to the reference margin of `reference`'s
  // logits (the float model's run of the same sample, same layout). A classifier output whose
  // tensors are not one distribution of finite logits is taken as it is.
  std::vector<float> compared(const std::vector<const Tensor*>& run, const std::vector<const Tensor*>& reference) const;

  // What the objective compares a run with: the float model's outputs of the sample as
  // compared(reference, reference), or simply flattened when there is no classifier output.
  std::vector<float> reference_values(const std::vector<const Tensor*>& reference) const;
  // The sample's output cosine: reference_values of the float run (`reference`, kept as
  // tensors too) against `run` as compared; without classifier outputs cosine_similarity on
  // the tensors as they are, without a flat copy.
  double cosine(const std::vector<float>& reference_values, const std::vector<const Tensor*>& run,
                const std::vector<const Tensor*>& reference) const;

 private:
  struct Entry {
    std::size_t output = 0;  // index of the probabilities among the graph outputs
    std::size_t logits = 0;  // index of the logits among the graph outputs
    int64_t axis = -1;
    bool coerce_2d = false;  // opset < 13: the softmax runs over every axis from `axis` on
  };
  // Whether `t` (the logits) holds exactly one distribution along the entry's axis.
  bool one_distribution(const Entry& e, const Tensor& t) const;

  std::size_t outputs_ = 0;  // the model's own outputs
  std::vector<Entry> entries_;
  std::vector<std::string> names_;
};

}  // namespace qflow
