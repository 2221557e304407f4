// Binding dataset sources to model inputs.
#include "framework/data/input_feeds.h"

#include <algorithm>

namespace qflow {

namespace {

std::string input_names(const std::vector<Value*>& inputs) {
  std::string out;
  for (const Value* input : inputs) out += (out.empty() ? "'" : ", '") + input->name() + "'";
  return out;
}

// "float [1, 'N', 28, 28]"-like text of a declared input type, for messages.
std::string declared_type_text(const ValueType& type) {
  std::string out(dtype_name(type.dtype));
  if (!type.shape) return out + " of unknown rank";
  out += " [";
  for (std::size_t i = 0; i < type.shape->size(); ++i) {
    const Dim& d = (*type.shape)[i];
    out += (i ? ", " : "") + (d.value ? std::to_string(*d.value) : (d.param.empty() ? std::string("?") : d.param));
  }
  return out + "]";
}

// The samples must fit the input: same dtype, and the fed shape matching every static dim.
Status check_samples_fit(const Value& input, const SampleSource& source, const Shape& fed) {
  if (!input.type) return Status::ok();
  const ValueType& type = *input.type;
  bool ok = type.dtype == DType::Undefined || type.dtype == source.dtype;
  if (ok && type.shape) {
    ok = type.shape->size() == fed.size();
    for (std::size_t i = 0; ok && i < fed.size(); ++i) {
      const Dim& d = (*type.shape)[i];
      if (d.value && *d.value >= 0 && *d.value != fed[i]) ok = false;
    }
  }
  if (ok) return Status::ok();
  return invalid_input("samples are " + std::string(dtype_name(source.dtype)) + " " +
                       shape_to_string(source.sample_shape) + ", model input '" + input.name() + "' takes " +
                       declared_type_text(type));
}

}  // namespace

Expected<InputBinding> bind_inputs(const Graph& graph, const Dataset& dataset) {
  const std::vector<Value*> inputs = graph.runtime_inputs();
  InputBinding binding;
  if (dataset.sources.size() == 1 && dataset.first().input.empty()) {
    if (inputs.size() != 1)
      return invalid_input("the model has " + std::to_string(inputs.size()) + " inputs (" + input_names(inputs) +
                           ") and load-data one path; give one per input: path = \"NAME=PATH,NAME=PATH\"");
    const Shape shape = feed_shape(*inputs[0], dataset.first().sample_shape);
    QFLOW_RETURN_IF_ERROR(check_samples_fit(*inputs[0], dataset.first(), shape));
    binding.push_back({inputs[0]->name(), 0, shape});
    return binding;
  }
  for (std::size_t s = 0; s < dataset.sources.size(); ++s) {
    const SampleSource& source = dataset.sources[s];
    auto it = std::find_if(inputs.begin(), inputs.end(), [&](const Value* v) { return v->name() == source.input; });
    if (source.input.empty() || it == inputs.end())
      return invalid_input("load-data path '" + source.path + "' is for input '" + source.input +
                           "', the model's inputs are " + input_names(inputs));
    const Shape shape = feed_shape(**it, source.sample_shape);
    QFLOW_RETURN_IF_ERROR(check_samples_fit(**it, source, shape));
    binding.push_back({source.input, s, shape});
  }
  for (const Value* input : inputs) {
    const bool fed = std::any_of(binding.begin(), binding.end(), [&](const InputFeed& f) { return f.input == input->name(); });
    if (!fed) return invalid_input("model input '" + input->name() + "' has no samples: load-data's path names no source for it");
  }
  return binding;
}

Feeds make_feeds(const InputBinding& binding, const std::vector<Tensor>& samples) {
  Feeds feeds;
  for (const InputFeed& feed : binding) feeds.emplace(feed.input, samples[feed.source].reshaped(feed.shape));
  return feeds;
}

Status for_each_feed_in(const Dataset& dataset, const InputBinding& binding, int64_t begin, int64_t end,
                        const FeedVisitor& visit) {
  return for_each_sample_in(dataset, begin, end, [&](int64_t index, const std::vector<Tensor>& samples) {
    return visit(index, make_feeds(binding, samples));
  });
}

Expected<std::vector<Feeds>> read_feeds(const Dataset& dataset, const InputBinding& binding, int64_t limit) {
  const int64_t end = limit > 0 ? std::min(limit, dataset.count) : dataset.count;
  std::vector<Feeds> out;
  out.reserve(static_cast<std::size_t>(end));
  QFLOW_RETURN_IF_ERROR(for_each_feed_in(dataset, binding, 0, end, [&](int64_t, const Feeds& feeds) {
    out.push_back(feeds);
    return Status::ok();
  }));
  return out;
}

}  // namespace qflow
