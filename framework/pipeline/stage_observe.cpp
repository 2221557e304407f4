// observer stages: run the interpreter over the calibration samples with an observer per tensor.
#include "framework/pipeline/stage_util.h"

#include <algorithm>

#include "framework/plugin/component_registry.h"
#include "framework/runtime/executor.h"

namespace qflow {

namespace {

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

std::string statistics_json(const std::string& component, int64_t samples,
                            const std::map<std::string, std::shared_ptr<Observer>>& observers,
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

}  // namespace

// One observer per float32 value (graph input or node output), fed every sample once per
// pass the observer asks for. Samples run one at a time in dataset order, so the result
// does not depend on any batch size or thread count.
Expected<StageResult> run_observer(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                   const ComponentRegistry& registry, const StageContext& context) {
  (void)context;
  const Artifact& model_artifact = *inputs.at("model");
  const Dataset& dataset = *inputs.at("dataset")->dataset;
  QFLOW_ASSIGN_OR_RETURN(Model model, model_input(stage, model_artifact));
  const std::vector<Value*> model_inputs = model.graph->runtime_inputs();
  if (model_inputs.size() != 1)
    return unsupported("stage '" + stage.id + "': the model has " + std::to_string(model_inputs.size()) +
                       " inputs; load-data feeds exactly one");
  const Value& input = *model_inputs[0];
  const Shape shape = feed_shape(input, dataset.sample_shape);
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));

  const Options options = options_of(stage);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> probe, registry.make_observer(stage.component, options));
  const int passes = std::max(1, probe->passes());
  std::map<std::string, std::shared_ptr<Observer>> observers;
  auto observe = [&](const std::string& name, const Tensor& tensor, int pass) -> Status {
    if (tensor.dtype() != DType::Float32) return Status::ok();
    auto it = observers.find(name);
    if (it == observers.end()) {
      if (pass > 0) return Status::ok();
      QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Observer> created, registry.make_observer(stage.component, options));
      QFLOW_RETURN_IF_ERROR(created->begin_pass(0));
      it = observers.emplace(name, std::move(created)).first;
    }
    return it->second->observe(tensor).with_context("observing '" + name + "'");
  };
  for (int pass = 0; pass < passes; ++pass) {
    if (pass > 0)
      for (auto& [name, observer] : observers) QFLOW_RETURN_IF_ERROR(observer->begin_pass(pass));
    QFLOW_RETURN_IF_ERROR(for_each_sample(dataset, [&](int64_t, const Tensor& sample) -> Status {
      const Tensor fed = sample.reshaped(shape);
      QFLOW_RETURN_IF_ERROR(observe(input.name(), fed, pass));
      auto outputs = executor->run({{input.name(), fed}}, [&](const Value& value, const Tensor& tensor) {
        return observe(value.name(), tensor, pass);
      });
      return outputs.status();
    }));
  }
  auto statistics = std::make_shared<std::map<std::string, TensorStatistics>>();
  for (const auto& [name, observer] : observers) (*statistics)[name] = observer->statistics();
  StageResult result;
  result.artifact.type = ArtifactType::Statistics;
  result.artifact.bytes = statistics_json(stage.component, dataset.count, observers, *statistics);
  result.artifact.statistics = statistics;
  return result;
}


}  // namespace qflow
