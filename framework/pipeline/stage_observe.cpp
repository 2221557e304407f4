// observer stages: run the interpreter over the calibration samples with an observer per
// tensor, sharded across threads so that the result never depends on the thread count.
#include "framework/pipeline/stage_util.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "framework/data/progress_bar.h"
#include "framework/plugin/component_registry.h"
#include "framework/runtime/executor.h"

namespace qflow {

namespace {

// Samples per shard. Shard boundaries depend on nothing but the sample count, which is
// what makes the merged result independent of threads and batch-size.
constexpr int64_t kShardSamples = 32;

using ObserverMap = std::map<std::string, std::shared_ptr<Observer>>;

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::string statistics_json(const std::string& component, int64_t samples, const ObserverMap& observers,
                            const std::map<std::string, TensorStatistics>& statistics) {
  JsonWriter json;
  json.begin_object();
  json.field("component", component);
  json.field("samples", samples);
  json.key("tensors").begin_object();
  for (const auto& [name, s] : statistics) {
    json.key(name).begin_object();
    json.field("axis", s.axis);
    json.key("channel_max");
    write_numbers(json, s.channel_max);
    json.key("channel_min");
    write_numbers(json, s.channel_min);
    json.field("count", s.count);
    json.key("histogram");
    write_numbers(json, s.histogram);
    json.field("histogram_range", s.histogram_range);
    json.field("inf_count", s.inf_count);
    json.field("max", s.max);
    json.field("min", s.min);
    json.field("nan_count", s.nan_count);
    json.field("state", hex(observers.at(name)->serialize()));
    json.end_object();
  }
  json.end_object();
  json.end_object();
  auto text = json.finish();
  return text ? *text : std::string();
}

// "float [1, 'N', 28, 28]"-like text of a declared input type, as the message shows it.
std::string declared_text(const ValueType& type) {
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
Status check_samples_fit(const std::string& stage_id, const Value& input, const Dataset& dataset, const Shape& fed) {
  if (!input.type) return Status::ok();
  const ValueType& type = *input.type;
  bool ok = type.dtype == DType::Undefined || type.dtype == dataset.dtype;
  if (ok && type.shape) {
    ok = type.shape->size() == fed.size();
    for (std::size_t i = 0; ok && i < fed.size(); ++i) {
      const Dim& d = (*type.shape)[i];
      if (d.value && *d.value >= 0 && *d.value != fed[i]) ok = false;
    }
  }
  if (ok) return Status::ok();
  return invalid_input("stage '" + stage_id + "': samples are " + std::string(dtype_name(dataset.dtype)) + " " +
                       shape_to_string(dataset.sample_shape) + ", model input '" + input.name() + "' takes " +
                       declared_text(type));
}

// Everything a sweep needs; shards run on several threads, each with its own observers.
struct Sweep {
  Sweep(const PipelineStage& stage_in, const Dataset& dataset_in, const Executor& executor_in, const Value& input_in,
        Shape shape_in, const ComponentRegistry& registry_in, Options options_in)
      : stage(stage_in), dataset(dataset_in), executor(executor_in), input(input_in), shape(std::move(shape_in)),
        registry(registry_in), options(std::move(options_in)) {}

  const PipelineStage& stage;
  const Dataset& dataset;
  const Executor& executor;
  const Value& input;
  Shape shape;
  const ComponentRegistry& registry;
  Options options;
  std::mutex registry_mutex;  // factories are plugin code: called one at a time
  ProgressBar* progress = nullptr;
  std::atomic<bool> failed{false};

  Expected<std::shared_ptr<Observer>> make() {
    std::lock_guard<std::mutex> lock(registry_mutex);
    return registry.make_observer(stage.component, options);
  }

  Status observe(ObserverMap& observers, const std::string& name, const Tensor& tensor, int pass) {
    if (tensor.dtype() != DType::Float32) return Status::ok();
    auto it = observers.find(name);
    if (it == observers.end()) {
      if (pass > 0) return Status::ok();
      QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> created, make());
      QFLOW_RETURN_IF_ERROR(created->begin_pass(0));
      it = observers.emplace(name, std::move(created)).first;
    }
    return it->second->observe(tensor).with_context("observing '" + name + "'");
  }

  // Samples [begin, end) in dataset order into `observers`, read batch-size at a time.
  Status run_shard(ObserverMap& observers, int64_t begin, int64_t end, int pass) {
    const int64_t batch = std::max<int64_t>(1, dataset.spec.batch_size);
    std::vector<Tensor> samples;
    for (int64_t group = begin; group < end && !failed.load(); group += batch) {
      const int64_t group_end = std::min(end, group + batch);
      samples.clear();
      QFLOW_RETURN_IF_ERROR(for_each_sample_in(dataset, group, group_end, [&](int64_t, const Tensor& sample) {
        samples.push_back(sample);
        return Status::ok();
      }));
      for (std::size_t i = 0; i < samples.size(); ++i) {
        const Tensor fed = samples[i].reshaped(shape);
        Status status = observe(observers, input.name(), fed, pass);
        if (status.is_ok()) {
          auto outputs = executor.run({{input.name(), fed}}, [&](const Value& value, const Tensor& tensor) {
            return observe(observers, value.name(), tensor, pass);
          });
          status = outputs.status();
        }
        if (!status.is_ok()) return status.with_context(sample_location(dataset, group + static_cast<int64_t>(i)));
      }
      if (progress) progress->advance(group_end - group);
    }
    return Status::ok();
  }
};

// Merges shard states in shard order into the first shard's.
Expected<ObserverMap> merge_shards(std::vector<ObserverMap>& shards) {
  ObserverMap merged = std::move(shards[0]);
  for (std::size_t s = 1; s < shards.size(); ++s) {
    for (auto& [name, observer] : shards[s]) {
      auto it = merged.find(name);
      if (it == merged.end()) merged.emplace(name, observer);
      else QFLOW_RETURN_IF_ERROR(it->second->merge(*observer).with_context("merging observers of '" + name + "'"));
    }
  }
  return merged;
}

}  // namespace

// One observer per float32 value (graph input or node output). The samples are split into
// fixed shards of kShardSamples; each shard is observed by fresh observers on one thread, in
// dataset order, one sample at a time (batch axis 1), and the shards are merged in shard
// order. Multi-pass observers: after each pass the shards are merged into one state, every
// shard of the next pass starts from a copy of it (serialize/deserialize), gets
// begin_pass(k), and the copies are merged again at the end. Nothing depends on the thread
// count or batch-size; for observers whose merge is order-independent, not on the sample
// order either.
Expected<StageResult> run_observer(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                   const ComponentRegistry& registry, const StageContext& context) {
  const Artifact& model_artifact = *inputs.at("model");
  const Dataset& dataset = *inputs.at("dataset")->dataset;
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, model_artifact));
  const std::vector<Value*> model_inputs = model.graph->runtime_inputs();
  if (model_inputs.size() != 1)
    return unsupported("stage '" + stage.id + "': the model has " + std::to_string(model_inputs.size()) +
                       " inputs; load-data feeds exactly one");
  const Value& input = *model_inputs[0];
  const Shape shape = feed_shape(input, dataset.sample_shape);
  QFLOW_RETURN_IF_ERROR(check_samples_fit(stage.id, input, dataset, shape));
  // Single-threaded kernels: the parallelism is across shards; Executor::run is const and
  // keeps every intermediate in a per-call environment.
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));

  if (dataset.count <= 0) return invalid_input("stage '" + stage.id + "': the dataset holds no samples");
  Sweep sweep(stage, dataset, *executor, input, shape, registry, options_of(stage));
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> probe, sweep.make());
  const int passes = std::max(1, probe->passes());
  const int64_t shard_count = (dataset.count + kShardSamples - 1) / kShardSamples;
  const int workers = static_cast<int>(std::clamp<int64_t>(context.threads, 1, std::max<int64_t>(1, shard_count)));
  ProgressBar progress("stage '" + stage.id + "'", dataset.count * passes);
  sweep.progress = &progress;

  ObserverMap merged;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<ObserverMap> shards(static_cast<std::size_t>(shard_count));
    if (pass > 0) {
      for (const auto& [name, observer] : merged) {
        const std::string state = observer->serialize();
        for (ObserverMap& shard : shards) {
          QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> copy, sweep.make());
          QFLOW_RETURN_IF_ERROR(copy->deserialize(state).with_context("copying the observer state of '" + name + "'"));
          QFLOW_RETURN_IF_ERROR(copy->begin_pass(pass));
          shard.emplace(name, std::move(copy));
        }
      }
    }
    std::vector<Status> results(static_cast<std::size_t>(shard_count));
    std::atomic<int64_t> next{0};
    auto work = [&] {
      for (int64_t s = next++; s < shard_count && !sweep.failed.load(); s = next++) {
        const int64_t begin = s * kShardSamples;
        const int64_t end = std::min(dataset.count, begin + kShardSamples);
        Status status = sweep.run_shard(shards[static_cast<std::size_t>(s)], begin, end, pass);
        if (!status.is_ok()) {
          results[static_cast<std::size_t>(s)] = std::move(status);
          sweep.failed = true;
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < workers; ++t) threads.emplace_back(work);
    work();
    for (std::thread& thread : threads) thread.join();
    // The first failing shard in shard order, whichever thread got there first.
    for (const Status& status : results)
      if (!status.is_ok()) return status.with_context("stage '" + stage.id + "'");
    QFLOW_ASSIGN_OR_RETURN(merged, merge_shards(shards));
  }
  progress.finish();

  auto statistics = std::make_shared<std::map<std::string, TensorStatistics>>();
  for (const auto& [name, observer] : merged) (*statistics)[name] = observer->statistics();
  StageResult result;
  result.artifact.type = ArtifactType::Statistics;
  result.artifact.bytes = statistics_json(stage.component, dataset.count, merged, *statistics);
  result.artifact.statistics = statistics;
  return result;
}

}  // namespace qflow
