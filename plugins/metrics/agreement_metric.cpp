// AgreementMetric: decode each sample's output and the float model's, count equal sequences.
#include "agreement_metric.h"

#include <algorithm>

namespace qflow {

namespace {

std::string metric_name(AgreementMetric::Decoder decoder) {
  return decoder == AgreementMetric::Decoder::Ctc ? "ctc-agreement" : "argmax-agreement";
}

}  // namespace

ComponentInfo AgreementMetric::info(Decoder decoder) {
  ComponentInfo info{ComponentKind::Metric, metric_name(decoder), "", {}};
  info.options.push_back({"output", OptionType::Int, int64_t{0}, "index of the model output to decode", {.min = 0.0}});
  if (decoder == Decoder::Ctc) {
    info.summary = "fraction of samples whose greedy CTC decoding of one output equals the float model's";
    info.options.push_back({"blank", OptionType::Int, int64_t{0}, "the CTC blank class, dropped from the decoding", {.min = 0.0}});
  } else {
    info.summary = "fraction of samples whose argmax (per row of the last axis) of one output equals the float model's";
  }
  return info;
}

Expected<std::unique_ptr<Metric>> AgreementMetric::create(Decoder decoder, const Options& options) {
  const std::string name = metric_name(decoder);
  const int64_t output = options.get_int("output");
  if (output < 0) return invalid_input(name + ": option 'output' is " + std::to_string(output) + ", must be >= 0");
  const int64_t blank = decoder == Decoder::Ctc ? options.get_int("blank") : 0;
  if (blank < 0) return invalid_input(name + ": option 'blank' is " + std::to_string(blank) + ", must be >= 0");
  return std::unique_ptr<Metric>(new AgreementMetric(decoder, output, blank));
}

std::vector<int64_t> AgreementMetric::decode(const Tensor& scores) const {
  const std::vector<double> values = scores.to_doubles();
  const int64_t classes = scores.rank() == 0 ? 1 : scores.dim(scores.rank() - 1);
  std::vector<int64_t> sequence;
  if (classes <= 0) return sequence;
  const auto rows = static_cast<int64_t>(values.size()) / classes;
  int64_t previous = -1;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = values.data() + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    if (decoder_ == Decoder::Argmax) {
      sequence.push_back(best);
      continue;
    }
    if (best != previous && best != blank_) sequence.push_back(best);
    previous = best;
  }
  return sequence;
}

Expected<double> AgreementMetric::evaluate(const MetricInput& input) const {
  const std::string name = metric_name(decoder_);
  if (!input.outputs || input.outputs->empty()) return invalid_input(name + ": no samples to evaluate");
  if (!input.reference || input.reference->size() != input.outputs->size())
    return invalid_input(name + ": needs the float model's outputs of the same samples");
  int64_t agreeing = 0;
  for (std::size_t i = 0; i < input.outputs->size(); ++i) {
    const SampleOutputs& got = (*input.outputs)[i];
    const SampleOutputs& want = (*input.reference)[i];
    const auto index = static_cast<std::size_t>(output_);
    if (index >= got.size() || index >= want.size())
      return invalid_input(name + ": option 'output' is " + std::to_string(output_) + " but the model has " +
                           std::to_string(std::min(got.size(), want.size())) + " output(s)");
    if (got[index].shape() != want[index].shape())
      return invalid_input(name + ": output " + std::to_string(output_) + " of sample " +
                           std::to_string(input.first_sample + static_cast<int64_t>(i)) +
                           " differs in shape from the float model's");
    if (decode(got[index]) == decode(want[index])) ++agreeing;
  }
  return static_cast<double>(agreeing) / static_cast<double>(input.outputs->size());
}

}  // namespace qflow
