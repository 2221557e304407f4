// TopKMetric: label rank within one output's scores, averaged over the samples.
#include "top_k_metric.h"

#include "label_file.h"

namespace qflow {

ComponentInfo TopKMetric::info(int64_t k) {
  const std::string name = "top" + std::to_string(k);
  return {ComponentKind::Metric,
          name,
          k == 1 ? std::string("fraction of samples whose label is the first argmax of one output")
                 : "fraction of samples whose label is among the " + std::to_string(k) + " largest scores of one output",
          {{"labels", OptionType::String, std::string(),
            "a .npy of integer labels [N] or [N,1], one per sample in dataset order"},
           {"output", OptionType::Int, int64_t{0}, "index of the model output holding the class scores",
            {.min = 0.0}}}};
}

Expected<std::unique_ptr<Metric>> TopKMetric::create(int64_t k, const Options& options) {
  const std::string name = "top" + std::to_string(k);
  const int64_t output = options.get_int("output");
  if (output < 0) return invalid_input(name + ": option 'output' is " + std::to_string(output) + ", must be >= 0");
  const std::string path = options.get_string("labels");
  if (path.empty()) return invalid_input(name + ": option 'labels' is required (a .npy of integer labels)");
  Expected<std::vector<int64_t>> labels = read_label_file(path);
  if (!labels) return labels.status().with_context(name);
  return std::unique_ptr<Metric>(new TopKMetric(k, path, std::move(*labels), output));
}

Expected<double> TopKMetric::evaluate(const MetricInput& input) const {
  const std::string name = "top" + std::to_string(k_);
  if (!input.outputs || input.outputs->empty()) return invalid_input(name + ": no samples to evaluate");
  const std::vector<SampleOutputs>& samples = *input.outputs;
  const int64_t last = input.first_sample + static_cast<int64_t>(samples.size());
  if (input.first_sample < 0 || last > static_cast<int64_t>(labels_.size()))
    return invalid_input(name + ": labels '" + path_ + "' hold " + std::to_string(labels_.size()) +
                         " labels, the evaluation needs samples " + std::to_string(input.first_sample) + " to " +
                         std::to_string(last - 1));
  int64_t found = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const SampleOutputs& outputs = samples[i];
    if (output_ >= static_cast<int64_t>(outputs.size()))
      return invalid_input(name + ": option 'output' is " + std::to_string(output_) + " but the model has " +
                           std::to_string(outputs.size()) + " output(s)");
    const std::vector<double> scores = outputs[static_cast<std::size_t>(output_)].to_doubles();
    const int64_t sample = input.first_sample + static_cast<int64_t>(i);
    const int64_t label = labels_[static_cast<std::size_t>(sample)];
    if (label < 0 || label >= static_cast<int64_t>(scores.size()))
      return invalid_input(name + ": label " + std::to_string(label) + " of sample " + std::to_string(sample) +
                           " is outside the " + std::to_string(scores.size()) + " scores of output " +
                           std::to_string(output_));
    const double target = scores[static_cast<std::size_t>(label)];
    int64_t above = 0;
    for (std::size_t c = 0; c < scores.size(); ++c)
      if (scores[c] > target || (scores[c] == target && static_cast<int64_t>(c) < label)) ++above;
    if (above < k_) ++found;
  }
  return static_cast<double>(found) / static_cast<double>(samples.size());
}

}  // namespace qflow
