// AgreementMetric (argmax-agreement, ctc-agreement): the fraction of samples whose decoded
// output equals the float model's decoded output on the same sample. No labels needed: the
// objective a precision search uses when "the same decisions as float" is what matters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/metric.h"
#include "qflow/plugin/options.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Both decoders read output `output` (option, default 0) as rows of its last axis: a
// [.., C] tensor is rows x C scores; a row's argmax is its first largest score.
//  * argmax-agreement: the sequence of row argmaxes (one row for a [1, C] classifier; every
//    position of a [.., C] map);
//  * ctc-agreement: greedy CTC decoding of the rows in order (a [1, T, C] or [T, C] output):
//    argmax per time step, runs of the same class collapsed, the class `blank` (option,
//    default 0) dropped.
// A sample agrees when both decoded sequences are equal; the value is agreeing / samples.
class AgreementMetric final : public Metric {
 public:
  enum class Decoder { Argmax, Ctc };

  static ComponentInfo info(Decoder decoder);
  static Expected<std::unique_ptr<Metric>> create(Decoder decoder, const Options& options);

  Expected<double> evaluate(const MetricInput& input) const override;

  // The decoded sequence of one output tensor (exposed for tests).
  std::vector<int64_t> decode(const Tensor& scores) const;

 private:
  AgreementMetric(Decoder decoder, int64_t output, int64_t blank) : decoder_(decoder), output_(output), blank_(blank) {}

  Decoder decoder_;
  int64_t output_;
  int64_t blank_;
};

}  // namespace qflow
