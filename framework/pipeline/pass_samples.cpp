// Pass samples: one sample of a dataset at a time, as the model's feeds.
#include "framework/pipeline/pass_samples.h"

namespace qflow {

Expected<DatasetPassSamples> DatasetPassSamples::bind(const Dataset& dataset, const Graph& graph) {
  QFLOW_ASSIGN_OR_RETURN(InputBinding binding, bind_inputs(graph, dataset));
  return DatasetPassSamples(dataset, std::move(binding));
}

Expected<std::map<std::string, Tensor>> DatasetPassSamples::sample(int64_t index) const {
  if (index < 0 || index >= dataset_->count)
    return invalid_input("sample " + std::to_string(index) + " is out of range (" + std::to_string(dataset_->count) +
                         " samples)");
  Feeds out;
  QFLOW_RETURN_IF_ERROR(for_each_feed_in(*dataset_, binding_, index, index + 1, [&](int64_t, const Feeds& feeds) {
    out = feeds;
    return Status::ok();
  }));
  return out;
}

}  // namespace qflow
