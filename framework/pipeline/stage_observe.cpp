// observer stages: run the interpreter over the calibration samples with an observer per
// tensor, sharded across threads so that the result never depends on the thread count.
#include "framework/pipeline/stage_util.h"

#include <algorithm>
#include <atomic>

#include "framework/core/sha256.h"
#include "framework/data/observe_sweep.h"
#include "framework/quant/output_cosine.h"
#include "framework/plugin/component_registry.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

// The outputs kept for later stages: 256 MiB (PP-OCRv4 rec: 1 MiB per sample).
constexpr int64_t kKeptOutputBytes = int64_t{256} << 20;

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
    if (!s.named.empty()) {  // only observers that define their own statistics have the key
      json.key("named").begin_object();
      for (const auto& [statistic, values] : s.named) {
        json.key(statistic);
        write_numbers(json, values);
      }
      json.end_object();
    }
    json.field("state", hex(observers.at(name)->serialize()));
    json.end_object();
  }
  json.end_object();
  json.end_object();
  auto text = json.finish();
  return text ? *text : std::string();
}

}  // namespace

// One observer per float32 value (graph input or node output), fed every sample once per
// pass by observe_dataset (framework/data/observe_sweep.h): fixed shards merged in shard
// order, so the artifact never depends on the thread count or batch-size, nor, for observers
// whose merge is order-independent, on the sample order.
Expected<StageResult> run_observer(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                   const ComponentRegistry& registry, const StageContext& context) {
  const Artifact& model_artifact = *inputs.at("model");
  const Dataset& dataset = *inputs.at("dataset")->dataset;
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, model_artifact));
  Expected<InputBinding> binding = bind_inputs(*model.graph, dataset);
  if (!binding) return binding.status().with_context("stage '" + stage.id + "'");
  // Single-threaded kernels: the parallelism is across shards; Executor::run is const and
  // keeps every intermediate in a per-call environment.
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));

  const Options options = options_of(stage);
  const ObserverFactory make = [&]() { return registry.make_observer(stage.component, options); };
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> probe, make());
  ProgressBar progress("stage '" + stage.id + "'", dataset.count * std::max(1, probe->passes()));
  ObserveOptions observe;
  observe.threads = context.threads;
  observe.progress = &progress;
  observe.world = context.world;
  // The model's outputs of the observed runs, for a calibrator stage after it that compares
  // with float on the same samples (the auto calibrator's output cosine). Only in one
  // process, where every sample is run here, and only up to kKeptOutputBytes in all.
  auto kept = std::make_shared<FloatOutputs>();
  std::atomic<int64_t> kept_bytes{0};
  std::atomic<bool> incomplete{false};
  if (context.keep_outputs && (!context.world || !context.world->distributed())) {
    kept->samples.resize(static_cast<std::size_t>(dataset.count));
    observe.outputs = [&](int64_t sample, const std::map<std::string, Tensor>& outputs) {
      if (incomplete || kept_bytes > kKeptOutputBytes) return;  // nothing will be kept: no copies
      std::vector<Tensor> ordered;
      for (const Value* out : model.graph->outputs) {
        auto it = outputs.find(out->name());
        if (it == outputs.end() || it->second.dtype() == DType::String) {
          incomplete = true;  // then later stages run the model themselves
          return;
        }
        ordered.push_back(it->second);
      }
      std::vector<float> flat = flatten_sample_outputs(ordered);
      if ((kept_bytes += static_cast<int64_t>(flat.size() * sizeof(float))) > kKeptOutputBytes) return;
      kept->samples[static_cast<std::size_t>(sample)] = std::move(flat);
    };
  }
  Expected<ObserverMap> observed = observe_dataset(*executor, *binding, dataset, make, observe);
  progress.finish();
  if (!observed) return observed.status().with_context("stage '" + stage.id + "'");
  const ObserverMap& merged = *observed;

  auto statistics = std::make_shared<std::map<std::string, TensorStatistics>>();
  for (const auto& [name, observer] : merged) (*statistics)[name] = observer->statistics();
  StageResult result;
  result.artifact.type = ArtifactType::Statistics;
  result.artifact.bytes = statistics_json(stage.component, dataset.count, merged, *statistics);
  result.artifact.statistics = statistics;
  if (observe.outputs && kept_bytes <= kKeptOutputBytes && !incomplete) {
    kept->model_sha256 = sha256_hex(model_artifact.bytes);
    kept->dataset = inputs.at("dataset")->dataset;
    result.artifact.outputs = std::move(kept);
  }
  return result;
}

}  // namespace qflow
