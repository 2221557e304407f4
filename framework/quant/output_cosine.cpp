// Output cosine of a calibrated model against the float model, over the calibration samples.
#include "framework/quant/output_cosine.h"

#include <algorithm>
#include <cmath>

#include "framework/core/sha256.h"
#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/onnx/onnx_import.h"
#include "framework/quant/lane_sums.h"
#include "framework/quant/qdq_builder.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

// All graph outputs of one run, in output order.
Expected<std::vector<Tensor>> ordered_outputs(const Graph& graph, std::map<std::string, Tensor>& outputs) {
  std::vector<Tensor> ordered;
  for (const Value* out : graph.outputs) {
    auto it = outputs.find(out->name());
    if (it == outputs.end()) return internal_error("output '" + out->name() + "' was not computed");
    ordered.push_back(std::move(it->second));
  }
  return ordered;
}

std::vector<const Tensor*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : tensors) p.push_back(&t);
  return p;
}

}  // namespace

std::vector<float> flatten_sample_outputs(const std::vector<Tensor>& outputs) {
  std::vector<float> flat;
  for (const Tensor& t : outputs) {
    if (t.dtype() == DType::Float32) {
      flat.insert(flat.end(), t.data<float>(), t.data<float>() + t.numel());
    } else {
      for (double v : t.to_doubles()) flat.push_back(static_cast<float>(v));
    }
  }
  return flat;
}

namespace {

double cosine_of(const LaneSums& s) {
  const double dot = lane_tree(s.dot), na = lane_tree(s.float_sq), nb = lane_tree(s.quant_sq);
  if (na == 0.0 && nb == 0.0) return 1.0;
  if (na == 0.0 || nb == 0.0) return 0.0;
  return dot / (std::sqrt(na) * std::sqrt(nb));
}

}  // namespace

double cosine_similarity(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0.0;
  LaneSums s;
  add_lane_sums(a.data(), b.data(), static_cast<int64_t>(a.size()), 0, false, s);
  return cosine_of(s);
}

double cosine_similarity(const std::vector<float>& a, const std::vector<const Tensor*>& b) {
  std::size_t size = 0;
  for (const Tensor* t : b) size += static_cast<std::size_t>(t->numel());
  if (a.size() != size) return 0.0;
  // Piece by piece into the lanes of one sequence: the flat overload's sums to the last bit.
  LaneSums s;
  std::size_t i = 0;
  for (const Tensor* t : b) {
    const auto count = static_cast<std::size_t>(t->numel());
    if (t->dtype() == DType::Float32) {
      add_lane_sums(a.data() + i, t->data<float>(), static_cast<int64_t>(count), static_cast<int64_t>(i), false, s);
    } else {
      std::vector<float> y;
      for (const double v : t->to_doubles()) y.push_back(static_cast<float>(v));
      add_lane_sums(a.data() + i, y.data(), static_cast<int64_t>(count), static_cast<int64_t>(i), false, s);
    }
    i += count;
  }
  return cosine_of(s);
}

namespace {
constexpr int kEvaluationTag = 7401;
}  // namespace

OutputCosine::OutputCosine(const Dataset& dataset, const QuantConfig* config, int threads, const World* world)
    : dataset_(dataset),
      config_(config),
      threads_(std::max(1, threads)),
      world_(world && world->distributed() ? world : nullptr),
      slice_(my_slice(world_, dataset.count)) {}

OutputCosine::~OutputCosine() = default;

Expected<std::unique_ptr<OutputCosine>> OutputCosine::create(std::string float_model, const Dataset& dataset,
                                                             const QuantConfig* config, int threads,
                                                             std::shared_ptr<const FloatOutputs> known,
                                                             const World* world) {
  std::unique_ptr<OutputCosine> self(new OutputCosine(dataset, config, threads, world));
  QFLOW_ASSIGN_OR_RETURN(Model model, import_exported_copy(float_model, "output cosine: float model"));
  self->classifiers_ = ClassifierOutputs::expose(model);
  // Outputs computed elsewhere are the model's own: a classifier's logits are not among them.
  if (known && self->classifiers_.empty() && known->dataset.get() == &dataset &&
      static_cast<int64_t>(known->samples.size()) == dataset.count && known->model_sha256 == sha256_hex(float_model)) {
    self->float_outputs_ = known->samples;
    self->float_known_.assign(known->samples.size(), 1);
  }
  Expected<InputBinding> binding = bind_inputs(*model.graph, dataset);
  if (!binding) return binding.status().with_context("output cosine");
  self->binding_ = std::move(*binding);
  self->float_model_ = std::make_shared<Model>(std::move(model));
  return self;
}

