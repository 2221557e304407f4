// Pass samples: one sample of a dataset at a time, as the current model's feeds.
#include "framework/pipeline/pass_samples.h"

namespace qflow {

Expected<std::map<std::string, Tensor>> DatasetPassSamples::sample(int64_t index) const {
  if (index < 0 || index >= dataset_->count)
    return invalid_input("sample " + std::to_string(index) + " is out of range (" + std::to_string(dataset_->count) +
                         " samples)");
  // Binding checks names, dtypes and static dimensions only: cheap beside a model run.
  QFLOW_ASSIGN_OR_RETURN(InputBinding binding, bind_inputs(*model_->graph, *dataset_));
  Feeds out;
  QFLOW_RETURN_IF_ERROR(for_each_feed_in(*dataset_, binding, index, index + 1, [&](int64_t, const Feeds& feeds) {
    out = feeds;
    return Status::ok();
  }));
  return out;
}

}  // namespace qflow
