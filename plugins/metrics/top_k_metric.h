// TopKMetric (top1, top5): the fraction of samples whose label is among the k largest
// values of one model output.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/metric.h"
#include "qflow/plugin/options.h"

namespace qflow {

// Options: `labels`, a .npy of integer labels, one per sample in dataset order
// (read_label_file); `output`, the index of the model output holding the class scores
// (default 0). For every evaluated sample the output is flattened (a [1, C] logit row and a
// [C] vector are the same) and the label counts as found when fewer than k scores rank above
// it, ties going to the lower class index (so top-1 is the first argmax). The value is
// found / samples in [0, 1]. Errors: no or unreadable labels file, fewer labels than the
// samples evaluated, an output index the model does not have, a label outside [0, C).
class TopKMetric final : public Metric {
 public:
  static ComponentInfo info(int64_t k);
  static Expected<std::unique_ptr<Metric>> create(int64_t k, const Options& options);

  Expected<double> evaluate(const MetricInput& input) const override;

 private:
  TopKMetric(int64_t k, std::string path, std::vector<int64_t> labels, int64_t output)
      : k_(k), path_(std::move(path)), labels_(std::move(labels)), output_(output) {}

  int64_t k_;
  std::string path_;
  std::vector<int64_t> labels_;
  int64_t output_;
};

}  // namespace qflow