// Reads samples in dataset order, `threads_` at a time, runs each batch in parallel and hands
// each sample's outputs, in output order, to `done` in sample order.
Status OutputCosine::run_samples(const Executor& executor, const ShardRange& slice,
                                 const std::function<Status(int64_t, std::vector<Tensor>)>& done) const {
  ThreadPool pool(threads_);
  const auto batch_size = static_cast<std::size_t>(threads_);
  std::vector<std::pair<int64_t, Feeds>> batch;
  auto flush = [&]() -> Status {
    std::vector<Expected<std::vector<Tensor>>> results(batch.size(), internal_error("sample not run"));
    pool.parallel_for(static_cast<int64_t>(batch.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const auto& [index, sample] = batch[static_cast<std::size_t>(i)];
        auto outputs = executor.run(sample);
        results[static_cast<std::size_t>(i)] =
            outputs ? ordered_outputs(*executor.model().graph, *outputs) : Expected<std::vector<Tensor>>(outputs.status());
      }
    });
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!results[i]) return results[i].status().with_context("sample " + std::to_string(batch[i].first));
      QFLOW_RETURN_IF_ERROR(done(batch[i].first, std::move(*results[i])));
    }
    if (bar_) bar_->advance(static_cast<int64_t>(batch.size()));
    batch.clear();
    return Status::ok();
  };
  QFLOW_RETURN_IF_ERROR(for_each_feed_in(dataset_, binding_, slice.begin, slice.end, [&](int64_t index, const Feeds& feeds) -> Status {
    batch.emplace_back(index, feeds);
    return batch.size() >= batch_size ? flush() : Status::ok();
  }));
  return flush();
}

Expected<double> OutputCosine::evaluate(const QuantTable& table, int64_t samples) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (dataset_.count == 0) return invalid_input("output cosine: the dataset has no samples");
  const int64_t count = samples > 0 ? std::min(samples, dataset_.count) : dataset_.count;
  std::vector<double> cosines(static_cast<std::size_t>(count), 0.0);
  Expected<double> own = mean_cosine(table, count == dataset_.count ? slice_ : my_slice(world_, count), cosines);
  if (!world_) return own;
  // Every rank reaches the exchange, also one whose samples failed.
  QFLOW_RETURN_IF_ERROR(share_slices(*world_, kEvaluationTag, cosines, own.status()));
  double sum = 0.0;  // in sample order, as one process sums
  for (const double c : cosines) sum += c;
  return sum / static_cast<double>(cosines.size());
}

// Runs this rank's samples `slice` of the calibrated model of `table` (the float model's
// first, once per sample), puts each sample's cosine at its index in `cosines` and returns
// the mean of this rank's.
Expected<double> OutputCosine::mean_cosine(const QuantTable& table, const ShardRange& slice,
                                           std::vector<double>& cosines) const {
  const int64_t mine = slice.end - slice.begin;
  float_outputs_.resize(static_cast<std::size_t>(dataset_.count));
  float_known_.resize(static_cast<std::size_t>(dataset_.count), 0);
  if (!std::all_of(float_known_.begin() + slice.begin, float_known_.begin() + slice.end, [](char k) { return k != 0; })) {
    if (bar_) bar_->restart("float outputs", "samples", mine);
    QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(*float_model_));
    if (!classifiers_.empty()) float_runs_.resize(static_cast<std::size_t>(dataset_.count));
    QFLOW_RETURN_IF_ERROR(run_samples(*executor, slice, [&](int64_t index, std::vector<Tensor> outputs) {
      const auto i = static_cast<std::size_t>(index);
      float_outputs_[i] = classifiers_.reference_values(pointers(outputs));
      if (!classifiers_.empty()) float_runs_[i] = std::move(outputs);
      float_known_[i] = 1;
      return Status::ok();
    }));
  }
  Model qdq = float_model_->copy();
  QdqOptions options;
  options.weights = false;
  QFLOW_RETURN_IF_ERROR(build_qdq_model(qdq, table, config_, options));
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(qdq));
  if (bar_) bar_->restart("table " + std::to_string(++tables_), "samples", mine);
  double sum = 0.0;
  QFLOW_RETURN_IF_ERROR(run_samples(*executor, slice, [&](int64_t index, std::vector<Tensor> outputs) -> Status {
    const auto i = static_cast<std::size_t>(index);
    if (i >= cosines.size() || !float_known_[i]) return internal_error("output cosine: the dataset grew between sweeps");
    cosines[i] = classifiers_.cosine(float_outputs_[i], pointers(outputs),
                                     classifiers_.empty() ? std::vector<const Tensor*>{} : pointers(float_runs_[i]));
    sum += cosines[i];  // in sample order
    return Status::ok();
  }));
  return sum / static_cast<double>(mine);
}

}  // namespace qflow
